"""rstream 1.1.1 single active consumer through the gateway (rabbitmq-stream.md §5 Subscribe
properties, ConsumerUpdate): one consumer of a name receives at a time, the next takes over
after the offset the first stored; on a super stream the partitions spread over the consumers."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable

import pytest
from rstream import (
    Consumer,
    EventContext,
    RouteType,
    SuperStreamConsumer,
    SuperStreamProducer,
    amqp_decoder,
)

from gateway.app import Running

from .conftest import rstream_kwargs, run_client
from .rstream_support import (
    Confirms,
    Inbox,
    amqp,
    bodies,
    first,
    hash_partition,
    key_of,
    publish,
    resume_from_stored,
)

SAC = {"single-active-consumer": "true", "name": "ref"}


def recorder(
    events: list[tuple[str, str, bool]],
) -> Callable[[str], Callable[[bool, EventContext], None]]:
    """``seen(who)``: a ConsumerUpdate hook appending (who, stream, active) to ``events``."""

    def seen(who: str) -> Callable[[bool, EventContext], None]:
        def on_event(active: bool, ctx: EventContext) -> None:
            events.append((who, ctx.stream, active))

        return on_event

    return seen


# rstream sends every offset specification in a ConsumerUpdate answer with a uint64 value, also
# FIRST / LAST / NEXT, which RabbitMQ ignores; "offsets-only" answers OFFSET n throughout, so
# the hand-over is checked apart from that encoding.
LISTENER_STYLES = pytest.mark.parametrize(
    "offsets_only", [False, True], ids=["first-next", "offsets-only"]
)


@LISTENER_STYLES
async def test_the_next_consumer_takes_over_after_the_stored_offset(
    gateway: Running, offsets_only: bool
) -> None:
    events: list[tuple[str, str, bool]] = []
    seen = recorder(events)

    async def scenario(host: str, port: int) -> None:
        await publish(port, "s", bodies("m", 5), create=True)
        one, two = Inbox(), Inbox()
        first_consumer = Consumer(**rstream_kwargs(port))
        second = Consumer(**rstream_kwargs(port))
        try:
            await first_consumer.subscribe(
                "s",
                one,
                properties=SAC,
                offset_specification=first(),
                consumer_update_listener=resume_from_stored(seen("one"), offsets_only=offsets_only),
            )
            await one.until(5)
            await first_consumer.store_offset("s", "ref", 4)
            assert await first_consumer.query_offset("s", "ref") == 4
            # FIRST on purpose: taking over must start after the stored offset, not there.
            await second.subscribe(
                "s",
                two,
                properties=SAC,
                offset_specification=first(),
                consumer_update_listener=resume_from_stored(seen("two"), offsets_only=offsets_only),
            )
            await publish(port, "s", bodies("m", 5, start=5))
            await one.until(10)
            # 8 and 9 are processed but not committed: the next consumer gets them again.
            await first_consumer.store_offset("s", "ref", 7)
            assert await first_consumer.query_offset("s", "ref") == 7
            assert two.items == []  # inactive while the first one is there
            await first_consumer.close()
            await two.until(2)
            await publish(port, "s", bodies("m", 3, start=10))
            await two.until(5)
        finally:
            await first_consumer.close()
            await second.close()
        assert one.offsets == list(range(10))
        assert two.offsets == [8, 9, 10, 11, 12]
        assert two.bodies == bodies("m", 5, start=8)
        assert set(one.offsets) | set(two.offsets) == set(range(13))
        assert events == [("one", "s", True), ("two", "s", True)]

    await run_client(gateway, scenario)


async def test_without_a_listener_the_active_consumer_starts_at_next(gateway: Running) -> None:
    # The plainest SAC use: no consumer_update_listener, so rstream answers the activation with
    # NEXT (and its uint64 value 0); what is published once the consumer is active arrives, the
    # Subscribe's FIRST is not used.
    async def scenario(host: str, port: int) -> None:
        await publish(port, "s", bodies("old", 3), create=True)
        inbox = Inbox()
        async with Consumer(**rstream_kwargs(port)) as consumer:
            await consumer.subscribe(
                "s",
                inbox,
                offset_specification=first(),
                properties={"single-active-consumer": "true", "name": "n"},
            )
            # No event marks the activation on the client side: publish until one arrives.
            sent: list[bytes] = []
            while not inbox.items:
                assert len(sent) < 5, f"nothing delivered after {len(sent)} publishes"
                sent += bodies("new", 1, start=len(sent))
                await publish(port, "s", sent[-1:])
                with contextlib.suppress(AssertionError):
                    await inbox.until(1, limit_s=0.5)
            await inbox.until_offset(2 + len(sent))
        assert inbox.bodies == sent[-len(inbox.items) :]
        assert inbox.offsets == list(range(3 + len(sent) - len(inbox.items), 3 + len(sent)))

    await run_client(gateway, scenario)


@LISTENER_STYLES
async def test_super_stream_partitions_spread_over_active_consumers(
    gateway: Running, offsets_only: bool
) -> None:
    partitions = ["inv-0", "inv-1", "inv-2"]
    props = {"single-active-consumer": "true", "name": "grp", "super-stream": "inv"}
    # Keys that cover every partition, as rstream's hash routing places them.
    keys = [f"k{i}" for i in range(12)]
    assert {hash_partition(k, 3) for k in keys} == {0, 1, 2}
    events: list[tuple[str, str, bool]] = []
    seen = recorder(events)

    async def send_all(port: int, tag: str) -> list[bytes]:
        confirms = Confirms()
        sent = [f"{tag}/{k}".encode() for k in keys]
        async with SuperStreamProducer(
            **rstream_kwargs(port),
            super_stream="inv",
            routing=RouteType.Hash,
            routing_extractor=key_of,
        ) as producer:
            for k, body in zip(keys, sent, strict=True):
                await producer.send(
                    amqp(body, application_properties={"key": k}), on_publish_confirm=confirms
                )
            assert all(ok for _, ok, _ in await confirms.until(len(sent)))
        return sent

    def streams_of(inbox: Inbox) -> set[str]:
        return {g.stream for g in inbox.items}

    async def scenario(host: str, port: int) -> None:
        creator = SuperStreamProducer(
            **rstream_kwargs(port), super_stream="inv", routing_extractor=key_of
        )
        try:
            await creator.create_super_stream("inv", n_partitions=3)
        finally:
            await creator.close()
        one, two = Inbox(), Inbox()
        c1 = SuperStreamConsumer(**rstream_kwargs(port), super_stream="inv")
        c2 = SuperStreamConsumer(**rstream_kwargs(port), super_stream="inv")
        bookkeeper = Consumer(**rstream_kwargs(port))
        try:
            await c1.subscribe(
                one,
                decoder=amqp_decoder,
                properties=props,
                offset_specification=first(),
                consumer_update_listener=resume_from_stored(seen("one"), offsets_only=offsets_only),
            )
            await c2.subscribe(
                two,
                decoder=amqp_decoder,
                properties=props,
                offset_specification=first(),
                consumer_update_listener=resume_from_stored(seen("two"), offsets_only=offsets_only),
            )
            sent = await send_all(port, "a")
            await one.until(sum(1 for k in keys if hash_partition(k, 3) != 1))
            await two.until(sum(1 for k in keys if hash_partition(k, 3) == 1))
            # Partition i goes to consumer i mod 2, in the order they came (as RabbitMQ).
            assert streams_of(one) == {"inv-0", "inv-2"}
            assert streams_of(two) == {"inv-1"}
            assert Counter(one.bodies + two.bodies) == Counter(sent)
            # The first consumer commits what it processed, then leaves.
            for stream in ("inv-0", "inv-2"):
                last = max(g.offset for g in one.items if g.stream == stream)
                await bookkeeper.store_offset(stream, "grp", last)
                assert await bookkeeper.query_offset(stream, "grp") == last
            before = len(two.items)
            await c1.close()
            more = await send_all(port, "b")
            await two.until(before + len(more))
        finally:
            await c1.close()
            await c2.close()
            await bookkeeper.close()
        # The second one now has every partition, and resumed after the stored offsets.
        assert streams_of(two) == set(partitions)
        assert Counter(one.bodies + two.bodies) == Counter(sent + more)
        assert ("one", "inv-1", False) in events  # handed over when the second one came
        assert sorted(e for e in events if e[0] == "two") == [
            ("two", "inv-0", True),
            ("two", "inv-1", True),
            ("two", "inv-2", True),
        ]

    await run_client(gateway, scenario)
