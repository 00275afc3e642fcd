"""The RabbitMQ Stream translator's pure parts: names, response codes, offset specs, AMQP
message conversion (rstream's AMQP codec as the oracle), the stored wire form, Deliver chunks."""

from __future__ import annotations

import dataclasses
import struct
import uuid
from collections import Counter, defaultdict

import pytest
from rstream import AMQPMessage, amqp_decoder
from rstream import Properties as RsProperties

from gateway.model import (
    BackendUnavailable,
    Forbidden,
    GatewayError,
    Header,
    HeaderKind,
    InvalidCredentials,
    InvalidRequest,
    Message,
    MessageBatch,
    OffsetOutOfRange,
    OffsetSpec,
    StreamExists,
    TopicExists,
    UnknownGroup,
    UnknownPartition,
    UnknownTopic,
    decode_wire,
)
from gateway.model import errors as model_errors
from gateway.translate.rabbitmq_stream import chunks as trm
from gateway.translate.rabbitmq_stream import requests as tr
from gateway.translate.rabbitmq_stream.errors import error_of
from protocols.rabbitmq_stream import OffsetSpec as WireOffsetSpec
from protocols.rabbitmq_stream import (
    OffsetType,
    Publish,
    PublishedMessage,
    RabbitStreamClientCodec,
    RabbitStreamServerCodec,
    ResponseCode,
    SimpleEntries,
)
from protocols.rabbitmq_stream.amqp import (
    AmqpType,
    Value,
    build_message,
    decode_message,
    encode_message,
)
from protocols.rabbitmq_stream.chunk import (
    Compression,
    SimpleEntry,
    SubEntryBatch,
    decode_chunk,
    encode_chunk,
    iter_records,
)
from tests.protocols.rabbitmq_stream.test_chunk import PUBLISH, frames, publish_items

K = HeaderKind

# --- names ------------------------------------------------------------------------------------


def test_vhost_is_the_canonical_stream() -> None:
    assert tr.stream_of_vhost("/") == "default"
    assert tr.stream_of_vhost("x") == "x"
    assert tr.vhost_of_stream("default") == "/"
    assert tr.vhost_of_stream("x") == "x"


def test_partition_streams() -> None:
    assert tr.partition_stream("orders", 2, super_stream=True) == "orders-2"
    assert tr.partition_stream("orders", 0, super_stream=False) == "orders"
    with pytest.raises(InvalidRequest):
        tr.partition_stream("orders", 1, super_stream=False)
    assert tr.topic_of_stream("orders-2", {"orders"}) == ("orders", 2)
    assert tr.topic_of_stream("orders-2") == ("orders-2", 0)  # not a known super stream
    assert tr.topic_of_stream("a-b-10", {"a-b"}) == ("a-b", 10)
    for name in ("orders", "orders-", "-1", "orders-01", "orders-x"):
        assert tr.split_partition_stream(name) is None


# --- errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (UnknownTopic("s"), ResponseCode.STREAM_DOES_NOT_EXIST),
        (UnknownPartition("s", partitions=1), ResponseCode.STREAM_DOES_NOT_EXIST),
        (TopicExists("s"), ResponseCode.STREAM_ALREADY_EXISTS),
        (StreamExists("s"), ResponseCode.STREAM_ALREADY_EXISTS),
        (Forbidden("s"), ResponseCode.ACCESS_REFUSED),
        (InvalidCredentials("s"), ResponseCode.AUTHENTICATION_FAILURE),
        (InvalidRequest("s"), ResponseCode.PRECONDITION_FAILED),
        (UnknownGroup("ref"), ResponseCode.NO_OFFSET),
        (OffsetOutOfRange("s"), ResponseCode.NO_OFFSET),
        (BackendUnavailable("s"), ResponseCode.STREAM_NOT_AVAILABLE),
        (tr.RabbitCode(ResponseCode.PUBLISHER_DOES_NOT_EXIST, "p"), 0x12),
        (GatewayError("s"), ResponseCode.INTERNAL_ERROR),
    ],
)
def test_response_code(exc: GatewayError, code: int) -> None:
    assert tr.response_code(exc) == code


# Both directions of the response-code table, over every canonical failure, so that they cannot
# drift.
FAILURES = [
    cls
    for cls in vars(model_errors).values()
    if isinstance(cls, type) and issubclass(cls, GatewayError)
]
# Codes that kinds of failure with different error types share: the code a broker answers cannot
# say which it was.
SHARED = {
    ResponseCode.PRECONDITION_FAILED,  # InvalidRequest, GroupExists, SequenceError, Unsupported...
    ResponseCode.STREAM_NOT_AVAILABLE,  # BackendUnavailable, Timeout
    ResponseCode.NO_OFFSET,  # UnknownGroup, OffsetOutOfRange
    ResponseCode.INTERNAL_ERROR,  # GatewayError (internal), StorageError
}


@pytest.mark.parametrize("cls", FAILURES, ids=lambda cls: cls.__name__)
def test_every_failure_has_a_code_that_maps_back(cls: type[GatewayError]) -> None:
    code = tr.response_code(cls("x"))
    assert code in set(ResponseCode) and code != ResponseCode.OK
    if code not in SHARED:
        assert error_of(code, "x").error_type == cls.error_type


def test_a_brokers_code_means_a_failure_answered_with_it() -> None:
    failures: dict[int, set[type[GatewayError]]] = defaultdict(set)
    for cls in FAILURES:
        failures[tr.response_code(cls("x"))].add(cls)
    mixed = {c for c, classes in failures.items() if len({k.error_type for k in classes}) > 1}
    assert mixed == SHARED
    for code, classes in failures.items():
        if code != ResponseCode.NO_OFFSET:  # neither: the backend never raises it (errors.py)
            assert type(error_of(code, "x")) in classes, ResponseCode(code).name


# --- offsets ----------------------------------------------------------------------------------


def test_offset_specs() -> None:
    first = tr.start_at(WireOffsetSpec(type=OffsetType.FIRST))
    assert first.spec is OffsetSpec.EARLIEST and first.resolve(3, latest=9) == 3
    last = tr.start_at(WireOffsetSpec(type=OffsetType.LAST))
    assert last.spec is OffsetSpec.LATEST and last.resolve(9, latest=9) == 8
    assert last.resolve(0, latest=0) == 0
    nxt = tr.start_at(WireOffsetSpec(type=OffsetType.NEXT))
    assert nxt.spec is OffsetSpec.LATEST and nxt.resolve(9, latest=9) == 9
    at = tr.start_at(WireOffsetSpec.offset(5))
    assert at.spec is None and at.resolve(None, latest=9) == 5
    ts = tr.start_at(WireOffsetSpec.timestamp(1_700_000_000_000))
    assert ts.spec is OffsetSpec.TIMESTAMP and ts.timestamp_us == 1_700_000_000_000_000
    assert ts.resolve(None, latest=9) == 9 and ts.resolve(4, latest=9) == 4
    with pytest.raises(InvalidRequest):
        tr.start_at(WireOffsetSpec(type=OffsetType.NONE))


def test_stored_offsets_are_the_last_processed() -> None:
    assert tr.committed_of_stored(6) == 7
    assert tr.stored_of_committed(7) == 6
    assert tr.stored_of_committed(0) is None and tr.stored_of_committed(None) is None


# --- messages: round trips --------------------------------------------------------------------

EVERY_KIND = (
    Header("raw", b"\x00\xff", K.RAW),
    Header("str", "grüß".encode(), K.STRING),
    Header("bool", b"\x01", K.BOOL),
    Header("i8", struct.pack("<b", -5), K.INT8),
    Header("i16", struct.pack("<h", -500), K.INT16),
    Header("i32", struct.pack("<i", -70_000), K.INT32),
    Header("i64", struct.pack("<q", -(1 << 40)), K.INT64),
    Header("u8", struct.pack("<B", 250), K.UINT8),
    Header("u16", struct.pack("<H", 65_000), K.UINT16),
    Header("u32", struct.pack("<I", 4_000_000_000), K.UINT32),
    Header("u64", struct.pack("<Q", (1 << 64) - 1), K.UINT64),
    Header("f32", struct.pack("<f", 1.5), K.FLOAT32),
    Header("f64", struct.pack("<d", -2.25), K.FLOAT64),
    Header("null", b"", K.NULL),
    Header("ts", struct.pack("<q", 1_700_000_000_123), K.TIMESTAMP),
    Header("uuid", uuid.UUID(int=42).bytes, K.UUID),
    Header("sym", b"a-symbol", K.SYMBOL),
)


def lossy_counter() -> tuple[Counter[str], trm.Lossy]:
    counts: Counter[str] = Counter()
    return counts, lambda field: counts.update([field])


@pytest.mark.parametrize("header", EVERY_KIND, ids=lambda h: h.kind.name)
def test_every_header_kind_round_trips(header: Header) -> None:
    counts, lossy = lossy_counter()
    m = Message(b"v", b"k", (header,), 1_700_000_000_123_000, -1, 7)
    assert trm.to_canonical(trm.to_amqp(m, lossy), lossy) == m
    assert not counts


@pytest.mark.parametrize("kind", [K.INT128, K.UINT128])
def test_128_bit_integers_become_binary(kind: HeaderKind) -> None:
    counts, lossy = lossy_counter()
    raw = (1 << 100).to_bytes(16, "little")
    back = trm.to_canonical(trm.to_amqp(Message(b"v", headers=(Header("n", raw, kind),)), lossy))
    assert back.headers == (Header("n", raw, K.RAW),)
    assert counts == {"headers": 1}


def test_ids_keys_and_timestamps() -> None:
    big = uuid.uuid4().int | (1 << 100)
    for m in (
        Message(b"", None, (), 0, -1, big),  # a u128 id travels as a uuid message-id
        Message(b"x", "ключ".encode(), (), 5_000, -1, 0),
        Message(b"x", b"\xff\x00", (), 0, -1, 0),  # a non-UTF-8 key: a binary annotation
    ):
        assert trm.to_canonical(trm.to_amqp(m)) == m
    # creation-time holds milliseconds; the rest travels in an annotation of the gateway's own.
    precise = trm.to_amqp(Message(b"x", timestamp_us=1_999))
    assert trm.to_canonical(precise).timestamp_us == 1_999
    decoded = decode_message(precise)
    assert decoded.properties is not None and decoded.properties.creation_time == 1
    assert [(k.value, v.value) for k, v in decoded.message_annotations or ()] == [
        (trm.TIMESTAMP_US, 1_999)
    ]
    assert b"x-opt-streamgate" not in trm.to_amqp(Message(b"x", timestamp_us=2_000))


def test_properties_travel_as_headers() -> None:
    counts, lossy = lossy_counter()
    payload = AMQPMessage(
        body=b"b",
        properties=RsProperties(
            message_id="id-1", correlation_id=b"c", content_type="text/plain", subject="s"
        ),
    )
    m = trm.to_canonical(bytes(payload), lossy)
    assert m.headers == (
        Header("streamgate.amqp.message_id", b"id-1", K.STRING),
        Header("streamgate.amqp.subject", b"s", K.STRING),
        Header("streamgate.amqp.correlation_id", b"c", K.RAW),
        Header("streamgate.amqp.content_type", b"text/plain", K.SYMBOL),
    )
    back = amqp_decoder(trm.to_amqp(m, lossy))
    assert back.properties.message_id == b"id-1"  # pyamqp hands strings back as bytes
    assert back.properties.correlation_id == b"c"
    assert back.properties.content_type == b"text/plain"
    assert not counts
    # A carried field of the wrong type is dropped and counted.
    bad = Message(b"x", headers=(Header("streamgate.amqp.to", b"\x01", K.UINT8),))
    assert trm.to_canonical(trm.to_amqp(bad, lossy)).headers == ()
    assert counts == {"properties": 1}


def test_other_bodies_keep_their_sections() -> None:
    counts, lossy = lossy_counter()
    body = Value(AmqpType.MAP, ((Value(AmqpType.STRING, "a"), Value(AmqpType.INT, 1)),))
    raw = encode_message(
        build_message(value=body, application_properties=[("k", Value(AmqpType.STRING, "v"))])
    )
    m = trm.to_canonical(raw, lossy)
    assert m.headers[0] == Header(trm.BODY_HEADER, b"amqp-value", K.SYMBOL)
    assert m.value == encode_message(build_message(value=body))
    assert trm.to_amqp(m, lossy) == raw
    assert not counts
    # A value that is not what the header says goes out as a data section.
    fake = Message(b"plain", headers=(Header(trm.BODY_HEADER, b"amqp-value", K.SYMBOL),))
    assert amqp_decoder(trm.to_amqp(fake, lossy)).body == b"plain"
    assert counts == {"value": 1}


def test_amqp_values_of_binary_and_string_are_the_value() -> None:
    for body, value in (
        (Value(AmqpType.BINARY, b"\x01"), b"\x01"),
        (Value(AmqpType.STRING, "é"), "é".encode()),
    ):
        m = trm.to_canonical(encode_message(build_message(value=body)))
        assert (m.value, m.headers) == (value, ())


def test_non_amqp_entries_are_taken_whole() -> None:
    assert trm.to_canonical(b"raw-0", offset=3) == Message(b"raw-0", offset=3)


def test_routing_key_annotation_and_lost_sections() -> None:
    counts, lossy = lossy_counter()
    raw = encode_message(
        build_message(
            message_annotations=[
                (Value(AmqpType.SYMBOL, "x-routing-key"), Value(AmqpType.STRING, "rk")),
                (Value(AmqpType.SYMBOL, "x-exchange"), Value(AmqpType.STRING, "")),
            ],
            footer=[],
            data=b"d",
        )
    )
    assert trm.to_canonical(raw, lossy).key == b"rk"
    assert counts == {"annotations": 1, "footer": 1}


# --- rstream as the oracle --------------------------------------------------------------------


def test_we_decode_what_rstream_encodes() -> None:
    u = uuid.uuid4()
    payload = AMQPMessage(
        body=b"hello",
        application_properties={
            "s": "v",
            "n": 7,
            "big": 1 << 40,
            "b": True,
            "f": 0.5,
            "u": u,
            "x": b"\x00",
        },
        properties=RsProperties(message_id=123, creation_time=1_700_000_000_123),
    )
    m = trm.to_canonical(bytes(payload))
    assert m.value == b"hello" and m.id == 123 and m.timestamp_us == 1_700_000_000_123_000
    assert m.headers == (
        Header("s", b"v", K.STRING),
        Header("n", struct.pack("<i", 7), K.INT32),
        Header("big", struct.pack("<q", 1 << 40), K.INT64),
        Header("b", b"\x01", K.BOOL),
        Header("f", struct.pack("<d", 0.5), K.FLOAT64),
        Header("u", u.bytes, K.UUID),
        Header("x", b"\x00", K.RAW),
    )
    uuid_id = AMQPMessage(body=b"", properties=RsProperties(message_id=u))
    assert trm.to_canonical(bytes(uuid_id)).id == u.int


def test_rstream_decodes_what_we_encode() -> None:
    u = uuid.uuid4()
    m = Message(b"hello", b"key", EVERY_KIND, 1_700_000_000_123_000, -1, 99)
    back = amqp_decoder(trm.to_amqp(m))
    assert back.body == b"hello"
    assert back.properties.message_id == 99
    assert back.properties.creation_time == 1_700_000_000_123
    assert back.message_annotations == {b"x-routing-key": b"key"}  # strings come back as bytes
    props = back.application_properties
    assert props[b"str"] == "grüß".encode() and props[b"bool"] is True and props[b"null"] is None
    assert props[b"i8"] == -5 and props[b"u64"] == (1 << 64) - 1 and props[b"f64"] == -2.25
    assert props[b"raw"] == b"\x00\xff" and props[b"uuid"] == uuid.UUID(int=42)
    assert props[b"ts"] == 1_700_000_000_123
    big = amqp_decoder(trm.to_amqp(Message(b"", id=u.int | (1 << 127))))
    assert big.properties.message_id == uuid.UUID(int=u.int | (1 << 127))


# --- captured publishes -----------------------------------------------------------------------


def captured() -> dict[str, list[Message]]:
    out: dict[str, list[Message]] = {}
    for where, frame in frames(PUBLISH):
        entries = [entry for _, entry, _ in publish_items(frame)]
        stored = trm.wire_batch(entries, timestamp_us=42_000)
        out.setdefault(where, []).extend(decode_wire(stored))
    return out


def test_captured_publishes_decode() -> None:
    by_capture = captured()
    rstream = by_capture["capture-rstream.jsonl"]
    values = [m.value for m in rstream]
    assert b"hello-amqp" in values and {b"raw-0", b"raw-1", b"raw-2"} <= set(values)
    hello = rstream[values.index(b"hello-amqp")]
    assert hello.headers == (
        Header("streamgate.amqp.message_id", b"id-1", K.STRING),
        Header("streamgate.amqp.content_type", b"text/plain", K.SYMBOL),
        Header("k", b"v", K.STRING),
        Header("n", struct.pack("<i", 7), K.INT32),
    )
    assert all(m.timestamp_us == 42_000 for m in rstream)  # no creation time: the arrival
    rbfly = by_capture["capture-rbfly.jsonl"]
    assert [m.value for m in rbfly[:2]] == [b"rb-bytes-body", b"rb-str-body"]
    assert rbfly[2].headers[0] == Header(trm.BODY_HEADER, b"amqp-value", K.SYMBOL)
    assert rbfly[2].headers[1:] == (Header("k", b"v", K.STRING),)
    assert [m.value for m in rbfly[3:]] == [f"batch-{i}".encode() for i in range(3)]
    assert [m.value for m in by_capture["capture-probe-3.10.8.jsonl"]] == [b"abc", b"one", b"two"]


# --- chunks -----------------------------------------------------------------------------------


def test_chunk_passes_stored_entries_through_and_encodes_the_rest() -> None:
    sub = SubEntryBatch.build([b"s0", b"s1", b"s2"], Compression.GZIP)
    stored = trm.wire_batch([SimpleEntry(b"raw-a"), sub], timestamp_us=5_000_000)
    stored = dataclasses.replace(stored, base_offset=10)
    canonical = MessageBatch(
        [Message(b"c", None, (), 6_000_000, 14), Message(b"d", None, (), 7_000_000, 15)]
    )
    out = trm.chunk_for([MessageBatch(wire=stored), canonical], 12)
    assert out is not None
    assert (out.chunk_id, out.records) == (11, 5)  # the sub-batch holding 12 starts at 11
    chunk = decode_chunk(out.data)
    assert chunk.entries[0] == sub and chunk.timestamp_ms == 7_000
    records = list(iter_records(chunk))
    assert [o for o, _ in records] == [11, 12, 13, 14, 15]
    assert [trm.to_canonical(r).value for _, r in records] == [b"s0", b"s1", b"s2", b"c", b"d"]


def test_chunk_stops_at_a_gap_and_skips_earlier_records() -> None:
    batch = MessageBatch(
        [Message(b"a", offset=1), Message(b"b", offset=2), Message(b"c", offset=5)]
    )
    out = trm.chunk_for([batch], 2)
    assert out is not None and (out.chunk_id, out.records) == (2, 1)
    assert trm.chunk_for([batch], 6) is None


def _stored(entries: list[SimpleEntry | SubEntryBatch], base: int, ts_us: int) -> MessageBatch:
    wire = trm.wire_batch(entries, timestamp_us=ts_us)
    return MessageBatch(wire=dataclasses.replace(wire, base_offset=base))


def test_stored_batches_from_the_chunk_id_are_joined_as_they_are() -> None:
    sub = SubEntryBatch.build([b"s0", b"s1"], Compression.GZIP)
    first = _stored([SimpleEntry(b"a"), sub], 4, 1_000_000)  # offsets 4..6
    second = _stored([SimpleEntry(b"b")], 7, 3_000_000)  # offset 7
    after_gap = _stored([SimpleEntry(b"z")], 9, 4_000_000)
    out = trm.chunk_for([first, second, after_gap], 4)
    assert out is not None and (out.chunk_id, out.records) == (4, 4)
    chunk = decode_chunk(out.data)  # the CRC is checked
    assert chunk.entries == (SimpleEntry(b"a"), sub, SimpleEntry(b"b"))
    assert (chunk.chunk_id, chunk.timestamp_ms) == (4, 3_000)
    # The same chunk as entry by entry (what a chunk starting inside a batch gets).
    assert out.data == encode_chunk([SimpleEntry(b"a"), sub, SimpleEntry(b"b")],
                                        chunk_id=4, timestamp_ms=3_000)  # fmt: skip


def test_stored_from_a_publish_frame_is_a_chunk_body() -> None:
    frame = Publish(publisher_id=1, messages=(
        PublishedMessage(publishing_id=1, data=b"x"), PublishedMessage(publishing_id=2, data=b"yy"),
    ))  # fmt: skip
    decoded = RabbitStreamServerCodec()
    decoded.receive_data(RabbitStreamClientCodec().send(frame))
    got = decoded.next_frame()
    assert isinstance(got, Publish) and isinstance(got.messages, SimpleEntries)
    stored = trm.stored_batch(got.messages.stored, len(got.messages), timestamp_us=9_000)
    assert trm.wire_entries(stored) == [SimpleEntry(b"x"), SimpleEntry(b"yy")]


def test_a_chunk_holds_at_most_65535_entries() -> None:
    many = _stored([SimpleEntry(b"")] * 70_000, 0, 1)
    out = trm.chunk_for([many], 0)
    assert out is not None and (out.chunk_id, out.records) == (0, 0xFFFF)
    assert len(decode_chunk(out.data).entries) == 0xFFFF
    two = trm.chunk_for([_stored([SimpleEntry(b"")] * 40_000, 0, 1),
                         _stored([SimpleEntry(b"")] * 40_000, 40_000, 1)], 0)  # fmt: skip
    assert two is not None and two.records == 40_000  # the second batch waits for the next one
