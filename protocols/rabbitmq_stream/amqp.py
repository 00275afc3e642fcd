"""The AMQP 1.0 bare message that stream clients put in each entry (rabbitmq-stream.md §8).

A message is a sequence of described sections. Every decoded ``Value`` remembers the constructor
byte it arrived with, so a decoded message re-encodes to the same bytes (rstream writes list8 /
map8 and small ints, rbfly map32 and int32); a value built here without one gets rstream's
choices (pyamqp's ``use_smallest``: the shortest form, booleans as ``56 00/01``). Typed views
(``properties``, ``application_properties``, ``body``...) are read from the sections on demand;
``decode_message`` checks them once so that a message that decodes can be viewed.

An entry need not be AMQP at all (rstream's ``RawMessage``): ``decode_payload`` returns a
``RawPayload`` for bytes that are not a well-formed message (DESIGN §3: taken whole).

The typed values themselves are in ``amqp_types`` (re-exported here).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from protocols._wire import LocalProtocolError, RemoteProtocolError

from .amqp_encode import encode_value, write_value
from .amqp_types import (
    NULL,
    AmqpType,
    Array,
    Described,
    Value,
    ValueReader,
    bad_value,
    decode_value,
)

__all__ = [
    "AmqpMessage",
    "AmqpSequence",
    "AmqpType",
    "AmqpValue",
    "Array",
    "Data",
    "Described",
    "Header",
    "Properties",
    "RawPayload",
    "Section",
    "SectionCode",
    "Value",
    "build_message",
    "decode_message",
    "decode_payload",
    "decode_value",
    "encode_message",
    "encode_payload",
    "encode_value",
]

# --- sections ---------------------------------------------------------------------------------


class SectionCode(enum.IntEnum):
    HEADER = 0x70
    DELIVERY_ANNOTATIONS = 0x71
    MESSAGE_ANNOTATIONS = 0x72
    PROPERTIES = 0x73
    APPLICATION_PROPERTIES = 0x74
    DATA = 0x75
    AMQP_SEQUENCE = 0x76
    AMQP_VALUE = 0x77
    FOOTER = 0x78


_SECTION_TYPE = {
    SectionCode.HEADER: AmqpType.LIST,
    SectionCode.DELIVERY_ANNOTATIONS: AmqpType.MAP,
    SectionCode.MESSAGE_ANNOTATIONS: AmqpType.MAP,
    SectionCode.PROPERTIES: AmqpType.LIST,
    SectionCode.APPLICATION_PROPERTIES: AmqpType.MAP,
    SectionCode.DATA: AmqpType.BINARY,
    SectionCode.AMQP_SEQUENCE: AmqpType.LIST,
    SectionCode.FOOTER: AmqpType.MAP,
}
_BODY = (SectionCode.DATA, SectionCode.AMQP_SEQUENCE, SectionCode.AMQP_VALUE)


@dataclass(frozen=True, slots=True)
class Section:
    code: SectionCode
    value: Value
    # How the descriptor was written: smallulong (53 xx, every client) or ulong (80 + 8 bytes).
    descriptor_code: int = field(default=0x53, compare=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class Header:
    durable: bool | None = None
    priority: int | None = None  # ubyte
    ttl: int | None = None  # uint, ms
    first_acquirer: bool | None = None
    delivery_count: int | None = None  # uint


@dataclass(frozen=True, slots=True, kw_only=True)
class Properties:
    message_id: Value | None = None  # ulong, uuid, binary or string
    user_id: bytes | None = None
    to: str | None = None
    subject: str | None = None
    reply_to: str | None = None
    correlation_id: Value | None = None  # ulong, uuid, binary or string
    content_type: str | None = None  # symbol
    content_encoding: str | None = None  # symbol
    absolute_expiry_time: int | None = None  # timestamp, ms
    creation_time: int | None = None  # timestamp, ms
    group_id: str | None = None
    group_sequence: int | None = None  # uint
    reply_to_group_id: str | None = None


_HEADER_FIELDS = (
    ("durable", AmqpType.BOOLEAN),
    ("priority", AmqpType.UBYTE),
    ("ttl", AmqpType.UINT),
    ("first_acquirer", AmqpType.BOOLEAN),
    ("delivery_count", AmqpType.UINT),
)
_ID_TYPES = (AmqpType.ULONG, AmqpType.UUID, AmqpType.BINARY, AmqpType.STRING)
_PROPERTY_FIELDS: tuple[tuple[str, AmqpType | None], ...] = (
    ("message_id", None),  # None: kept as a Value of one of _ID_TYPES
    ("user_id", AmqpType.BINARY),
    ("to", AmqpType.STRING),
    ("subject", AmqpType.STRING),
    ("reply_to", AmqpType.STRING),
    ("correlation_id", None),
    ("content_type", AmqpType.SYMBOL),
    ("content_encoding", AmqpType.SYMBOL),
    ("absolute_expiry_time", AmqpType.TIMESTAMP),
    ("creation_time", AmqpType.TIMESTAMP),
    ("group_id", AmqpType.STRING),
    ("group_sequence", AmqpType.UINT),
    ("reply_to_group_id", AmqpType.STRING),
)


@dataclass(frozen=True, slots=True)
class Data:
    sections: tuple[bytes, ...]

    @property
    def joined(self) -> bytes:
        return b"".join(self.sections)


@dataclass(frozen=True, slots=True)
class AmqpSequence:
    lists: tuple[tuple[Value, ...], ...]


@dataclass(frozen=True, slots=True)
class AmqpValue:
    value: Value


Body = Data | AmqpSequence | AmqpValue


def _fields(section: Section, names: Sequence[tuple[str, AmqpType | None]]) -> dict[str, object]:
    items: tuple[Value, ...] = section.value.value  # type: ignore[assignment]
    if len(items) > len(names):
        raise bad_value(f"{section.code.name.lower()} list of {len(items)} fields")
    out: dict[str, object] = {}
    for (name, kind), item in zip(names, items, strict=False):
        if item.type is AmqpType.NULL:
            continue
        if kind is None:
            if item.type not in _ID_TYPES:
                raise bad_value(f"{name} of type {item.type.value}")
            out[name] = item
            continue
        if item.type is not kind and not (kind is AmqpType.SYMBOL and item.type is AmqpType.STRING):
            raise bad_value(f"{name} of type {item.type.value}, expected {kind.value}")
        out[name] = item.value
    return out


@dataclass(frozen=True, slots=True)
class AmqpMessage:
    sections: tuple[Section, ...]

    def section(self, code: SectionCode) -> Section | None:
        return next((s for s in self.sections if s.code is code), None)

    @property
    def header(self) -> Header | None:
        s = self.section(SectionCode.HEADER)
        return None if s is None else Header(**_fields(s, _HEADER_FIELDS))  # type: ignore[arg-type]

    @property
    def properties(self) -> Properties | None:
        s = self.section(SectionCode.PROPERTIES)
        return None if s is None else Properties(**_fields(s, _PROPERTY_FIELDS))  # type: ignore[arg-type]

    def _map(self, code: SectionCode) -> tuple[tuple[Value, Value], ...] | None:
        s = self.section(code)
        return None if s is None else s.value.value  # type: ignore[return-value]

    @property
    def delivery_annotations(self) -> tuple[tuple[Value, Value], ...] | None:
        return self._map(SectionCode.DELIVERY_ANNOTATIONS)

    @property
    def message_annotations(self) -> tuple[tuple[Value, Value], ...] | None:
        return self._map(SectionCode.MESSAGE_ANNOTATIONS)

    @property
    def footer(self) -> tuple[tuple[Value, Value], ...] | None:
        return self._map(SectionCode.FOOTER)

    @property
    def application_properties(self) -> tuple[tuple[str, Value], ...] | None:
        pairs = self._map(SectionCode.APPLICATION_PROPERTIES)
        if pairs is None:
            return None
        out: list[tuple[str, Value]] = []
        for key, item in pairs:
            if key.type is not AmqpType.STRING:
                raise bad_value(f"application-properties key of type {key.type.value}")
            out.append((key.value, item))  # type: ignore[arg-type]
        return tuple(out)

    @property
    def body(self) -> Body | None:
        bodies = [s for s in self.sections if s.code in _BODY]
        if not bodies:
            return None
        if bodies[0].code is SectionCode.DATA:
            return Data(tuple(s.value.value for s in bodies))  # type: ignore[misc]
        if bodies[0].code is SectionCode.AMQP_SEQUENCE:
            return AmqpSequence(tuple(s.value.value for s in bodies))  # type: ignore[misc]
        return AmqpValue(bodies[0].value)


_ANNOTATION_KEYS = (AmqpType.SYMBOL, AmqpType.ULONG)


def decode_message(data: bytes | bytearray | memoryview) -> AmqpMessage:
    """A bare message: sections in the order of §8, each checked against its type."""
    reader = ValueReader(data)
    end = len(reader.data)
    pos = 0
    sections: list[Section] = []
    last: SectionCode | None = None
    while pos < end:
        start = pos
        pos = reader.take(pos, 1, end)
        if reader.data[start] != 0x00:
            raise bad_value(f"section at {start} is not a described type")
        descriptor, pos = reader.value(pos, end)
        if (
            descriptor.type is not AmqpType.ULONG
            or descriptor.value not in SectionCode._value2member_map_
        ):
            raise bad_value(f"unknown section descriptor {descriptor.value!r}")
        code = SectionCode(descriptor.value)  # type: ignore[arg-type]
        if last is not None and (code < last or (code == last and code not in _BODY[:2])):
            raise bad_value(f"section {code.name} after {last.name}")
        if last in _BODY and code in _BODY and code != last:
            raise bad_value(f"body section {code.name} after {last.name}")
        value, pos = reader.value(pos, end)
        expected = _SECTION_TYPE.get(code)
        if expected is not None and value.type is not expected:
            raise bad_value(f"{code.name} section holds a {value.type.value}")
        sections.append(Section(code, value, descriptor.code or 0x53))
        last = code
    message = AmqpMessage(tuple(sections))
    _check_views(message)
    return message


def _check_views(message: AmqpMessage) -> None:
    _ = message.header, message.properties, message.application_properties
    for pairs in (message.delivery_annotations, message.message_annotations, message.footer):
        for key, _item in pairs or ():
            if key.type not in _ANNOTATION_KEYS:
                raise bad_value(f"annotation key of type {key.type.value}")


def encode_message(message: AmqpMessage) -> bytes:
    out = bytearray()
    for s in message.sections:
        out.append(0x00)
        if s.descriptor_code == 0x80:
            out += b"\x80" + int(s.code).to_bytes(8, "big")
        else:
            out += bytes((0x53, s.code))
        write_value(out, s.value)
    return bytes(out)


def _list_of(obj: Header | Properties, names: Sequence[tuple[str, AmqpType | None]]) -> Value:
    items: list[Value] = []
    for name, kind in names:
        x = getattr(obj, name)
        if x is None:
            items.append(NULL)
        elif kind is None:
            if not isinstance(x, Value) or x.type not in _ID_TYPES:
                raise LocalProtocolError(f"{name} must be a ulong, uuid, binary or string Value")
            items.append(x)
        else:
            items.append(Value(kind, x))
    return Value(AmqpType.LIST, tuple(items))


def build_message(
    *,
    data: bytes | Sequence[bytes] | None = None,
    value: Value | None = None,
    sequence: Sequence[Sequence[Value]] | None = None,
    header: Header | None = None,
    delivery_annotations: Iterable[tuple[Value, Value]] | None = None,
    message_annotations: Iterable[tuple[Value, Value]] | None = None,
    properties: Properties | None = None,
    application_properties: Iterable[tuple[str, Value]] | None = None,
    footer: Iterable[tuple[Value, Value]] | None = None,
) -> AmqpMessage:
    """A message laid out as rstream lays it out: every header/properties field written (nulls
    included, 5 and 13 of them), list8/map8 and the short forms wherever they fit."""
    if sum(x is not None for x in (data, value, sequence)) > 1:
        raise LocalProtocolError("one body kind: data, value or sequence")
    sections: list[Section] = []
    if header is not None:
        sections.append(Section(SectionCode.HEADER, _list_of(header, _HEADER_FIELDS)))
    for code, pairs in (
        (SectionCode.DELIVERY_ANNOTATIONS, delivery_annotations),
        (SectionCode.MESSAGE_ANNOTATIONS, message_annotations),
    ):
        if pairs is not None:
            sections.append(Section(code, Value(AmqpType.MAP, tuple(pairs))))
    if properties is not None:
        sections.append(Section(SectionCode.PROPERTIES, _list_of(properties, _PROPERTY_FIELDS)))
    if application_properties is not None:
        pairs_ = tuple((Value(AmqpType.STRING, k), v) for k, v in application_properties)
        sections.append(Section(SectionCode.APPLICATION_PROPERTIES, Value(AmqpType.MAP, pairs_)))
    if isinstance(data, bytes | bytearray):
        data = [bytes(data)]
    for chunk in data or ():
        sections.append(Section(SectionCode.DATA, Value(AmqpType.BINARY, bytes(chunk))))
    for items in sequence or ():
        sections.append(Section(SectionCode.AMQP_SEQUENCE, Value(AmqpType.LIST, tuple(items))))
    if value is not None:
        sections.append(Section(SectionCode.AMQP_VALUE, value))
    if footer is not None:
        sections.append(Section(SectionCode.FOOTER, Value(AmqpType.MAP, tuple(footer))))
    return AmqpMessage(tuple(sections))


# --- entries that are not AMQP ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RawPayload:
    """Entry bytes that are not an AMQP 1.0 message (rstream ``RawMessage``), kept whole."""

    data: bytes


def decode_payload(data: bytes | bytearray | memoryview) -> AmqpMessage | RawPayload:
    """The entry as a message when it parses as one, else whole. Bytes that happen to form a
    valid message are read as one: the stream protocol has no flag to tell them apart (§8)."""
    if not data or data[0] != 0x00:  # every section starts with the described-type byte
        return RawPayload(bytes(data))
    try:
        return decode_message(data)
    except RemoteProtocolError:
        return RawPayload(bytes(data))


def encode_payload(payload: AmqpMessage | RawPayload) -> bytes:
    if isinstance(payload, RawPayload):
        return payload.data
    return encode_message(payload)
