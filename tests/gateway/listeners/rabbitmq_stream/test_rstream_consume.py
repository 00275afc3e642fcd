"""rstream 1.1.1 consuming through the gateway (rabbitmq-stream.md §5 Consuming, §6): every offset
specification, stored offsets and resuming in a new client, credit flow."""

from __future__ import annotations

import pytest
from rstream import (
    Consumer,
    OffsetNotFound,
    OffsetType,
    Producer,
    RawMessage,
    StreamDoesNotExist,
)
from rstream.exceptions import StreamAlreadySubscribed

from gateway.app import Running

from .conftest import rstream_kwargs, run_client
from .rstream_support import Confirms, Inbox, bodies, clock_past, first, now_ms, publish, spec


async def publish_batch(port: int, stream: str, payloads: list[bytes]) -> None:
    """All payloads in one Publish frame, confirmed."""
    confirms = Confirms()
    async with Producer(**rstream_kwargs(port)) as producer:
        await producer.send_batch(
            stream, [RawMessage(p) for p in payloads], on_publish_confirm=confirms
        )
        assert all(ok for _, ok, _ in await confirms.until(len(payloads)))


async def test_first_and_offset(gateway: Running) -> None:
    sent = bodies("m", 10)

    async def scenario(host: str, port: int) -> None:
        await publish(port, "s", sent, create=True)
        from_first, from_4, at_end = Inbox(), Inbox(), Inbox()
        async with Consumer(**rstream_kwargs(port)) as a, Consumer(**rstream_kwargs(port)) as b:
            await a.subscribe("s", from_first, offset_specification=first())
            await b.subscribe("s", from_4, offset_specification=spec(OffsetType.OFFSET, 4))
            await from_first.until(10)
            await from_4.until(6)
            # One Consumer subscribes once per stream (a client-side rule).
            with pytest.raises(StreamAlreadySubscribed):
                await a.subscribe("s", Inbox())
        assert from_first.offsets == list(range(10))
        assert from_first.bodies == sent
        assert from_4.offsets == [4, 5, 6, 7, 8, 9]
        assert from_4.bodies == sent[4:]

        # An offset at the end waits there: the next message published is the first one.
        async with Consumer(**rstream_kwargs(port)) as c:
            await c.subscribe("s", at_end, offset_specification=spec(OffsetType.OFFSET, 10))
            await publish(port, "s", [b"m10"])
            await at_end.until(1)
        assert at_end.offsets == [10]
        assert at_end.bodies == [b"m10"]

    await run_client(gateway, scenario)


async def test_last_starts_with_the_last_chunk(gateway: Running) -> None:
    async def scenario(host: str, port: int) -> None:
        await publish(port, "s", bodies("m", 5), create=True)
        await publish_batch(port, "s", [b"b5", b"b6", b"b7"])  # one chunk, offsets 5..7
        inbox = Inbox()
        async with Consumer(**rstream_kwargs(port)) as consumer:
            await consumer.subscribe("s", inbox, offset_specification=spec(OffsetType.LAST))
            await inbox.until_offset(7)
            await publish(port, "s", [b"after"])
            await inbox.until_offset(8)
        # At least the last message; at most the whole last chunk (RabbitMQ sends the chunk
        # holding the last message and rstream does not filter for LAST, §6). Then it goes on.
        offsets = inbox.offsets
        assert offsets == list(range(offsets[0], 9))
        assert 5 <= offsets[0] <= 7
        assert inbox.bodies[-2:] == [b"b7", b"after"]

    await run_client(gateway, scenario)


async def test_next_gets_only_what_is_published_after_subscribing(gateway: Running) -> None:
    async def scenario(host: str, port: int) -> None:
        await publish(port, "s", bodies("old", 5), create=True)
        inbox = Inbox()
        async with Consumer(**rstream_kwargs(port)) as consumer:
            await consumer.subscribe("s", inbox, offset_specification=spec(OffsetType.NEXT))
            await publish(port, "s", bodies("new", 2))
            await inbox.until(2)
        # Anything older would have come first.
        assert inbox.offsets == [5, 6]
        assert inbox.bodies == [b"new0", b"new1"]

    await run_client(gateway, scenario)


async def test_timestamp_starts_at_the_first_chunk_at_or_after_it(gateway: Running) -> None:
    async def scenario(host: str, port: int) -> None:
        await publish(port, "s", bodies("before", 3), create=True)
        # Strictly after every "before" chunk's millisecond, and not after the next publish.
        mark = now_ms() + 1
        await clock_past(mark - 1)
        await publish_batch(port, "s", bodies("after", 3))
        await publish(port, "s", [b"last"])
        inbox = Inbox()
        async with Consumer(**rstream_kwargs(port)) as consumer:
            await consumer.subscribe(
                "s", inbox, offset_specification=spec(OffsetType.TIMESTAMP, mark)
            )
            await inbox.until_offset(6)
        assert inbox.offsets == [3, 4, 5, 6]
        assert inbox.bodies == [b"after0", b"after1", b"after2", b"last"]
        assert all(g.timestamp_ms >= mark for g in inbox.items)

        # A timestamp after everything behaves like NEXT.
        later = Inbox()
        async with Consumer(**rstream_kwargs(port)) as consumer:
            await consumer.subscribe(
                "s", later, offset_specification=spec(OffsetType.TIMESTAMP, now_ms() + 60_000)
            )
            await publish(port, "s", [b"newest"])
            await later.until(1)
        assert later.offsets == [7]

    await run_client(gateway, scenario)


async def test_stored_offset_resumes_in_a_new_client(gateway: Running) -> None:
    sent = bodies("m", 10)

    async def scenario(host: str, port: int) -> None:
        await publish(port, "s", sent, create=True)
        processed = Inbox()
        async with Consumer(**rstream_kwargs(port)) as consumer:
            await consumer.subscribe(
                "s", processed, offset_specification=first(), subscriber_name="app"
            )
            got = await processed.until(4)
            await consumer.store_offset("s", "app", got[3].offset)
            # StoreOffset is never answered; a query on the same connection comes after it.
            assert await consumer.query_offset("s", "app") == 3
            with pytest.raises(OffsetNotFound):
                await consumer.query_offset("s", "nobody")

        rest = Inbox()
        async with Consumer(**rstream_kwargs(port)) as consumer:
            stored = await consumer.query_offset("s", "app")
            assert stored == 3
            await consumer.subscribe(
                "s",
                rest,
                subscriber_name="app",
                offset_specification=spec(OffsetType.OFFSET, stored + 1),
            )
            await rest.until(6)
            # Storing again moves the offset (a later, larger one replaces it).
            await consumer.store_offset("s", "app", 9)
            assert await consumer.query_offset("s", "app") == 9
        assert rest.offsets == [4, 5, 6, 7, 8, 9]
        assert rest.bodies == sent[4:]

    await run_client(gateway, scenario)


async def test_query_offset_of_a_missing_stream_fails(gateway: Running) -> None:
    async def scenario(host: str, port: int) -> None:
        async with Consumer(**rstream_kwargs(port)) as consumer:
            with pytest.raises(StreamDoesNotExist):
                await consumer.query_offset("missing", "app")
            with pytest.raises(StreamDoesNotExist):
                await consumer.subscribe("missing", Inbox())

    await run_client(gateway, scenario)


async def test_credit_of_one_still_delivers_everything(gateway: Running) -> None:
    # One credit = one chunk outstanding; rstream sends Credit(1) after each Deliver (§6).
    sent = bodies("c", 30)

    async def scenario(host: str, port: int) -> None:
        await publish(port, "s", sent, create=True)
        inbox = Inbox()
        async with Consumer(**rstream_kwargs(port)) as consumer:
            await consumer.subscribe("s", inbox, offset_specification=first(), initial_credit=1)
            await inbox.until(30)
            await publish(port, "s", [b"tail"])
            await inbox.until(31)
        assert inbox.offsets == list(range(31))
        assert inbox.bodies == [*sent, b"tail"]

    await run_client(gateway, scenario)
