"""RabbitMQ Stream entries <-> canonical messages and stored entries (DESIGN.md §3,
rabbitmq-stream.md §6, §8). Pure functions shared by both roles: the listener's translator
(``gateway.translate.rabbitmq_stream.chunks``, which adds the Deliver chunks) and the RabbitMQ
backend (``gateway.backends.rabbitmq_stream.backend``), which may not import translators.

Each entry is an AMQP 1.0 bare message (§8), or any bytes (rstream ``RawMessage``), taken whole:

* value: the data sections joined. An amqp-value holding a binary gives its bytes and one holding
  a string its UTF-8. Any other body (an amqp-value map or number, amqp-sequence sections: rbfly
  sends a ``dict`` as a map) keeps its encoded body sections as the value and names the section in
  the ``streamgate.amqp-body`` header, so that a RabbitMQ reader gets the same body back.
* headers: application-properties, each AMQP simple type as the matching typed kind. The other
  properties fields (a string message-id, correlation-id, content-type...) travel as
  ``streamgate.amqp.<field>`` headers and come back to their fields.
* timestamp: properties.creation-time (ms) -> us, else 0 (readers fall back on the chunk's). A
  timestamp with a sub-millisecond part also travels whole in the ``x-opt-streamgate-timestamp-us``
  message annotation (a long), which wins over the creation time when both are there.
* id: a ulong or uuid message-id. key: the ``x-routing-key`` message annotation, which RabbitMQ
  writes for a message published over AMQP 0-9-1 (neither rstream nor rbfly sets one; their
  super-stream routing keys never reach the broker).

The reverse writes a message rstream decodes back to the same values; a key goes to the
``x-routing-key`` annotation (a string when it is UTF-8, else a binary). What cannot be carried
(the AMQP header section, other annotations, the footer, 128-bit integers) is reported through
``lossy(field)``.

Consumer offsets: StoreOffset names the LAST processed offset; the canonical store keeps the NEXT
one to read: ``next = stored + 1``.
"""

from __future__ import annotations

import dataclasses
import struct
import uuid
from collections.abc import Sequence
from typing import Final

from gateway.model import (
    CorruptMessage,
    Header,
    HeaderKind,
    Message,
    WireBatch,
    WireFormat,
)
from gateway.translate.lossy import Lossy, ignore_lossy
from gateway.translate.rabbitmq_stream.notes import PLAIN, ChunkNotes, annotate, split
from protocols._wire import RemoteProtocolError
from protocols.rabbitmq_stream.amqp import (
    AmqpMessage,
    AmqpSequence,
    AmqpType,
    AmqpValue,
    Data,
    Properties,
    RawPayload,
    Section,
    SectionCode,
    Value,
    build_message,
    decode_message,
    decode_payload,
    encode_message,
    encode_value,
)
from protocols.rabbitmq_stream.chunk import (
    Entry,
    SimpleEntry,
    decode_entry,
    encode_entry,
)
from protocols.rabbitmq_stream.frames_publish import SimpleEntries, sent_entries

ROUTING_KEY: Final = "x-routing-key"  # message annotation RabbitMQ sets from AMQP 0-9-1 publishes
# A canonical timestamp with microseconds, which creation-time (ms) cannot hold (a long).
TIMESTAMP_US: Final = "x-opt-streamgate-timestamp-us"
BODY_HEADER: Final = "streamgate.amqp-body"  # the value holds these encoded body sections
PROPERTY_PREFIX: Final = "streamgate.amqp."  # + a properties field name
_ULONG_MAX: Final = (1 << 64) - 1


# --- typed values <-> headers -------------------------------------------------------------------

_T = AmqpType
_K = HeaderKind
# AMQP numbers and the canonical kind (little-endian fixed width) that holds each.
_NUMBERS: Final[dict[AmqpType, tuple[HeaderKind, struct.Struct]]] = {
    _T.UBYTE: (_K.UINT8, struct.Struct("<B")),
    _T.USHORT: (_K.UINT16, struct.Struct("<H")),
    _T.UINT: (_K.UINT32, struct.Struct("<I")),
    _T.ULONG: (_K.UINT64, struct.Struct("<Q")),
    _T.BYTE: (_K.INT8, struct.Struct("<b")),
    _T.SHORT: (_K.INT16, struct.Struct("<h")),
    _T.INT: (_K.INT32, struct.Struct("<i")),
    _T.LONG: (_K.INT64, struct.Struct("<q")),
    _T.TIMESTAMP: (_K.TIMESTAMP, struct.Struct("<q")),
    _T.FLOAT: (_K.FLOAT32, struct.Struct("<f")),
    _T.DOUBLE: (_K.FLOAT64, struct.Struct("<d")),
}
_NUMBER_OF_KIND: Final = {kind: (t, fmt) for t, (kind, fmt) in _NUMBERS.items()}


def _header(name: str, v: Value, lossy: Lossy) -> Header:
    x = v.value
    if v.type in _NUMBERS:
        kind, fmt = _NUMBERS[v.type]
        return Header(name, fmt.pack(x), kind)
    if v.type is _T.STRING and isinstance(x, str):
        return Header(name, x.encode(), _K.STRING)
    if v.type is _T.SYMBOL and isinstance(x, str):
        return Header(name, x.encode(), _K.SYMBOL)
    if v.type is _T.BOOLEAN:
        return Header(name, b"\x01" if x else b"\x00", _K.BOOL)
    if v.type is _T.BINARY and isinstance(x, bytes):
        return Header(name, x, _K.RAW)
    if v.type is _T.UUID and isinstance(x, uuid.UUID):
        return Header(name, x.bytes, _K.UUID)
    if v.type is _T.NULL:
        return Header(name, b"", _K.NULL)
    if v.type is _T.CHAR and isinstance(x, str):
        lossy("headers")  # comes back as a string
        return Header(name, x.encode(), _K.STRING)
    lossy("headers")  # decimals and compound values: their AMQP encoding, untyped
    return Header(name, encode_value(v), _K.RAW)


def _value(h: Header, lossy: Lossy) -> Value:
    kind, raw = h.kind, h.value
    try:
        if kind in _NUMBER_OF_KIND:
            amqp_type, fmt = _NUMBER_OF_KIND[kind]
            return Value(amqp_type, fmt.unpack(raw)[0])
        if kind is _K.STRING:
            return Value(_T.STRING, raw.decode())
        if kind is _K.SYMBOL:
            return Value(_T.SYMBOL, raw.decode("ascii"))
        if kind is _K.BOOL and len(raw) == 1:
            return Value(_T.BOOLEAN, raw != b"\x00")
        if kind is _K.UUID:
            return Value(_T.UUID, uuid.UUID(bytes=raw))
        if kind is _K.NULL and not raw:
            return Value(_T.NULL)
    except (struct.error, UnicodeDecodeError, ValueError):
        pass
    if kind is not _K.RAW:
        lossy("headers")  # 128-bit integers, malformed values: their bytes, untyped
    return Value(_T.BINARY, raw)


# --- entries -> canonical -----------------------------------------------------------------------

_ID_TYPES: Final = (_T.ULONG, _T.UUID)
_OTHER_BODIES: Final = (SectionCode.AMQP_VALUE, SectionCode.AMQP_SEQUENCE)
_LOSSY_SECTIONS: Final = {
    SectionCode.HEADER: "amqp_header",
    SectionCode.DELIVERY_ANNOTATIONS: "annotations",
    SectionCode.FOOTER: "footer",
}


def _body(message: AmqpMessage) -> tuple[bytes, tuple[Header, ...]]:
    body = message.body
    if body is None:
        return b"", ()
    if isinstance(body, Data):
        return body.joined, ()
    if (
        isinstance(body, AmqpValue)
        and body.value.type is _T.BINARY
        and isinstance(body.value.value, bytes)
    ):
        return body.value.value, ()
    if isinstance(body, AmqpValue) and body.value.type is _T.STRING:
        return str(body.value.value).encode(), ()
    sections = tuple(s for s in message.sections if s.code in _OTHER_BODIES)
    name = "amqp-sequence" if isinstance(body, AmqpSequence) else "amqp-value"
    return encode_message(AmqpMessage(sections)), (Header(BODY_HEADER, name.encode(), _K.SYMBOL),)


# The typed properties fields (rabbitmq-stream.md §8); None: message-id and correlation-id, a
# ulong, uuid, binary or string.
_PROPERTY_TYPES: Final[dict[str, AmqpType | None]] = {
    "message_id": None,
    "user_id": _T.BINARY,
    "to": _T.STRING,
    "subject": _T.STRING,
    "reply_to": _T.STRING,
    "correlation_id": None,
    "content_type": _T.SYMBOL,
    "content_encoding": _T.SYMBOL,
    "absolute_expiry_time": _T.TIMESTAMP,
    "creation_time": _T.TIMESTAMP,
    "group_id": _T.STRING,
    "group_sequence": _T.UINT,
    "reply_to_group_id": _T.STRING,
}
_ANY_ID: Final = (_T.ULONG, _T.UUID, _T.BINARY, _T.STRING)


def _property_value(field: str, x: object) -> Value:
    if isinstance(x, Value):
        return x
    return Value(_PROPERTY_TYPES[field] or _T.STRING, x)


def _property_field(field: str, v: Value) -> object | None:
    """A carried header's value for ``field``, None when its type does not fit the field."""
    expected = _PROPERTY_TYPES[field]
    if expected is None:
        return v if v.type in _ANY_ID else None
    return v.value if v.type is expected else None


def _annotated(message: AmqpMessage, lossy: Lossy) -> tuple[bytes | None, int]:
    """The key (``x-routing-key``) and the microsecond timestamp (0: none) it carries."""
    key = None
    timestamp_us = 0
    for name, item in message.message_annotations or ():
        if name.value == ROUTING_KEY and isinstance(item.value, str):
            key = item.value.encode()
        elif name.value == ROUTING_KEY and isinstance(item.value, bytes):
            key = item.value
        elif name.value == TIMESTAMP_US and item.type is _T.LONG and isinstance(item.value, int):
            timestamp_us = item.value
        else:
            lossy("annotations")
    return key, timestamp_us


def to_canonical(payload: bytes, lossy: Lossy = ignore_lossy, *, offset: int = -1) -> Message:
    """One entry (or sub-entry record) as a canonical message (see the module docstring)."""
    decoded = decode_payload(payload)
    if isinstance(decoded, RawPayload):
        return Message(decoded.data, offset=offset)
    value, headers = _body(decoded)
    timestamp_us = message_id = 0
    properties = decoded.properties
    if properties is not None:
        for field in _PROPERTY_TYPES:
            x = getattr(properties, field)
            if x is None:
                continue
            if field == "creation_time" and isinstance(x, int):
                timestamp_us = x * 1000
            elif field == "message_id" and isinstance(x, Value) and x.type in _ID_TYPES:
                message_id = x.value.int if isinstance(x.value, uuid.UUID) else x.value  # type: ignore[assignment]
            else:
                headers += (_header(PROPERTY_PREFIX + field, _property_value(field, x), lossy),)
    for name, item in decoded.application_properties or ():
        headers += (_header(name, item, lossy),)
    for section in decoded.sections:
        if section.code in _LOSSY_SECTIONS:
            lossy(_LOSSY_SECTIONS[section.code])
    key, precise_us = _annotated(decoded, lossy)
    timestamp_us = precise_us or timestamp_us
    return Message(value, key, headers, timestamp_us, offset, message_id)


# --- canonical -> entries -----------------------------------------------------------------------


def _body_sections(m: Message, lossy: Lossy) -> tuple[Section, ...] | None:
    """The body sections a ``streamgate.amqp-body`` value holds, None when it holds none."""
    if not any(h.name == BODY_HEADER for h in m.headers):
        return None
    try:
        sections = decode_message(m.value).sections
    except RemoteProtocolError:
        sections = ()
    if not sections or any(s.code not in _OTHER_BODIES for s in sections):
        lossy("value")  # not what the header promised: sent as a data section
        return None
    return sections


def _message_id(m: Message) -> Value | None:
    if not m.id:
        return None
    if m.id <= _ULONG_MAX:
        return Value(_T.ULONG, m.id)
    return Value(_T.UUID, uuid.UUID(int=m.id & ((1 << 128) - 1)))


def _properties(m: Message, carried: dict[str, Value], lossy: Lossy) -> Properties | None:
    fields: dict[str, object] = {}
    for field, v in carried.items():
        x = _property_field(field, v)
        if x is None:
            lossy("properties")
        else:
            fields[field] = x
    message_id = _message_id(m)
    if message_id is not None:
        fields["message_id"] = message_id
    if m.timestamp_us > 0:
        fields["creation_time"] = m.timestamp_us // 1000
    return Properties(**fields) if fields else None  # type: ignore[arg-type]


def _annotations(key: bytes | None, timestamp_us: int) -> list[tuple[Value, Value]] | None:
    out: list[tuple[Value, Value]] = []
    if key is not None:
        try:
            item = Value(_T.STRING, key.decode())
        except UnicodeDecodeError:
            item = Value(_T.BINARY, key)
        out.append((Value(_T.SYMBOL, ROUTING_KEY), item))
    if timestamp_us % 1000:  # creation-time holds milliseconds only
        out.append((Value(_T.SYMBOL, TIMESTAMP_US), Value(_T.LONG, timestamp_us)))
    return out or None


def to_amqp(m: Message, lossy: Lossy = ignore_lossy) -> bytes:
    """A canonical message as the AMQP 1.0 bytes of one entry."""
    carried: dict[str, Value] = {}
    application: list[tuple[str, Value]] = []
    for h in m.headers:
        field = h.name[len(PROPERTY_PREFIX) :] if h.name.startswith(PROPERTY_PREFIX) else None
        if field is not None and field in _PROPERTY_TYPES:
            carried[field] = _value(h, lossy)
        elif h.name != BODY_HEADER:
            application.append((h.name, _value(h, lossy)))
    properties = _properties(m, carried, lossy)
    body = _body_sections(m, lossy)
    message = build_message(
        message_annotations=_annotations(m.key, m.timestamp_us),
        properties=properties,
        application_properties=application or None,
        data=m.value if body is None else None,
    )
    if body is not None:
        message = AmqpMessage(message.sections + body)
    return encode_message(message)


# --- the stored wire form -----------------------------------------------------------------------


def _records(entry: Entry) -> tuple[bytes, ...]:
    return (entry.data,) if isinstance(entry, SimpleEntry) else entry.records()


def record_count(entry: Entry) -> int:
    return 1 if isinstance(entry, SimpleEntry) else entry.record_count


def wire_batch(
    entries: Sequence[Entry], *, timestamp_us: int, notes: ChunkNotes = PLAIN
) -> WireBatch:
    """Published entries to store as sent; ``timestamp_us``: the arrival time, what the chunk
    timestamp would be (messages without a creation time get it when decoded); ``notes``: its
    writer and filter values (``notes``), kept in front of the entries."""
    return WireBatch(
        format=WIRE_FORMAT,
        data=annotate(notes, b"".join(encode_entry(e) for e in entries)),
        count=sum(record_count(e) for e in entries),
        first_timestamp_us=timestamp_us,
        max_timestamp_us=timestamp_us,
    )


def stored_batch(
    data: bytes, count: int, *, timestamp_us: int, notes: ChunkNotes = PLAIN
) -> WireBatch:
    """``wire_batch`` for entries already encoded (``count`` simple entries: a Publish frame's
    SimpleEntries.stored), without an object per message."""
    return WireBatch(
        format=WIRE_FORMAT,
        data=annotate(notes, data),
        count=count,
        first_timestamp_us=timestamp_us,
        max_timestamp_us=timestamp_us,
    )


def wire_entries(stored: WireBatch) -> list[Entry]:
    """The entries of a stored batch, as the publisher sent them (without its notes)."""
    entries: list[Entry] = []
    pos = 0
    data = split(stored.data)[1]
    try:
        while pos < len(data):
            entry, pos = decode_entry(data, pos)
            entries.append(entry)
    except RemoteProtocolError as exc:
        raise CorruptMessage(f"stored RabbitMQ entries: {exc}") from None
    return entries


def decode_wire(stored: WireBatch, lossy: Lossy = ignore_lossy) -> list[Message]:
    """A stored batch as canonical messages (for readers of other protocols)."""
    out: list[Message] = []
    offset = stored.base_offset
    try:
        records = [r for e in wire_entries(stored) for r in _records(e)]
    except RemoteProtocolError as exc:
        raise CorruptMessage(f"stored RabbitMQ sub-entry batch: {exc}") from None
    for record in records:
        m = to_canonical(record, lossy, offset=offset)
        if m.timestamp_us <= 0:
            m = m._replace(timestamp_us=stored.first_timestamp_us)
        out.append(m)
        offset += 1
    return out


# published entries as sent: simple entries and sub-entry batches
WIRE_FORMAT: Final = WireFormat(name="rabbitmq_stream", decode=decode_wire)


def published_batch(frame: bytes, count: int, *, timestamp_us: int) -> WireBatch:
    """A Publish v1 frame of ``count`` simple entries, as the client sent it (after its size
    prefix: ``SimpleEntries.as_sent``), for a backend that publishes it on as it is
    (``PUBLISHED_FORMAT`` in its wire formats: RabbitMQ, which takes the items as they came,
    each after its publishing id)."""
    return WireBatch(
        format=PUBLISHED_FORMAT,
        data=frame,
        count=count,
        first_timestamp_us=timestamp_us,
        max_timestamp_us=timestamp_us,
    )


def published_entries(wire: WireBatch) -> SimpleEntries:
    """The entries of a ``published_batch``."""
    try:
        entries = sent_entries(wire.data)
    except RemoteProtocolError as exc:
        raise CorruptMessage(f"published RabbitMQ frame: {exc}") from None
    if len(entries) != wire.count:
        raise CorruptMessage(f"published RabbitMQ frame: {len(entries)} entries, {wire.count} said")
    return entries


def stored_of_published(wire: WireBatch) -> WireBatch:
    """A ``published_batch`` in the stored form (the ids left out)."""
    stored = stored_batch(published_entries(wire).stored, wire.count,
                          timestamp_us=wire.first_timestamp_us)  # fmt: skip
    return dataclasses.replace(stored, base_offset=wire.base_offset)


def _decode_published(wire: WireBatch) -> list[Message]:
    return decode_wire(stored_of_published(wire))


# a client's Publish v1 frame of simple entries, as it came (to be published on as it is)
PUBLISHED_FORMAT: Final = WireFormat(name="rabbitmq_stream_publish", decode=_decode_published)


# --- consumer offsets ---------------------------------------------------------------------------


def committed_of_stored(stored: int) -> int:
    """StoreOffset's LAST processed offset -> the canonical NEXT offset to read."""
    return stored + 1


def stored_of_committed(committed: int | None) -> int | None:
    """The QueryOffset answer for a canonical NEXT offset; None: answer "no offset" (0x13)."""
    return None if committed is None or committed <= 0 else committed - 1
