"""The AMQP 1.0 bare message inside entries (rabbitmq-stream.md §8): captured rstream and rbfly
messages byte for byte, every type of the §8 table, section rules, round trips, fuzz."""

from __future__ import annotations

import contextlib
import uuid
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocols._wire import LocalProtocolError, RemoteProtocolError
from protocols.rabbitmq_stream.amqp import (
    AmqpMessage,
    AmqpSequence,
    AmqpType,
    AmqpValue,
    Array,
    Data,
    Described,
    Header,
    Properties,
    RawPayload,
    Section,
    SectionCode,
    Value,
    build_message,
    decode_message,
    decode_payload,
    decode_value,
    encode_message,
    encode_payload,
    encode_value,
)
from protocols.rabbitmq_stream.amqp_types import MAX_DEPTH
from protocols.rabbitmq_stream.chunk import Compression, SimpleEntry, SubEntryBatch

from .test_chunk import PUBLISH, frames, publish_items

T = AmqpType


def s(text: str) -> Value:
    return Value(T.STRING, text)


def payloads() -> list[tuple[str, bytes]]:
    """Every message a client published: simple entries and the records of sub-batches."""
    out = []
    for where, frame in frames(PUBLISH):
        for _, entry, _ in publish_items(frame):
            if isinstance(entry, SimpleEntry):
                out.append((where, entry.data))
            else:
                out += [(where, r) for r in entry.records()]
    return out


# --- captured messages ------------------------------------------------------------------------


def test_captured_payload_kinds_are_pinned() -> None:
    kinds = Counter((w, type(decode_payload(p)).__name__) for w, p in payloads())
    assert kinds == {
        ("capture-probe-3.10.8.jsonl", "RawPayload"): 3,  # abc, one, two
        ("capture-rbfly.jsonl", "AmqpMessage"): 6,
        ("capture-rstream.jsonl", "AmqpMessage"): 4,  # one with properties + 3 in the gzip batch
        ("capture-rstream.jsonl", "RawPayload"): 3,  # RawMessage raw-0..2
    }


@pytest.mark.parametrize("where,payload", payloads())
def test_every_captured_payload_reencodes(where: str, payload: bytes) -> None:
    decoded = decode_payload(payload)
    assert encode_payload(decoded) == payload
    if isinstance(decoded, AmqpMessage):
        assert decode_message(encode_message(decoded)) == decoded


def rstream_message() -> bytes:
    (frame,) = [f for w, f in frames(PUBLISH) if b"hello-amqp" in f]
    ((_, entry, _),) = publish_items(frame)
    assert isinstance(entry, SimpleEntry)
    return entry.data


def test_rstream_amqp_message_views_and_builder() -> None:
    raw = rstream_message()
    message = decode_message(raw)
    assert message.properties == Properties(message_id=s("id-1"), content_type="text/plain")
    assert message.application_properties == (("k", s("v")), ("n", Value(T.INT, 7)))
    assert message.body == Data((b"hello-amqp",))
    assert message.header is None and message.message_annotations is None
    # What rstream's AMQPMessage(...) writes, rebuilt from the typed fields.
    built = build_message(
        properties=Properties(message_id=s("id-1"), content_type="text/plain"),
        application_properties=[("k", s("v")), ("n", Value(T.INT, 7))],
        data=b"hello-amqp",
    )
    assert encode_message(built) == raw
    assert built == message


def test_rbfly_messages() -> None:
    rbfly = [decode_message(p) for w, p in payloads() if w == "capture-rbfly.jsonl"]
    assert rbfly[0].body == Data((b"rb-bytes-body",))
    assert rbfly[1].body == AmqpValue(s("rb-str-body"))
    # stream_message_ctx({"a": 1}, app_properties={"k": "v"}): map32 both, int32.
    assert rbfly[2].application_properties == (("k", s("v")),)
    assert rbfly[2].body == AmqpValue(Value(T.MAP, ((s("a"), Value(T.INT, 1)),)))
    assert [m.body for m in rbfly[3:]] == [AmqpValue(s(f"batch-{i}")) for i in range(3)]
    # The same message built with rbfly's constructors (d1, 71) gives rbfly's bytes.
    app = Value(T.MAP, ((s("k"), s("v")),), code=0xD1)
    body = Value(T.MAP, ((s("a"), Value(T.INT, 1, code=0x71)),), code=0xD1)
    message = AmqpMessage(
        (Section(SectionCode.APPLICATION_PROPERTIES, app), Section(SectionCode.AMQP_VALUE, body))
    )
    assert message == rbfly[2]
    assert encode_message(message) == encode_message(rbfly[2])


def test_minimal_messages_of_section_8() -> None:
    raw = bytes.fromhex("005374c10702a1016ba10176005375a0026869")
    message = decode_message(raw)
    assert message.application_properties == (("k", s("v")),)
    assert message.body == Data((b"hi",))
    built = build_message(application_properties=[("k", s("v"))], data=b"hi")
    assert encode_message(built) == raw
    big = encode_message(build_message(data=b"x" * 300))
    assert big[:8] == bytes.fromhex("005375b0") + (300).to_bytes(4, "big")


def test_a_message_published_over_amqp_091() -> None:
    # §8: what 3.10.8 stores for a pika publish: annotations, ids, creation-time, headers.
    correlation = uuid.UUID(int=0x1234)
    annotations = [
        (Value(T.SYMBOL, "x-routing-key"), s("rk")),
        (Value(T.SYMBOL, "x-exchange"), s("")),
        (Value(T.SYMBOL, "x-basic-delivery-mode"), Value(T.UBYTE, 2)),
    ]
    properties = Properties(
        message_id=Value(T.ULONG, 2**40),
        correlation_id=Value(T.UUID, correlation),
        content_type="application/json",
        creation_time=1_700_000_000_123,
        user_id=b"guest",
        group_sequence=5,
    )
    header = Header(durable=True, priority=4, ttl=60_000, first_acquirer=False, delivery_count=0)
    message = build_message(
        header=header,
        message_annotations=annotations,
        properties=properties,
        application_properties=[("h", Value(T.LONG, -1))],
        data=[b"{", b"}"],
        footer=[(Value(T.SYMBOL, "x-opt"), Value(T.BOOLEAN, True))],
    )
    again = decode_message(encode_message(message))
    assert again == message
    assert again.header == header and again.properties == properties
    assert again.message_annotations == tuple(annotations)
    assert again.body == Data((b"{", b"}")) and again.body.joined == b"{}"
    assert again.footer == ((Value(T.SYMBOL, "x-opt"), Value(T.BOOLEAN, True)),)


# --- the §8 type table ------------------------------------------------------------------------

EVERY_TYPE = [
    ("40", Value(T.NULL)),
    ("41", Value(T.BOOLEAN, True)),
    ("42", Value(T.BOOLEAN, False)),
    ("5601", Value(T.BOOLEAN, True)),
    ("50ff", Value(T.UBYTE, 255)),
    ("51ff", Value(T.BYTE, -1)),
    ("60ffff", Value(T.USHORT, 65535)),
    ("618000", Value(T.SHORT, -32768)),
    ("43", Value(T.UINT, 0)),
    ("5207", Value(T.UINT, 7)),
    ("70ffffffff", Value(T.UINT, 2**32 - 1)),
    ("54f9", Value(T.INT, -7)),
    ("7180000000", Value(T.INT, -(2**31))),
    ("44", Value(T.ULONG, 0)),
    ("5309", Value(T.ULONG, 9)),
    ("80ffffffffffffffff", Value(T.ULONG, 2**64 - 1)),
    ("5580", Value(T.LONG, -128)),
    ("817fffffffffffffff", Value(T.LONG, 2**63 - 1)),
    ("723fc00000", Value(T.FLOAT, 1.5)),
    ("82bff8000000000000", Value(T.DOUBLE, -1.5)),
    ("7400000001", Value(T.DECIMAL32, b"\0\0\0\1")),
    ("840000000000000001", Value(T.DECIMAL64, b"\0" * 7 + b"\1")),
    ("94" + "00" * 15 + "01", Value(T.DECIMAL128, b"\0" * 15 + b"\1")),
    ("730001f600", Value(T.CHAR, "\U0001f600")),
    ("83000001a202c6176b", Value(T.TIMESTAMP, 0x1A202C6176B)),
    ("98" + "00" * 15 + "2a", Value(T.UUID, uuid.UUID(int=42))),
    ("a0026869", Value(T.BINARY, b"hi")),
    ("b0000000026869", Value(T.BINARY, b"hi")),
    ("a102c3a9", s("é")),
    ("b100000002c3a9", s("é")),
    ("a3026b31", Value(T.SYMBOL, "k1")),
    ("b3000000026b31", Value(T.SYMBOL, "k1")),
    ("45", Value(T.LIST, ())),
    ("c003024041", Value(T.LIST, (Value(T.NULL), Value(T.BOOLEAN, True)))),
    ("d0000000050000000140", Value(T.LIST, (Value(T.NULL),))),
    ("c10502a1016b40", Value(T.MAP, ((s("k"), Value(T.NULL)),))),
    ("d10000000400000000", Value(T.MAP, ())),
    ("e00402520102", Value(T.ARRAY, Array(T.UINT, (Value(T.UINT, 1), Value(T.UINT, 2))))),
    ("f0000000050000000071", Value(T.ARRAY, Array(T.INT))),
    ("005303a1016b", Value(T.DESCRIBED, Described(Value(T.ULONG, 3), s("k")))),
]


@pytest.mark.parametrize("hex_text,value", EVERY_TYPE, ids=[h[:8] for h, _ in EVERY_TYPE])
def test_every_constructor_decodes_and_reencodes(hex_text: str, value: Value) -> None:
    raw = bytes.fromhex(hex_text)
    decoded = decode_value(raw)
    assert decoded == value
    assert decoded.type is value.type
    assert encode_value(decoded) == raw
    assert decode_value(encode_value(value)) == value  # the default form


def test_default_forms_are_rstreams() -> None:
    assert encode_value(Value(T.BOOLEAN, False)) == b"\x56\x00"  # pyamqp: never 41/42
    assert encode_value(Value(T.UINT, 0)) == b"\x43"
    assert encode_value(Value(T.ULONG, 256)) == b"\x80" + (256).to_bytes(8, "big")
    assert encode_value(Value(T.LONG, 5)) == b"\x55\x05"
    assert encode_value(Value(T.LIST, ())) == b"\x45"


def test_remembered_forms_widen_when_the_value_no_longer_fits() -> None:
    assert encode_value(Value(T.STRING, "x" * 300, code=0xA1))[:1] == b"\xb1"
    assert encode_value(Value(T.INT, 1000, code=0x54))[:1] == b"\x71"
    assert encode_value(Value(T.BOOLEAN, False, code=0x41)) == b"\x56\x00"
    big = Value(T.LIST, tuple(Value(T.NULL) for _ in range(300)), code=0xC0)
    assert encode_value(big)[:1] == b"\xd0"
    mixed = Array(T.LONG, (Value(T.LONG, 1), Value(T.LONG, 2**40)))
    assert encode_value(Value(T.ARRAY, mixed))[3] == 0x81  # one shared constructor: the wide one


def test_encoding_refuses_what_the_type_cannot_carry() -> None:
    for bad in (
        Value(T.UBYTE, 256),
        Value(T.SYMBOL, "é"),
        Value(T.STRING, "\ud800"),
        Value(T.DECIMAL32, b"\0"),
        Value(T.BINARY, "text"),
        Value(T.ARRAY, Array(T.INT, (s("x"),))),
        Value(T.ARRAY, Array(T.DESCRIBED)),
        Value(T.DESCRIBED, "x"),
    ):
        with pytest.raises(LocalProtocolError):
            encode_value(bad)
    with pytest.raises(LocalProtocolError):
        build_message(data=b"a", value=s("b"))
    with pytest.raises(LocalProtocolError):
        build_message(properties=Properties(message_id=Value(T.INT, 1)))


# --- malformed messages -----------------------------------------------------------------------

MALFORMED = {
    "not described": "a0026869",
    "unknown section": "005379a0026869",
    "ulong-0x80 unknown": "0080000000000000007f40",
    "section out of order": "005373c0010000537045",
    "properties after data": "005375a0026869005373c00100",
    "two amqp-values": "0053774000537740",
    "data after amqp-sequence": "00537645005375a000",
    "data holds a string": "005375a1026869",
    "app-props key not string": "005374c10402540143",
    "annotation key string": "005372c10502a1016b40",
    "odd map": "005374c1020140",
    "list size mismatch": "005373c003014040",
    "bad utf-8": "005377a101ff",
    "bad symbol": "005372c10502a301ff40",
    "bad boolean": "0053775602",
    "bad char": "00537773ffffffff",
    "truncated": "005375a0056869",
    "unknown constructor": "005377ff",
    "properties field type": "005373c003015401",
    "14 properties": "005373c00f0e" + "40" * 14,
}


@pytest.mark.parametrize("hex_text", list(MALFORMED.values()), ids=list(MALFORMED))
def test_malformed_messages(hex_text: str) -> None:
    raw = bytes.fromhex(hex_text)
    with pytest.raises(RemoteProtocolError):
        decode_message(raw)
    assert decode_payload(raw) == RawPayload(raw)


def test_nesting_is_bounded() -> None:
    inner = b"\x40"
    for _ in range(MAX_DEPTH + 1):
        inner = bytes((0xC0, len(inner) + 1, 1)) + inner
    deep = b"\x00\x53\x77" + inner
    decode_message(b"\x00\x53\x77" + inner[3 * 2 :])  # within the limit
    with pytest.raises(RemoteProtocolError, match="nesting"):
        decode_message(deep)


def test_a_huge_zero_width_array_is_refused() -> None:
    with pytest.raises(RemoteProtocolError, match="elements"):
        decode_value(bytes.fromhex("f0000000050fffffff40"))


def test_non_amqp_entries_are_taken_whole() -> None:
    for raw in (b"", b"raw-0", b"\x00", b"\x00\x53\x75\xa0\x05hi"):
        assert decode_payload(raw) == RawPayload(raw)
        assert encode_payload(RawPayload(raw)) == raw
    assert decode_message(b"") == AmqpMessage(())  # no sections: no body


# --- properties -------------------------------------------------------------------------------

ascii_text = st.text(st.characters(max_codepoint=127), max_size=8)
utf8_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=8)

SIMPLE: dict[AmqpType, st.SearchStrategy[object]] = {
    T.NULL: st.none(),
    T.BOOLEAN: st.booleans(),
    T.UBYTE: st.integers(0, 2**8 - 1),
    T.USHORT: st.integers(0, 2**16 - 1),
    T.UINT: st.integers(0, 2**32 - 1),
    T.ULONG: st.integers(0, 2**64 - 1),
    T.BYTE: st.integers(-(2**7), 2**7 - 1),
    T.SHORT: st.integers(-(2**15), 2**15 - 1),
    T.INT: st.integers(-(2**31), 2**31 - 1),
    T.LONG: st.integers(-(2**63), 2**63 - 1),
    T.FLOAT: st.floats(width=32, allow_nan=False),
    T.DOUBLE: st.floats(allow_nan=False),
    T.DECIMAL64: st.binary(min_size=8, max_size=8),
    T.CHAR: st.characters(),
    T.TIMESTAMP: st.integers(-(2**63), 2**63 - 1),
    T.UUID: st.uuids(),
    T.BINARY: st.binary(max_size=300),
    T.STRING: utf8_text,
    T.SYMBOL: ascii_text,
}


def simple_of(kind: AmqpType) -> st.SearchStrategy[Value]:
    return SIMPLE[kind].map(lambda x: Value(kind, x))


simple_values = st.sampled_from(list(SIMPLE)).flatmap(simple_of)


def arrays(kind: AmqpType) -> st.SearchStrategy[Value]:
    items = st.lists(simple_of(kind), max_size=4).map(tuple)
    return items.map(lambda xs: Value(T.ARRAY, Array(kind, xs)))


values: st.SearchStrategy[Value] = st.recursive(
    simple_values | st.sampled_from(list(SIMPLE)).flatmap(arrays),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4).map(lambda xs: Value(T.LIST, tuple(xs))),
        st.lists(st.tuples(inner, inner), max_size=3).map(lambda ps: Value(T.MAP, tuple(ps))),
        st.tuples(st.sampled_from([Value(T.ULONG, 0x77), Value(T.SYMBOL, "d")]), inner).map(
            lambda p: Value(T.DESCRIBED, Described(*p))
        ),
    ),
    max_leaves=12,
)


@given(values)
def test_values_round_trip(value: Value) -> None:
    raw = encode_value(value)
    decoded = decode_value(raw)
    assert decoded == value
    assert encode_value(decoded) == raw


ids = st.one_of(simple_of(T.ULONG), simple_of(T.UUID), simple_of(T.BINARY), simple_of(T.STRING))


@given(
    properties=st.builds(
        Properties,
        message_id=st.none() | ids,
        user_id=st.none() | st.binary(max_size=8),
        subject=st.none() | utf8_text,
        correlation_id=st.none() | ids,
        content_type=st.none() | ascii_text,
        creation_time=st.none() | SIMPLE[T.TIMESTAMP],
        group_sequence=st.none() | SIMPLE[T.UINT],
    ),
    application_properties=st.lists(st.tuples(utf8_text, simple_values), max_size=5),
    annotations=st.none() | st.lists(st.tuples(simple_of(T.SYMBOL), values), max_size=3),
    body=st.one_of(
        st.lists(st.binary(max_size=300), min_size=1, max_size=3).map(lambda d: {"data": d}),
        values.map(lambda v: {"value": v}),
        st.lists(st.lists(values, max_size=2), min_size=1, max_size=2).map(
            lambda q: {"sequence": q}
        ),
    ),
)
def test_messages_round_trip(
    properties: Properties,
    application_properties: list[tuple[str, Value]],
    annotations: list[tuple[Value, Value]] | None,
    body: dict[str, object],
) -> None:
    message = build_message(
        properties=properties,
        application_properties=application_properties,
        message_annotations=annotations,
        **body,  # type: ignore[arg-type]
    )
    raw = encode_message(message)
    decoded = decode_message(raw)
    assert decoded == message and encode_message(decoded) == raw
    assert decoded.properties == properties
    assert decoded.application_properties == tuple(application_properties)
    if "data" in body:
        assert decoded.body == Data(tuple(body["data"]))  # type: ignore[arg-type]
    elif "value" in body:
        assert decoded.body == AmqpValue(body["value"])  # type: ignore[arg-type]
    else:
        expected = tuple(tuple(q) for q in body["sequence"])  # type: ignore[attr-defined]
        assert decoded.body == AmqpSequence(expected)
    assert decode_payload(raw) == message


@given(st.binary(max_size=120))
def test_fuzz_bytes_decode_or_raise_the_protocol_error(data: bytes) -> None:
    for decode in (decode_message, decode_value):
        with contextlib.suppress(RemoteProtocolError):
            decode(data)
    decode_payload(data)  # never raises


@given(st.binary(max_size=120))
def test_fuzz_behind_a_section_descriptor(data: bytes) -> None:
    # Most random bytes fail at the first byte; start them inside an amqp-value section.
    try:
        message = decode_message(b"\x00\x53\x77" + data)
    except RemoteProtocolError:
        return
    assert decode_message(encode_message(message)) == message


def test_sub_batch_records_are_messages() -> None:
    batch = SubEntryBatch.build([encode_message(build_message(data=b"a"))], Compression.GZIP)
    assert decode_message(batch.records()[0]).body == Data((b"a",))
