"""The RabbitMQ backend on a real RabbitMQ 3.10.8, beyond the conformance suite: what only a real
broker shows (streams made by other clients, another writer beside the gateway, tracking chunks
taking offsets, heartbeats), the catalog shared by two gateways, and the long-poll bound on the
real clock (the conformance suite checks it under autojump_clock).
"""

from __future__ import annotations

from functools import partial

import pytest
import trio
import trio.testing
from rstream import RawMessage

from gateway.backends.base import BackendUrlError
from gateway.backends.rabbitmq_stream import streams as rabbitmq_stream_streams
from gateway.backends.rabbitmq_stream.backend import (
    RabbitStreamBackend,
    open_rabbitmq_stream,
    parse_url,
)
from gateway.backends.rabbitmq_stream.conn import Connection
from gateway.backends.rabbitmq_stream.publisher import Publisher
from gateway.model import (
    Append,
    AppendResult,
    CommitOffset,
    CreateTopic,
    DescribeTopic,
    FetchOffset,
    ListOffsets,
    ListTopics,
    Message,
    MessageBatch,
    OffsetSpec,
    Read,
    Topic,
    TopicExists,
)
from gateway.translate.rabbitmq_stream.messages import WIRE_FORMAT, stored_batch
from protocols.rabbitmq_stream.chunk import SimpleEntry, encode_entry
from tests.helpers.rabbitmq_shared import shared_rabbitmq
from tests.helpers.rstream_direct import stream_exists

from .conftest import Broker, in_asyncio, publish_direct, read_direct

pytestmark = pytest.mark.slow

LIMIT_S = 30


def test_url() -> None:
    s = parse_url("rabbitmq-stream://u%40x:p%2Fw@broker:5553/%2F?heartbeat=5&frame_max=65536")
    assert (s.host, s.port, s.username, s.password, s.vhost) == ("broker", 5553, "u@x", "p/w", "/")
    assert (s.heartbeat_s, s.frame_max) == (5, 65536)
    s = parse_url("rabbitmq-stream://localhost/prod")
    assert (s.port, s.username, s.password, s.vhost) == (5552, "guest", "guest", "prod")
    assert parse_url("rabbitmq-stream://h:1").vhost == "/"
    for bad in ("kafka://h:1", "rabbitmq-stream:///x", "rabbitmq-stream://h:1/?heartbeat=x"):
        with pytest.raises(BackendUrlError):
            parse_url(bad)


async def test_long_poll_times_out_in_real_time(broker: Broker) -> None:
    topic = Topic("default", "idle")
    with trio.fail_after(LIMIT_S):
        async with open_rabbitmq_stream(broker.url) as backend:
            await backend.create_topic(CreateTopic(topic=topic, partitions=1))
            start = trio.current_time()
            r = await backend.read(Read(topic=topic, partition=0, offset=0, max_wait_ms=700))
            assert r.batches == ()
            assert 0.7 <= trio.current_time() - start < 2
            assert r.waited_s == pytest.approx(0.7, abs=0.2)


async def test_streams_made_by_rabbitmq_clients_are_topics(broker: Broker) -> None:
    """A stream rstream made, and a super stream made with rabbitmq-streams, are adopted into the
    catalog of the default stream on first use."""
    await in_asyncio(
        lambda: publish_direct(
            broker.rstream(), "direct", [RawMessage(b"r%d" % i) for i in range(3)]
        )
    )
    shared = await trio.to_thread.run_sync(shared_rabbitmq)
    await shared.server.rabbitmq_streams(
        "add_super_stream", "invoices", "--partitions", "3", "--vhost", broker.vhost
    )
    with trio.fail_after(LIMIT_S):
        async with open_rabbitmq_stream(broker.url) as backend:
            direct = Topic("default", "direct")
            [p] = (await backend.describe_topic(DescribeTopic(topic=direct))).info.partitions
            assert (p.log_start_offset, p.next_offset) == (0, 3)
            r = await backend.read(Read(topic=direct, partition=0, offset=1))
            assert [m.value for b in r.batches for m in b.messages] == [b"r1", b"r2"]
            invoices = Topic("default", "invoices")
            info = (await backend.describe_topic(DescribeTopic(topic=invoices))).info
            assert info.partition_count == 3
            await backend.append(
                Append(topic=invoices, partition=2, batch=MessageBatch([Message(value=b"i")]))
            )
            listed = (await backend.list_topics(ListTopics(stream="default"))).topics
            assert {t.topic.name for t in listed} == {"direct", "invoices"}
    got = await in_asyncio(lambda: read_direct(broker.rstream(), "invoices-2", 1))
    assert [entry[-1:] for _, entry, _ in got] == [b"i"]  # an AMQP message whose data is b"i"


async def test_append_offsets_are_exact_beside_another_writer(broker: Broker) -> None:
    """rstream writes the same stream directly while the gateway appends: each append's base
    offset is where its first message is, and its messages follow in order."""
    topic = Topic("default", "shared")
    results: list[tuple[AppendResult, list[bytes]]] = []
    with trio.fail_after(LIMIT_S):
        async with open_rabbitmq_stream(broker.url) as backend:
            await backend.create_topic(CreateTopic(topic=topic, partitions=1))

            async def other_writer() -> None:
                for k in range(10):
                    others = [RawMessage(b"other-%d-%d" % (k, i)) for i in range(20)]
                    await in_asyncio(partial(publish_direct, broker.rstream(), "shared", others))

            async def gateway_writer(w: int) -> None:
                for k in range(15):
                    values = [b"gw-%d-%d-%d" % (w, k, i) for i in range(4)]
                    batch = MessageBatch([Message(value=v) for v in values])
                    result = await backend.append(Append(topic=topic, partition=0, batch=batch))
                    results.append((result, values))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(other_writer)
                for w in range(3):
                    nursery.start_soon(gateway_writer, w)
            by_offset: dict[int, bytes] = {}
            offset = 0
            while True:
                r = await backend.read(Read(topic=topic, partition=0, offset=offset))
                got = [m for b in r.batches for m in b.messages]
                if not got:
                    break
                by_offset.update((m.offset, m.value) for m in got)
                offset = got[-1].offset + 1
    assert len(by_offset) == 10 * 20 + 3 * 15 * 4
    for result, values in results:
        assert by_offset[result.base_offset] == values[0], result
        ours = [v for o, v in sorted(by_offset.items()) if o >= result.base_offset]
        assert [v for v in ours if v in values] == values  # in order, maybe interleaved


async def test_offsets_zero_metadata_and_tracking_chunks(broker: Broker) -> None:
    """A committed NEXT of 0 and the metadata string live in the catalog; a stored offset is a
    tracking chunk that takes an offset, as on RabbitMQ (the next append skips it)."""
    topic = Topic("default", "offsets")
    with trio.fail_after(LIMIT_S):
        async with open_rabbitmq_stream(broker.url) as backend:
            await backend.create_topic(CreateTopic(topic=topic, partitions=1))
            fetch = FetchOffset(group="g", topic=topic, partition=0)
            await backend.commit_offset(CommitOffset(group="g", topic=topic, partition=0, offset=0))
            assert (await backend.fetch_offset(fetch)).offset == 0
            batch = MessageBatch([Message(value=b"%d" % i) for i in range(5)])
            first = await backend.append(Append(topic=topic, partition=0, batch=batch))
            assert first.base_offset == 0
            await backend.commit_offset(
                CommitOffset(group="g", topic=topic, partition=0, offset=3, metadata="m")
            )
            got = await backend.fetch_offset(fetch)
            assert (got.offset, got.metadata) == (3, "m")
            latest = ListOffsets(topic=topic, partition=0, spec=OffsetSpec.LATEST)
            assert (await backend.list_offsets(latest)).offset == 6  # 5 messages + 1 tracking
            second = await backend.append(Append(topic=topic, partition=0, batch=batch))
            assert second.base_offset == 6
        async with open_rabbitmq_stream(broker.url) as again:  # a new gateway: same answers
            got = await again.fetch_offset(fetch)
            assert (got.offset, got.metadata) == (3, "m")
            r = await again.read(Read(topic=topic, partition=0, offset=0))
            assert [m.offset for b in r.batches for m in b.messages] == [
                0,
                1,
                2,
                3,
                4,
                6,
                7,
                8,
                9,
                10,
            ]


async def test_two_gateways_share_the_catalog(broker: Broker) -> None:
    with trio.fail_after(LIMIT_S):
        async with (
            open_rabbitmq_stream(broker.url) as a,
            open_rabbitmq_stream(broker.url) as b,
        ):
            topic = Topic("s1", "t")
            await a.create_topic(CreateTopic(topic=topic, partitions=2))
            # b follows the catalog stream: there is no event of a's to await
            while topic not in {t.topic for t in (await b.list_topics(ListTopics())).topics}:  # noqa: ASYNC110
                await trio.sleep(0.02)
            assert (await b.describe_topic(DescribeTopic(topic=topic))).info.partition_count == 2
            batch = MessageBatch([Message(value=b"x")])
            await b.append(Append(topic=topic, partition=1, batch=batch))
    # A non-default stream's topics are prefixed on the broker: s1.t-0, s1.t-1.
    got = await in_asyncio(lambda: read_direct(broker.rstream(), "s1.t-1", 1))
    assert [entry[-1:] for _, entry, _ in got] == [b"x"]


async def _create(
    backend: RabbitStreamBackend, topic: Topic, partitions: int, outcomes: dict[str, int | str]
) -> None:
    try:
        await backend.create_topic(CreateTopic(topic=topic, partitions=partitions))
        outcomes[f"{partitions}"] = partitions
    except TopicExists:
        outcomes[f"{partitions}"] = "exists"


async def test_one_topic_when_two_gateways_create_it_at_once(broker: Broker) -> None:
    """The same name created through two gateways at the same moment, with different partition
    counts (so RabbitMQ itself refuses neither's streams): one create is acknowledged, the other
    told TopicExists; both gateways then describe the winner, and the loser's streams are gone.
    Repeated: the race goes either way."""
    with trio.fail_after(LIMIT_S):
        async with (
            open_rabbitmq_stream(broker.url) as a,
            open_rabbitmq_stream(broker.url) as b,
        ):
            for round_ in range(5):
                topic = Topic("default", f"race-{round_}")
                outcomes: dict[str, int | str] = {}
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(_create, a, topic, 1, outcomes)
                    nursery.start_soon(_create, b, topic, 2, outcomes)
                won = [v for v in outcomes.values() if v != "exists"]
                assert len(won) == 1 and list(outcomes.values()).count("exists") == 1, outcomes
                for backend in (a, b):
                    described = await backend.describe_topic(DescribeTopic(topic=topic))
                    assert described.info.partition_count == won[0]
                name = topic.name
                losers = [name] if won[0] == 2 else [f"{name}-0", f"{name}-1"]
                for stream in losers:
                    assert not await in_asyncio(partial(stream_exists, broker.rstream(), stream))


async def test_two_gateways_adopt_a_clients_stream_at_once(broker: Broker) -> None:
    """A stream a RabbitMQ client made, first used through two gateways at the same moment
    (Spark's write tasks do this): both adopt it, one record wins, and neither is told the topic
    exists. Repeated: the race goes either way."""
    names = [f"adopted-{i}" for i in range(5)]
    for name in names:
        await in_asyncio(partial(publish_direct, broker.rstream(), name, [RawMessage(b"x")]))
    with trio.fail_after(LIMIT_S):
        async with (
            open_rabbitmq_stream(broker.url) as a,
            open_rabbitmq_stream(broker.url) as b,
        ):
            for name in names:
                topic = Topic("default", name)
                counts: list[int] = []
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(_next_offset, a, topic, counts)
                    nursery.start_soon(_next_offset, b, topic, counts)
                assert counts == [1, 1]


async def _next_offset(backend: RabbitStreamBackend, topic: Topic, into: list[int]) -> None:
    info = (await backend.describe_topic(DescribeTopic(topic=topic))).info
    into.append(info.partitions[0].next_offset)


async def test_stored_entries_go_out_as_they_are(broker: Broker) -> None:
    topic = Topic("default", "wire")
    entries = [encode_entry(SimpleEntry(b"entry %d" % i)) for i in range(3)]
    wire = stored_batch(b"".join(entries), 3, timestamp_us=0)
    with trio.fail_after(LIMIT_S):
        async with open_rabbitmq_stream(broker.url) as backend:
            assert WIRE_FORMAT in backend.capabilities.wire_formats
            await backend.create_topic(CreateTopic(topic=topic, partitions=1))
            result = await backend.append(
                Append(topic=topic, partition=0, batch=MessageBatch(wire=wire))
            )
            assert (result.base_offset, result.count) == (0, 3)
            r = await backend.read(Read(topic=topic, partition=0, offset=0))
            [batch] = r.batches
            assert batch.wire is not None and batch.wire.data == wire.data
    got = await in_asyncio(lambda: read_direct(broker.rstream(), "wire", 3))
    assert [entry for _, entry, _ in got] == [b"entry %d" % i for i in range(3)]


async def test_heartbeats_keep_an_idle_connection(broker: Broker) -> None:
    """With a 1 s heartbeat RabbitMQ drops a silent client after 2-3 s (rabbitmq-stream.md §7)."""
    with trio.fail_after(LIMIT_S):
        async with open_rabbitmq_stream(broker.url + "?heartbeat=1") as backend:
            conn = backend.link.current()
            assert conn.tune.heartbeat == 1
            await trio.sleep(4)
            assert backend.link.current() is conn
            await backend.ping()


async def test_a_publish_cancelled_half_sent_is_not_kept(broker: Broker) -> None:
    """A Publish cancelled while the outbox is full is settled at once: kept, it would never be
    confirmed, and its publisher would never be idle (evictable) again."""
    topic = Topic("default", "cancelled")
    entry = encode_entry(SimpleEntry(b"x" * (512 << 10)))
    with trio.fail_after(LIMIT_S):
        async with open_rabbitmq_stream(broker.url) as backend:
            await backend.create_topic(CreateTopic(topic=topic, partitions=1))
            publisher = await backend.data.publisher("cancelled")
            with trio.CancelScope() as scope:
                scope.cancel()  # the first wait, for room in the outbox, raises Cancelled
                await publisher.send(entry * 12)  # 6 MiB: more than the outbox holds
            assert scope.cancelled_caught
            assert publisher.idle and publisher.usable
            batch = MessageBatch([Message(value=b"after")])
            result = await backend.append(Append(topic=topic, partition=0, batch=batch))
            r = await backend.read(Read(topic=topic, partition=0, offset=result.base_offset))
            assert [m.value for b in r.batches for m in b.messages] == [b"after"]


async def test_an_append_keeps_its_tail_while_its_publisher_is_declared(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With every tail in use, opening another must not evict one an append holds (it would
    publish, then fail although RabbitMQ took its messages)."""
    monkeypatch.setattr(rabbitmq_stream_streams, "MAX_TAILS", 1)
    a, b = Topic("default", "a"), Topic("default", "b")
    with trio.fail_after(LIMIT_S):
        async with open_rabbitmq_stream(broker.url) as backend:
            for topic in (a, b):
                await backend.create_topic(CreateTopic(topic=topic, partitions=1))
            await backend.read(Read(topic=a, partition=0, offset=0))  # a's tail, not b's
            declared = trio.Event()
            declare = Publisher.declare

            async def slow_declare(conn: Connection, stream: str, reference: str = "") -> Publisher:
                await declared.wait()
                return await declare(conn, stream, reference)

            monkeypatch.setattr(Publisher, "declare", slow_declare)
            results: list[AppendResult] = []

            async def appender() -> None:
                batch = MessageBatch([Message(value=b"a0")])
                results.append(await backend.append(Append(topic=a, partition=0, batch=batch)))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(appender)
                await trio.testing.wait_all_tasks_blocked()  # it waits for its publisher
                await backend.read(Read(topic=b, partition=0, offset=0))  # opens b's tail
                declared.set()
            assert [r.base_offset for r in results] == [0]
            r = await backend.read(Read(topic=a, partition=0, offset=0))
            assert [m.value for batch in r.batches for m in batch.messages] == [b"a0"]
