"""What every backend must do, written only against the ``Backend`` protocol and the model."""

from __future__ import annotations

import contextlib
import dataclasses
import uuid

import pytest
import trio
import trio.testing

from gateway.backends.base import Backend, NativeProducerIds
from gateway.backends.embedded import batch_codec
from gateway.model import (
    DEFAULT_STREAM,
    AlreadyExists,
    Append,
    AppendResult,
    CommitOffset,
    CreatePartitions,
    CreateStream,
    CreateTopic,
    DeleteOffset,
    DeletePartitions,
    DeleteStream,
    DeleteTopic,
    DescribeTopic,
    FetchOffset,
    Header,
    HeaderKind,
    InitProducer,
    InvalidPartitions,
    InvalidRequest,
    ListOffsets,
    ListStreams,
    ListTopics,
    Message,
    MessageBatch,
    MessageTooLarge,
    OffsetOutOfRange,
    OffsetSpec,
    ProducerFenced,
    PurgeTopic,
    Read,
    SequenceError,
    Stats,
    Topic,
    TopicConfig,
    UnknownPartition,
    UnknownStream,
    UnknownTopic,
    WireBatch,
)


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def _stream(backend: Backend) -> str:
    return _name("s") if backend.capabilities.streams else DEFAULT_STREAM


async def new_topic(
    backend: Backend, partitions: int = 1, config: TopicConfig | None = None
) -> Topic:
    topic = Topic(_stream(backend), _name("t"))
    await backend.create_topic(
        CreateTopic(topic=topic, partitions=partitions, config=config or TopicConfig())
    )
    return topic


def msgs(n: int, *, start: int = 0, size: int = 10) -> list[Message]:
    return [Message(value=f"{i:0{size}d}".encode()) for i in range(start, start + n)]


async def append(
    backend: Backend, topic: Topic, messages: list[Message], p: int = 0
) -> AppendResult:
    return await backend.append(Append(topic=topic, partition=p, batch=MessageBatch(messages)))


async def read_all(backend: Backend, topic: Topic, p: int = 0, offset: int = 0) -> list[Message]:
    out: list[Message] = []
    while True:
        result = await backend.read(Read(topic=topic, partition=p, offset=offset))
        got = [m for b in result.batches for m in b.messages if m.offset >= offset]
        if not got:
            return out
        out.extend(got)
        offset = got[-1].offset + 1


def _values(messages: list[Message]) -> list[bytes]:
    return [m.value for m in messages]


# --- streams and topics ------------------------------------------------------------------------


async def test_streams_create_list_delete(backend: Backend) -> None:
    if not backend.capabilities.streams:
        pytest.skip("capabilities.streams is False: only the default stream exists")
    with trio.fail_after(10):
        name = _name("s")
        info = (await backend.create_stream(CreateStream(stream=name))).info
        assert info.name == name and info.id >= 0
        listed = (await backend.list_streams(ListStreams())).streams
        assert [s.id for s in listed if s.name == name] == [info.id]
        with pytest.raises(AlreadyExists):
            await backend.create_stream(CreateStream(stream=name))
        with pytest.raises(AlreadyExists):
            await backend.create_stream(CreateStream(stream=_name("s"), id=info.id))
        chosen = max(s.id for s in listed) + 10
        other = (await backend.create_stream(CreateStream(stream=_name("s"), id=chosen))).info
        assert other.id == chosen
        await backend.delete_stream(DeleteStream(stream=name))
        listed = (await backend.list_streams(ListStreams())).streams
        assert name not in {s.name for s in listed}
        with pytest.raises(UnknownStream):
            await backend.delete_stream(DeleteStream(stream=name))


async def test_topics_create_list_describe_delete(backend: Backend) -> None:
    with trio.fail_after(10):
        topic = await new_topic(backend, partitions=3)
        info = (await backend.describe_topic(DescribeTopic(topic=topic))).info
        assert info.topic == topic and info.partition_count == 3
        assert [p.partition for p in info.partitions] == [0, 1, 2]
        assert all(p.next_offset == 0 == p.log_start_offset for p in info.partitions)
        listed = (await backend.list_topics(ListTopics(stream=topic.stream))).topics
        assert [t.id for t in listed if t.topic == topic] == [info.id]
        everywhere = (await backend.list_topics(ListTopics())).topics
        assert topic in {t.topic for t in everywhere}
        with pytest.raises(AlreadyExists):
            await backend.create_topic(CreateTopic(topic=topic, partitions=1))
        await backend.delete_topic(DeleteTopic(topic=topic))
        with pytest.raises(UnknownTopic):
            await backend.describe_topic(DescribeTopic(topic=topic))
        with pytest.raises(UnknownTopic):
            await backend.delete_topic(DeleteTopic(topic=topic))
        with pytest.raises(UnknownTopic):
            await append(backend, topic, msgs(1))


async def test_topic_errors(backend: Backend) -> None:
    with trio.fail_after(10):
        if backend.capabilities.streams:
            missing = Topic(_name("nostream"), "t")
            with pytest.raises(UnknownStream):
                await backend.create_topic(
                    CreateTopic(topic=missing, partitions=1, create_stream=False)
                )
            with pytest.raises(UnknownStream):
                await backend.describe_topic(DescribeTopic(topic=missing))
            with pytest.raises(UnknownStream):
                await backend.list_topics(ListTopics(stream=missing.stream))
        with pytest.raises(InvalidRequest):
            await backend.create_topic(CreateTopic(topic=Topic(_stream(backend), ""), partitions=1))
        with pytest.raises(InvalidPartitions):
            await new_topic(backend, partitions=0)
        topic = await new_topic(backend, partitions=2)
        with pytest.raises(UnknownPartition) as exc:
            await append(backend, topic, msgs(1), p=2)
        assert exc.value.partitions == 2
        with pytest.raises(UnknownPartition):
            await backend.read(Read(topic=topic, partition=-1, offset=0))


async def test_create_topic_creates_its_stream(backend: Backend) -> None:
    if not backend.capabilities.streams:
        pytest.skip("capabilities.streams is False: only the default stream exists")
    with trio.fail_after(10):
        topic = Topic(_name("s"), "t")
        await backend.create_topic(CreateTopic(topic=topic, partitions=1, create_stream=True))
        streams = (await backend.list_streams(ListStreams())).streams
        assert [len(s.topics) for s in streams if s.name == topic.stream] == [1]


async def test_partitions_grow_and_shrink(backend: Backend) -> None:
    with trio.fail_after(10):
        topic = await new_topic(backend, partitions=2)
        await append(backend, topic, msgs(3), p=1)
        info = (await backend.create_partitions(CreatePartitions(topic=topic, total=4))).info
        assert info.partition_count == 4
        assert info.partitions[1].next_offset == 3
        await append(backend, topic, msgs(2), p=3)
        with pytest.raises(InvalidPartitions):
            await backend.create_partitions(CreatePartitions(topic=topic, total=4))
        info = (await backend.delete_partitions(DeletePartitions(topic=topic, total=2))).info
        assert info.partition_count == 2
        with pytest.raises(UnknownPartition) as exc:
            await append(backend, topic, msgs(1), p=3)
        assert exc.value.partitions == 2
        assert _values(await read_all(backend, topic, p=1)) == _values(msgs(3))
        with pytest.raises(InvalidPartitions):
            await backend.delete_partitions(DeletePartitions(topic=topic, total=0))


# --- append and read ---------------------------------------------------------------------------


async def test_round_trip_keeps_every_field(backend: Backend) -> None:
    sent = [
        Message(value=b"plain"),
        Message(value=b"", key=b""),  # empty key is not no key
        Message(value=b"keyed", key=b"k1"),
        Message(
            value=b"typed headers",
            headers=(
                Header("a", b"1"),
                Header("s", "héllo".encode(), HeaderKind.STRING),
                Header("a", b"2"),  # a duplicate name, after another header: order kept
                Header("n", (7).to_bytes(8, "little"), HeaderKind.UINT64),
                Header("z", b"", HeaderKind.NULL),
            ),
        ),
        Message(value=b"stamped", timestamp_us=1_600_000_000_123_456),
        Message(value=b"id", id=(1 << 128) - 1),
        Message(value=bytes(range(256)) * 4, key=b"\x00\xff", id=42),
    ]
    with trio.fail_after(10):
        topic = await new_topic(backend)
        result = await append(backend, topic, sent)
        assert (result.base_offset, result.count, result.last_offset) == (0, 7, 6)
        got = await read_all(backend, topic)
    assert [m.offset for m in got] == list(range(7))
    for s, g in zip(sent, got, strict=True):
        assert (g.value, g.key, g.headers, g.id) == (s.value, s.key, s.headers, s.id)
        assert [h.kind for h in g.headers] == [h.kind for h in s.headers]
    assert got[4].timestamp_us == 1_600_000_000_123_456
    assert all(m.timestamp_us > 0 for m in got)  # unset ones were stamped on append


async def test_wire_batch_in_a_stored_format_round_trips(backend: Backend) -> None:
    if batch_codec.FORMAT not in backend.capabilities.wire_formats:
        pytest.skip("capabilities.wire_formats lacks sg1")
    sent = [Message(value=b"v%d" % i, key=b"k", timestamp_us=1000 + i) for i in range(5)]
    wire = WireBatch(
        format=batch_codec.FORMAT,
        data=batch_codec.encode(sent),
        count=5,
        first_timestamp_us=1000,
        max_timestamp_us=1004,
    )
    with trio.fail_after(10):
        topic = await new_topic(backend)
        await backend.append(Append(topic=topic, partition=0, batch=MessageBatch(wire=wire)))
        result = await backend.read(Read(topic=topic, partition=0, offset=0))
    [batch] = result.batches
    assert batch.wire is not None and batch.wire.data == wire.data  # stored and served as-is
    assert [m.value for m in batch.messages] == [m.value for m in sent]
    assert [m.offset for m in batch.messages] == list(range(5))


async def test_offsets_contiguous_across_batches(backend: Backend) -> None:
    with trio.fail_after(10):
        topic = await new_topic(backend)
        bases = [
            (await append(backend, topic, msgs(n, start=100 * n))).base_offset
            for n in (1, 5, 3, 10, 1)
        ]
        assert bases == [0, 1, 6, 9, 19]
        got = await read_all(backend, topic)
    assert [m.offset for m in got] == list(range(20))


async def test_concurrent_appenders_get_contiguous_offsets(backend: Backend) -> None:
    results: list[AppendResult] = []
    with trio.fail_after(10):
        topic = await new_topic(backend)

        async def producer(k: int) -> None:
            for j in range(10):
                results.append(await append(backend, topic, msgs(3, start=1000 * k + 10 * j)))

        async with trio.open_nursery() as nursery:
            for k in range(5):
                nursery.start_soon(producer, k)
        got = await read_all(backend, topic)
    assert sorted(r.base_offset for r in results) == list(range(0, 150, 3))
    assert [m.offset for m in got] == list(range(150))
    by_offset = {m.offset: m.value for m in got}
    for r in results:  # each batch landed whole, at the offsets its append reported
        values = [by_offset[o] for o in range(r.base_offset, r.base_offset + 3)]
        first = int(values[0])
        assert values == [f"{first + i:010d}".encode() for i in range(3)]


async def test_read_from_the_middle_of_a_batch(backend: Backend) -> None:
    with trio.fail_after(10):
        topic = await new_topic(backend)
        await append(backend, topic, msgs(10))
        await append(backend, topic, msgs(10, start=10))
        result = await backend.read(Read(topic=topic, partition=0, offset=4))
    got = [m for b in result.batches for m in b.messages]
    assert [m.offset for m in got] == list(range(4, 20))
    assert _values(got) == _values(msgs(16, start=4))
    assert result.high_watermark == 20


async def test_max_messages_and_max_bytes(backend: Backend) -> None:
    with trio.fail_after(10):
        topic = await new_topic(backend)
        for k in range(10):
            await append(backend, topic, msgs(10, start=10 * k, size=100))
        r = await backend.read(Read(topic=topic, partition=0, offset=3, max_messages=5))
        assert [m.offset for b in r.batches for m in b.messages] == [3, 4, 5, 6, 7]
        r = await backend.read(Read(topic=topic, partition=0, offset=0, max_messages=15))
        assert [m.offset for b in r.batches for m in b.messages] == list(range(15))
        # max_bytes smaller than one batch: still one batch, so a reader always progresses.
        r = await backend.read(Read(topic=topic, partition=0, offset=0, max_bytes=1))
        assert r.count >= 1 and r.batches[0].messages[0].offset == 0
        r = await backend.read(Read(topic=topic, partition=0, offset=95, max_bytes=1))
        assert next(m.offset for b in r.batches for m in b.messages) == 95
        r = await backend.read(Read(topic=topic, partition=0, offset=0, max_bytes=2500))
        assert 10 <= r.count < 100


async def test_read_at_high_watermark_and_out_of_range(backend: Backend) -> None:
    with trio.fail_after(10):
        topic = await new_topic(backend)
        r = await backend.read(Read(topic=topic, partition=0, offset=0))
        assert r.batches == () and r.high_watermark == 0
        await append(backend, topic, msgs(5))
        r = await backend.read(Read(topic=topic, partition=0, offset=5))
        assert r.batches == () and r.high_watermark == 5 and r.log_start_offset == 0
        with pytest.raises(OffsetOutOfRange) as exc:
            await backend.read(Read(topic=topic, partition=0, offset=6))
        assert (exc.value.log_start, exc.value.log_end) == (0, 5)


async def test_long_poll_woken_by_append(backend: Backend) -> None:
    with trio.fail_after(10):
        topic = await new_topic(backend)
        await append(backend, topic, msgs(2))
        async with trio.open_nursery() as nursery:
            got: list[int] = []

            async def reader() -> None:
                r = await backend.read(Read(topic=topic, partition=0, offset=2, max_wait_ms=30_000))
                got.extend(m.offset for b in r.batches for m in b.messages)

            nursery.start_soon(reader)
            await trio.testing.wait_all_tasks_blocked()
            await append(backend, topic, msgs(3, start=2))
        assert got == [2, 3, 4]


# Real time, not a mock clock: a remote backend's read waits on real sockets, which a jumping
# clock would cut short (a long poll whose first fetch is cut answers "nothing" for data that
# is there: what the Kafka backend once did). The bounds are the behaviour, not a speed.
async def test_long_poll_times_out(backend: Backend) -> None:
    topic = await new_topic(backend)  # outside fail_after: setup may wait on threads
    with trio.fail_after(10):
        start = trio.current_time()
        r = await backend.read(Read(topic=topic, partition=0, offset=0, max_wait_ms=1000))
        assert r.batches == ()
        assert 1 - 1e-6 <= trio.current_time() - start < 5
        assert r.waited_s == pytest.approx(1, abs=0.5)


async def test_long_poll_waits_for_min_bytes(backend: Backend) -> None:
    with trio.fail_after(10):
        topic = await new_topic(backend)
        async with trio.open_nursery() as nursery:
            got: list[int] = []

            async def reader() -> None:
                r = await backend.read(
                    Read(topic=topic, partition=0, offset=0, max_wait_ms=30_000, min_bytes=2000)
                )
                got.append(r.count)

            nursery.start_soon(reader)
            await trio.testing.wait_all_tasks_blocked()
            await append(backend, topic, msgs(1))
            await trio.testing.wait_all_tasks_blocked()
            assert got == []  # 1 small message is less than min_bytes
            await append(backend, topic, msgs(10, size=300))
        assert got == [11]


async def test_wait_for_data_without_messages(backend: Backend) -> None:
    """``max_messages=0`` is the Kafka listener's wait for data (its Fetch long poll): it ends
    as soon as there is data at the offset, and waits like any long poll when there is none."""
    with trio.fail_after(10):
        topic = await new_topic(backend)
        await append(backend, topic, msgs(2))
        wait = Read(topic=topic, partition=0, offset=0, max_messages=0, max_bytes=1,
                    max_wait_ms=30_000)  # fmt: skip
        r = await backend.read(wait)
        assert (r.batches, r.high_watermark) == ((), 2)
        got: list[tuple[int, int]] = []

        async def waiter() -> None:
            r = await backend.read(dataclasses.replace(wait, offset=2))
            got.append((r.count, r.high_watermark))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(waiter)
            await trio.testing.wait_all_tasks_blocked()
            assert got == []  # no data at offset 2 yet: it waits
            await append(backend, topic, msgs(1, start=2))
        assert got == [(0, 3)]


async def test_wait_for_data_without_messages_times_out(backend: Backend) -> None:
    topic = await new_topic(backend)  # outside fail_after: setup may wait on threads
    with trio.fail_after(10):
        start = trio.current_time()
        r = await backend.read(
            Read(topic=topic, partition=0, offset=0, max_messages=0, max_bytes=1,
                 max_wait_ms=1000)
        )  # fmt: skip
        assert r.batches == ()
        assert 1 - 1e-6 <= trio.current_time() - start < 5  # real time (above)


async def test_deleting_a_topic_wakes_its_long_polls(backend: Backend) -> None:
    with trio.fail_after(10):
        topic = await new_topic(backend)
        errors: list[Exception] = []

        async def reader() -> None:
            try:
                await backend.read(Read(topic=topic, partition=0, offset=0, max_wait_ms=30_000))
            except UnknownTopic as exc:
                errors.append(exc)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(reader)
            await trio.testing.wait_all_tasks_blocked()
            await backend.delete_topic(DeleteTopic(topic=topic))
        assert len(errors) == 1


async def test_append_rejects_empty_and_too_large(backend: Backend) -> None:
    with trio.fail_after(10):
        topic = await new_topic(backend, config=TopicConfig(max_message_bytes=1000))
        with pytest.raises(InvalidRequest):
            await append(backend, topic, [])
        with pytest.raises(MessageTooLarge):
            await append(backend, topic, [Message(value=b"x" * 2000)])
        await append(backend, topic, [Message(value=b"x" * 900) for _ in range(5)])  # per message
        r = await backend.read(Read(topic=topic, partition=0, offset=0))
        assert r.count == 5


# --- offsets -----------------------------------------------------------------------------------


async def test_list_offsets(backend: Backend) -> None:
    def spec(s: OffsetSpec, ts: int = 0) -> ListOffsets:
        return ListOffsets(topic=topic, partition=0, spec=s, timestamp_us=ts)

    with trio.fail_after(10):
        topic = await new_topic(backend)
        assert (await backend.list_offsets(spec(OffsetSpec.LATEST))).offset == 0
        assert (await backend.list_offsets(spec(OffsetSpec.TIMESTAMP, 1))).offset is None
        stamps = [1_000, 2_000, 2_000, 9_000, 3_000, 4_000]
        await append(backend, topic, [Message(value=b"a", timestamp_us=t) for t in stamps[:3]])
        await append(backend, topic, [Message(value=b"b", timestamp_us=t) for t in stamps[3:]])
        assert (await backend.list_offsets(spec(OffsetSpec.EARLIEST))).offset == 0
        assert (await backend.list_offsets(spec(OffsetSpec.LATEST))).offset == 6
        for ts, expected in [
            (0, 0),
            (1_000, 0),
            (1_500, 1),
            (2_000, 1),
            (2_500, 3),
            (3_000, 3),
            (9_000, 3),
            (9_001, None),
        ]:
            got = await backend.list_offsets(spec(OffsetSpec.TIMESTAMP, ts))
            assert got.offset == expected, ts
        top = await backend.list_offsets(spec(OffsetSpec.MAX_TIMESTAMP))
        assert (top.offset, top.timestamp_us) == (3, 9_000)


async def test_commit_fetch_delete_offsets(backend: Backend) -> None:
    with trio.fail_after(10):
        topic = await new_topic(backend, partitions=2)
        fetch = FetchOffset(group="g", topic=topic, partition=1)
        assert (await backend.fetch_offset(fetch)).offset is None
        await backend.commit_offset(
            CommitOffset(group="g", topic=topic, partition=1, offset=7, metadata="m1")
        )
        got = await backend.fetch_offset(fetch)
        assert (got.offset, got.metadata) == (7, "m1")
        await backend.commit_offset(CommitOffset(group="g", topic=topic, partition=1, offset=9))
        assert (await backend.fetch_offset(fetch)).offset == 9
        other = FetchOffset(group="h", topic=topic, partition=1)
        assert (await backend.fetch_offset(other)).offset is None
        await backend.delete_offset(DeleteOffset(group="g", topic=topic, partition=1))
        assert (await backend.fetch_offset(fetch)).offset is None
        with pytest.raises(UnknownPartition):
            await backend.commit_offset(CommitOffset(group="g", topic=topic, partition=5, offset=1))
        with pytest.raises(UnknownTopic):
            await backend.commit_offset(
                CommitOffset(group="g", topic=Topic(topic.stream, "nope"), partition=0, offset=1)
            )


async def test_deleted_topic_forgets_its_offsets(backend: Backend) -> None:
    with trio.fail_after(10):
        topic = await new_topic(backend)
        await backend.commit_offset(CommitOffset(group="g", topic=topic, partition=0, offset=3))
        await backend.delete_topic(DeleteTopic(topic=topic))
        await backend.create_topic(CreateTopic(topic=topic, partitions=1))
        fetched = await backend.fetch_offset(FetchOffset(group="g", topic=topic, partition=0))
        assert fetched.offset is None


async def test_purge(backend: Backend) -> None:
    with trio.fail_after(10):
        topic = await new_topic(backend)
        await append(backend, topic, msgs(5))
        await backend.purge_topic(PurgeTopic(topic=topic))
        [p] = (await backend.describe_topic(DescribeTopic(topic=topic))).info.partitions
        assert (p.log_start_offset, p.next_offset) == (5, 5)
        r = await backend.read(Read(topic=topic, partition=0, offset=5))
        assert r.batches == ()
        with pytest.raises(OffsetOutOfRange):
            await backend.read(Read(topic=topic, partition=0, offset=0))
        assert (await append(backend, topic, msgs(2))).base_offset == 5
        assert [m.offset for m in await read_all(backend, topic, offset=5)] == [5, 6]


async def test_stats(backend: Backend) -> None:
    with trio.fail_after(10):
        before = await backend.stats(Stats())
        topic = await new_topic(backend, partitions=3)
        await append(backend, topic, msgs(4), p=2)
        await backend.commit_offset(
            CommitOffset(group=_name("g"), topic=topic, partition=0, offset=0)
        )
        after = await backend.stats(Stats())
    assert after.topics == before.topics + 1
    assert after.partitions == before.partitions + 3
    assert after.messages == before.messages + 4
    assert after.size_bytes > before.size_bytes
    assert after.consumer_groups == before.consumer_groups + 1


# --- idempotent producers ----------------------------------------------------------------------


async def _producer(backend: Backend, epoch: int = -1, pid: int = -1) -> tuple[int, int]:
    """A producer id and epoch the backend deduplicates by: the broker's own where it grants
    them (a Kafka broker knows only the ids it granted), else any id the gateway would give."""
    if isinstance(backend, NativeProducerIds):
        got = await backend.init_producer(InitProducer(producer_id=pid, producer_epoch=epoch))
        return got.producer_id, got.producer_epoch
    return (77 if pid < 0 else pid), epoch + 1


async def test_idempotent_producer_dedup(backend: Backend) -> None:
    if not backend.capabilities.idempotent_producers:
        pytest.skip("capabilities.idempotent_producers is False")

    def batch(seq: int, n: int = 3, epoch: int = 0, pid: int = 77) -> Append:
        return Append(
            topic=topic,
            partition=0,
            batch=MessageBatch(msgs(n, start=seq)),
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=seq,
        )

    with trio.fail_after(10):
        topic = await new_topic(backend)
        pid, epoch = await _producer(backend)
        first = await backend.append(batch(0, pid=pid, epoch=epoch))
        second = await backend.append(batch(3, pid=pid, epoch=epoch))
        again = await backend.append(batch(0, pid=pid, epoch=epoch))  # a retry of a stored batch
        # The original offsets where the backend knows them (a Kafka broker does not say).
        original = 0 if backend.capabilities.duplicate_offsets else -1
        assert again.duplicate and (again.base_offset, again.count) == (original, 3)
        assert not first.duplicate and not second.duplicate
        with pytest.raises(SequenceError):
            await backend.append(batch(10, pid=pid, epoch=epoch))  # a gap
        await backend.append(Append(topic=topic, partition=0, batch=MessageBatch(msgs(1))))
        # others don't disturb it
        assert (await backend.append(batch(6, pid=pid, epoch=epoch))).base_offset == 7
        if isinstance(backend, NativeProducerIds):
            # The broker's epochs: Tansu does not bump one (KIP-360 InitProducerId with an id
            # answers -1), and without a transactional id Kafka grants a new id anyway (the
            # client bumps its epoch itself, on its batches); a fresh id is checked instead.
            fresh, fresh_epoch = await _producer(backend)
            assert fresh != pid
            new_epoch = await backend.append(batch(0, pid=fresh, epoch=fresh_epoch))
            assert new_epoch.base_offset == 10 and not new_epoch.duplicate
        else:
            bumped_pid, bumped = await _producer(backend, epoch, pid)  # KIP-360: a new epoch
            assert bumped_pid == pid and bumped == epoch + 1
            new_epoch = await backend.append(batch(0, pid=pid, epoch=bumped))  # seq 0 again
            assert new_epoch.base_offset == 10 and not new_epoch.duplicate
            with pytest.raises(ProducerFenced):
                await backend.append(batch(9, pid=pid, epoch=epoch))
        got = await read_all(backend, topic)
    assert len(got) == 13


async def test_idempotent_dedup_remembers_five_batches(backend: Backend) -> None:
    if not backend.capabilities.idempotent_producers:
        pytest.skip("capabilities.idempotent_producers is False")
    with trio.fail_after(10):
        topic = await new_topic(backend)
        pid, epoch = await _producer(backend)
        for k in range(7):
            await backend.append(
                Append(
                    topic=topic,
                    partition=0,
                    batch=MessageBatch(msgs(1)),
                    producer_id=pid,
                    producer_epoch=epoch,
                    base_sequence=k,
                )
            )
        retry = Append(
            topic=topic,
            partition=0,
            batch=MessageBatch(msgs(1)),
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=2,
        )
        again = await backend.append(retry)
        assert again.duplicate
        assert again.base_offset == (2 if backend.capabilities.duplicate_offsets else -1)
        too_old = Append(
            topic=topic,
            partition=0,
            batch=MessageBatch(msgs(1)),
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=1,
        )
        # Older than the five batches remembered: refused (Kafka) or a duplicate (Tansu is
        # lenient), never stored again.
        with contextlib.suppress(SequenceError):
            assert (await backend.append(too_old)).duplicate
        assert len(await read_all(backend, topic)) == 7
