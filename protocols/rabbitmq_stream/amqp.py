"""The AMQP 1.0 bare message that stream clients put in each entry (rabbitmq-stream.md §8).

A message is a sequence of described sections. Every decoded ``Value`` remembers the constructor
byte it arrived with, so a decoded message re-encodes to the same bytes (rstream writes list8 /
map8 and small ints, rbfly map32 and int32); a value built here without one gets rstream's
choices (pyamqp's ``use_smallest``: the shortest form, booleans as ``56 00/01``). Typed views
(``properties``, ``application_properties``, ``body``...) are read from the sections on demand;
``decode_message`` checks them once so that a message that decodes can be viewed.

An entry need not be AMQP at all (rstream's ``RawMessage``): ``decode_payload`` returns a
``RawPayload`` for bytes that are not a well-formed message (DESIGN §3: taken whole).
"""

from __future__ import annotations

import enum
import struct
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from protocols._wire import LocalProtocolError, RemoteProtocolError

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

# Nesting deeper than this is refused rather than recursed into (a few bytes per level would
# otherwise exhaust Python's stack).
MAX_DEPTH = 32


class AmqpType(enum.Enum):
    NULL = "null"
    BOOLEAN = "boolean"
    UBYTE = "ubyte"
    USHORT = "ushort"
    UINT = "uint"
    ULONG = "ulong"
    BYTE = "byte"
    SHORT = "short"
    INT = "int"
    LONG = "long"
    FLOAT = "float"
    DOUBLE = "double"
    DECIMAL32 = "decimal32"  # value: the 4/8/16 raw bytes (no client of §9 sends decimals)
    DECIMAL64 = "decimal64"
    DECIMAL128 = "decimal128"
    CHAR = "char"  # value: a one-character str
    TIMESTAMP = "timestamp"  # value: int, ms since the epoch
    UUID = "uuid"  # value: uuid.UUID
    BINARY = "binary"  # value: bytes
    STRING = "string"  # value: str
    SYMBOL = "symbol"  # value: str (ASCII)
    LIST = "list"  # value: tuple[Value, ...]
    MAP = "map"  # value: tuple[tuple[Value, Value], ...] (wire order, duplicates kept)
    ARRAY = "array"  # value: Array
    DESCRIBED = "described"  # value: Described


@dataclass(frozen=True, slots=True)
class Value:
    type: AmqpType
    value: object = None
    # The constructor byte seen on the wire; None = the default form. Not part of equality:
    # ``Value(UINT, 0)`` is the same value whether it came as 43 or as 70 00000000.
    code: int | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class Described:
    descriptor: Value
    value: Value


@dataclass(frozen=True, slots=True)
class Array:
    element_type: AmqpType
    items: tuple[Value, ...] = ()
    element_code: int | None = field(default=None, compare=False)


NULL = Value(AmqpType.NULL)

# --- constructors -----------------------------------------------------------------------------

_FIXED: dict[int, tuple[AmqpType, int]] = {
    0x40: (AmqpType.NULL, 0),
    0x41: (AmqpType.BOOLEAN, 0),
    0x42: (AmqpType.BOOLEAN, 0),
    0x56: (AmqpType.BOOLEAN, 1),
    0x50: (AmqpType.UBYTE, 1),
    0x60: (AmqpType.USHORT, 2),
    0x43: (AmqpType.UINT, 0),
    0x52: (AmqpType.UINT, 1),
    0x70: (AmqpType.UINT, 4),
    0x44: (AmqpType.ULONG, 0),
    0x53: (AmqpType.ULONG, 1),
    0x80: (AmqpType.ULONG, 8),
    0x51: (AmqpType.BYTE, 1),
    0x61: (AmqpType.SHORT, 2),
    0x54: (AmqpType.INT, 1),
    0x71: (AmqpType.INT, 4),
    0x55: (AmqpType.LONG, 1),
    0x81: (AmqpType.LONG, 8),
    0x72: (AmqpType.FLOAT, 4),
    0x82: (AmqpType.DOUBLE, 8),
    0x74: (AmqpType.DECIMAL32, 4),
    0x84: (AmqpType.DECIMAL64, 8),
    0x94: (AmqpType.DECIMAL128, 16),
    0x73: (AmqpType.CHAR, 4),
    0x83: (AmqpType.TIMESTAMP, 8),
    0x98: (AmqpType.UUID, 16),
    0x45: (AmqpType.LIST, 0),
}
_INT_FORMATS: dict[int, struct.Struct] = {
    0x56: struct.Struct(">B"),
    0x50: struct.Struct(">B"),
    0x60: struct.Struct(">H"),
    0x52: struct.Struct(">B"),
    0x70: struct.Struct(">I"),
    0x53: struct.Struct(">B"),
    0x80: struct.Struct(">Q"),
    0x51: struct.Struct(">b"),
    0x61: struct.Struct(">h"),
    0x54: struct.Struct(">b"),
    0x71: struct.Struct(">i"),
    0x55: struct.Struct(">b"),
    0x81: struct.Struct(">q"),
    0x83: struct.Struct(">q"),
    0x72: struct.Struct(">f"),
    0x82: struct.Struct(">d"),
}
# Variable width: (type, bytes of the length prefix).
_VARIABLE: dict[int, tuple[AmqpType, int]] = {
    0xA0: (AmqpType.BINARY, 1),
    0xB0: (AmqpType.BINARY, 4),
    0xA1: (AmqpType.STRING, 1),
    0xB1: (AmqpType.STRING, 4),
    0xA3: (AmqpType.SYMBOL, 1),
    0xB3: (AmqpType.SYMBOL, 4),
}
# Compound: (type, bytes of the size and of the count fields).
_COMPOUND: dict[int, tuple[AmqpType, int]] = {
    0xC0: (AmqpType.LIST, 1),
    0xD0: (AmqpType.LIST, 4),
    0xC1: (AmqpType.MAP, 1),
    0xD1: (AmqpType.MAP, 4),
    0xE0: (AmqpType.ARRAY, 1),
    0xF0: (AmqpType.ARRAY, 4),
}
_TYPE_OF: dict[int, AmqpType] = {
    **{c: t for c, (t, _) in _FIXED.items()},
    **{c: t for c, (t, _) in _VARIABLE.items()},
    **{c: t for c, (t, _) in _COMPOUND.items()},
    0x00: AmqpType.DESCRIBED,
}
_SIZE = {1: struct.Struct(">B"), 4: struct.Struct(">I")}
_U8_MAX, _U32_MAX = 0xFF, 0xFFFF_FFFF
# An array of zero-width elements (nulls, true, uint 0) costs no bytes per element; bound the
# count so that a 10-byte array cannot make the decoder loop 2**32 times.
_MAX_ZERO_WIDTH_ITEMS = 65536


def _bad(message: str) -> RemoteProtocolError:
    return RemoteProtocolError(f"AMQP 1.0: {message}")


# --- decoding ---------------------------------------------------------------------------------


class _Reader:
    __slots__ = ("data", "depth")

    def __init__(self, data: bytes | bytearray | memoryview) -> None:
        self.data = memoryview(data)
        self.depth = 0

    def take(self, pos: int, n: int, end: int) -> int:
        if n > end - pos:
            raise _bad(f"{n} bytes needed at {pos}, {end - pos} left")
        return pos + n

    def value(self, pos: int, end: int) -> tuple[Value, int]:
        pos_code = self.take(pos, 1, end)
        code = self.data[pos]
        if code == 0x00:
            return self.described(pos_code, end)
        return self.body(code, pos_code, end)

    def described(self, pos: int, end: int) -> tuple[Value, int]:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise _bad(f"nesting deeper than {MAX_DEPTH}")
        descriptor, pos = self.value(pos, end)
        inner, pos = self.value(pos, end)
        self.depth -= 1
        return Value(AmqpType.DESCRIBED, Described(descriptor, inner), 0x00), pos

    def body(self, code: int, pos: int, end: int) -> tuple[Value, int]:
        """The value of constructor ``code`` whose bytes start at ``pos``."""
        data = self.data
        if code in _FIXED:
            kind, width = _FIXED[code]
            nxt = self.take(pos, width, end)
            raw = data[pos:nxt]
            if kind is AmqpType.BOOLEAN:
                if code == 0x56:
                    if raw[0] > 1:
                        raise _bad(f"boolean octet {raw[0]}")
                    return Value(kind, raw[0] == 1, code), nxt
                return Value(kind, code == 0x41, code), nxt
            if code in _INT_FORMATS:
                return Value(kind, _INT_FORMATS[code].unpack(raw)[0], code), nxt
            if width == 0:
                zero: object = {AmqpType.NULL: None, AmqpType.LIST: ()}.get(kind, 0)
                return Value(kind, zero, code), nxt
            if kind is AmqpType.UUID:
                return Value(kind, uuid.UUID(bytes=bytes(raw)), code), nxt
            if kind is AmqpType.CHAR:
                point = int.from_bytes(raw, "big")
                if point > 0x10FFFF:
                    raise _bad(f"char U+{point:X}")
                return Value(kind, chr(point), code), nxt
            return Value(kind, bytes(raw), code), nxt  # decimals
        if code in _VARIABLE:
            kind, prefix = _VARIABLE[code]
            pos_len = self.take(pos, prefix, end)
            (size,) = _SIZE[prefix].unpack(data[pos:pos_len])
            nxt = self.take(pos_len, size, end)
            raw_bytes = bytes(data[pos_len:nxt])
            if kind is AmqpType.BINARY:
                return Value(kind, raw_bytes, code), nxt
            try:
                text = raw_bytes.decode("utf-8" if kind is AmqpType.STRING else "ascii")
            except UnicodeDecodeError as exc:
                raise _bad(f"{kind.value}: {exc.reason}") from None
            return Value(kind, text, code), nxt
        if code in _COMPOUND:
            return self.compound(code, pos, end)
        raise _bad(f"unknown constructor 0x{code:02x}")

    def compound(self, code: int, pos: int, end: int) -> tuple[Value, int]:
        kind, width = _COMPOUND[code]
        fmt = _SIZE[width]
        pos_size = self.take(pos, width, end)
        (size,) = fmt.unpack(self.data[pos:pos_size])
        stop = self.take(pos_size, size, end)
        pos = self.take(pos_size, width, stop)
        (count,) = fmt.unpack(self.data[pos_size:pos])
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise _bad(f"nesting deeper than {MAX_DEPTH}")
        if kind is AmqpType.ARRAY:
            out: Value = Value(kind, self.array(count, pos, stop), code)
        else:
            if count > stop - pos:  # every element has a constructor byte at least
                raise _bad(f"{kind.value} of {count} elements in {stop - pos} bytes")
            items: list[Value] = []
            for _ in range(count):
                item, pos = self.value(pos, stop)
                items.append(item)
            if kind is AmqpType.MAP:
                if count % 2:
                    raise _bad(f"map with an odd element count {count}")
                pairs = tuple(zip(items[::2], items[1::2], strict=True))
                out = Value(kind, pairs, code)
            else:
                out = Value(kind, tuple(items), code)
            if pos != stop:
                raise _bad(f"{kind.value} leaves {stop - pos} of its bytes unread")
        self.depth -= 1
        return out, stop

    def array(self, count: int, pos: int, stop: int) -> Array:
        nxt = self.take(pos, 1, stop)
        element_code = self.data[pos]
        if element_code == 0x00 or element_code not in _TYPE_OF:
            raise _bad(f"array element constructor 0x{element_code:02x} not supported")
        if count > max(_MAX_ZERO_WIDTH_ITEMS, stop - nxt):
            raise _bad(f"array of {count} elements in {stop - nxt} bytes")
        items: list[Value] = []
        pos = nxt
        for _ in range(count):
            item, pos = self.body(element_code, pos, stop)
            items.append(item)
        if pos != stop:
            raise _bad(f"array leaves {stop - pos} of its bytes unread")
        return Array(_TYPE_OF[element_code], tuple(items), element_code)


def decode_value(data: bytes | bytearray | memoryview) -> Value:
    """Exactly one encoded value (trailing bytes are an error)."""
    reader = _Reader(data)
    value, pos = reader.value(0, len(reader.data))
    if pos != len(reader.data):
        raise _bad(f"{len(reader.data) - pos} bytes after the value")
    return value


# --- encoding ---------------------------------------------------------------------------------


def _default_code(v: Value) -> int:
    """rstream's (pyamqp's) choice for a value that brings no constructor of its own."""
    kind, x = v.type, v.value
    if kind is AmqpType.UINT:
        return 0x43 if x == 0 else 0x52 if _fits(x, 0, 255) else 0x70
    if kind is AmqpType.ULONG:
        return 0x44 if x == 0 else 0x53 if _fits(x, 0, 255) else 0x80
    if kind is AmqpType.INT:
        return 0x54 if _fits(x, -128, 127) else 0x71
    if kind is AmqpType.LONG:
        return 0x55 if _fits(x, -128, 127) else 0x81
    if kind in (AmqpType.BINARY, AmqpType.STRING, AmqpType.SYMBOL):
        small = len(_variable_bytes(v)) <= _U8_MAX
        return {AmqpType.BINARY: 0xA0, AmqpType.STRING: 0xA1, AmqpType.SYMBOL: 0xA3}[kind] | (
            0 if small else 0x10
        )
    if kind is AmqpType.LIST and x == ():
        return 0x45
    if kind in (AmqpType.LIST, AmqpType.MAP, AmqpType.ARRAY):
        return {AmqpType.LIST: 0xC0, AmqpType.MAP: 0xC1, AmqpType.ARRAY: 0xE0}[kind]
    return _PLAIN_CODE[kind]


_PLAIN_CODE = {
    AmqpType.NULL: 0x40,
    AmqpType.BOOLEAN: 0x56,
    AmqpType.UBYTE: 0x50,
    AmqpType.USHORT: 0x60,
    AmqpType.BYTE: 0x51,
    AmqpType.SHORT: 0x61,
    AmqpType.FLOAT: 0x72,
    AmqpType.DOUBLE: 0x82,
    AmqpType.DECIMAL32: 0x74,
    AmqpType.DECIMAL64: 0x84,
    AmqpType.DECIMAL128: 0x94,
    AmqpType.CHAR: 0x73,
    AmqpType.TIMESTAMP: 0x83,
    AmqpType.UUID: 0x98,
    AmqpType.DESCRIBED: 0x00,
}


def _fits(x: object, low: int, high: int) -> bool:
    return isinstance(x, int) and low <= x <= high


def _variable_bytes(v: Value) -> bytes:
    x = v.value
    if v.type is AmqpType.BINARY and isinstance(x, bytes | bytearray | memoryview):
        return bytes(x)
    if v.type in (AmqpType.STRING, AmqpType.SYMBOL) and isinstance(x, str):
        try:
            return x.encode("utf-8" if v.type is AmqpType.STRING else "ascii")
        except UnicodeEncodeError:
            raise LocalProtocolError(f"{v.type.value} {x!r} cannot be encoded") from None
    raise LocalProtocolError(f"{v.type.value} value {x!r}")


def _usable(code: int | None, v: Value) -> bool:
    """Whether the remembered constructor can still carry ``v`` (it may have been replaced)."""
    if code is None or _TYPE_OF.get(code) is not v.type:
        return False
    x = v.value
    if code in (0x41, 0x42):
        return x is (code == 0x41)
    if code in (0x43, 0x44):
        return x == 0
    if code == 0x45:
        return x == ()
    if code in (0x52, 0x53):
        return _fits(x, 0, 255)
    if code in (0x54, 0x55):
        return _fits(x, -128, 127)
    if code in (0xA0, 0xA1, 0xA3):
        return len(_variable_bytes(v)) <= _U8_MAX
    return True  # full-width forms and compound sizes are checked while writing


def _code_for(v: Value) -> int:
    return v.code if _usable(v.code, v) and v.code is not None else _default_code(v)


def _write(out: bytearray, v: Value) -> None:
    code = _code_for(v)
    if code == 0x00:
        d = v.value
        if not isinstance(d, Described):
            raise LocalProtocolError(f"described value {d!r}")
        out.append(code)
        _write(out, d.descriptor)
        _write(out, d.value)
        return
    if code in _COMPOUND:
        count, body = _compound_body(v)
        if _COMPOUND[code][1] == 1 and (len(body) + 1 > _U8_MAX or count > _U8_MAX):
            code |= 0x10  # the 8-bit form (remembered or default) no longer fits: widen
        out.append(code)
        _write_compound(out, code, count, body)
        return
    out.append(code)
    _write_body(out, code, v)


def _write_body(out: bytearray, code: int, v: Value) -> None:
    """``v`` without its constructor (also how array elements are written)."""
    x = v.value
    try:
        if code in _FIXED:
            if code in _INT_FORMATS:
                if v.type is AmqpType.BOOLEAN:
                    x = int(x is True)
                out += _INT_FORMATS[code].pack(x)
            elif v.type is AmqpType.UUID and isinstance(x, uuid.UUID):
                out += x.bytes
            elif v.type is AmqpType.CHAR and isinstance(x, str) and len(x) == 1:
                out += ord(x).to_bytes(4, "big")
            elif _FIXED[code][1]:  # decimals: raw bytes of the exact width
                if not isinstance(x, bytes) or len(x) != _FIXED[code][1]:
                    raise LocalProtocolError(f"{v.type.value} needs {_FIXED[code][1]} bytes")
                out += x
            return
        if code in _VARIABLE:
            raw = _variable_bytes(v)
            out += _size_prefix(_VARIABLE[code][1], len(raw))
            out += raw
            return
        count, body = _compound_body(v)
        _write_compound(out, code, count, body)
    except (struct.error, TypeError) as exc:
        raise LocalProtocolError(f"{v.type.value} {x!r}: {exc}") from None


def _size_prefix(width: int, n: int) -> bytes:
    if n > (_U8_MAX if width == 1 else _U32_MAX):
        raise LocalProtocolError(f"{n} does not fit a {width}-byte size")
    return _SIZE[width].pack(n)


def _write_compound(out: bytearray, code: int, count: int, body: bytes | bytearray) -> None:
    width = _COMPOUND[code][1]
    out += _size_prefix(width, len(body) + width)
    out += _size_prefix(width, count)
    out += body


def _compound_body(v: Value) -> tuple[int, bytearray]:
    body = bytearray()
    x = v.value
    if v.type is AmqpType.ARRAY:
        if not isinstance(x, Array):
            raise LocalProtocolError(f"array value {x!r}")
        if x.element_type is AmqpType.DESCRIBED:
            raise LocalProtocolError("arrays of described values are not supported")
        element = _array_code(x)
        body.append(element)
        for item in x.items:
            if item.type is not x.element_type:
                raise LocalProtocolError(f"{item.type.value} in an array of {x.element_type}")
            _write_body(body, element, item)
        return len(x.items), body
    if v.type is AmqpType.MAP:
        pairs: tuple[tuple[Value, Value], ...] = x  # type: ignore[assignment]
        for key, item in pairs:
            _write(body, key)
            _write(body, item)
        return 2 * len(pairs), body
    items: tuple[Value, ...] = x  # type: ignore[assignment]
    for item in items:
        _write(body, item)
    return len(items), body


def _array_code(a: Array) -> int:
    codes = {item.code for item in a.items}
    if len(codes) == 1 and all(_usable(item.code, item) for item in a.items):
        return codes.pop()  # type: ignore[return-value]
    if not a.items:
        if a.element_code is not None and _TYPE_OF.get(a.element_code) is a.element_type:
            return a.element_code
        return _default_code(Value(a.element_type, _EMPTY.get(a.element_type, 0)))
    defaults = {_default_code(item) for item in a.items}
    if len(defaults) == 1 and a.element_type not in _WIDENING:
        return defaults.pop()
    # Mixed widths share the widest form of the type.
    return max(c for c, t in _TYPE_OF.items() if t is a.element_type and c not in (0x41, 0x42))


# Compound elements share one constructor, so the 8-bit form is only safe when it came that way.
_WIDENING = (AmqpType.LIST, AmqpType.MAP, AmqpType.ARRAY)
_EMPTY: dict[AmqpType, object] = {
    AmqpType.NULL: None,
    AmqpType.BOOLEAN: False,
    AmqpType.BINARY: b"",
    AmqpType.STRING: "",
    AmqpType.SYMBOL: "",
    AmqpType.LIST: (),
    AmqpType.MAP: (),
    AmqpType.ARRAY: Array(AmqpType.NULL),
    AmqpType.UUID: uuid.UUID(int=0),
    AmqpType.CHAR: "\0",
    AmqpType.FLOAT: 0.0,
    AmqpType.DOUBLE: 0.0,
}


def encode_value(v: Value) -> bytes:
    out = bytearray()
    _write(out, v)
    return bytes(out)


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
        raise _bad(f"{section.code.name.lower()} list of {len(items)} fields")
    out: dict[str, object] = {}
    for (name, kind), item in zip(names, items, strict=False):
        if item.type is AmqpType.NULL:
            continue
        if kind is None:
            if item.type not in _ID_TYPES:
                raise _bad(f"{name} of type {item.type.value}")
            out[name] = item
            continue
        if item.type is not kind and not (kind is AmqpType.SYMBOL and item.type is AmqpType.STRING):
            raise _bad(f"{name} of type {item.type.value}, expected {kind.value}")
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
                raise _bad(f"application-properties key of type {key.type.value}")
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
    reader = _Reader(data)
    end = len(reader.data)
    pos = 0
    sections: list[Section] = []
    last: SectionCode | None = None
    while pos < end:
        start = pos
        pos = reader.take(pos, 1, end)
        if reader.data[start] != 0x00:
            raise _bad(f"section at {start} is not a described type")
        descriptor, pos = reader.value(pos, end)
        if (
            descriptor.type is not AmqpType.ULONG
            or descriptor.value not in SectionCode._value2member_map_
        ):
            raise _bad(f"unknown section descriptor {descriptor.value!r}")
        code = SectionCode(descriptor.value)  # type: ignore[arg-type]
        if last is not None and (code < last or (code == last and code not in _BODY[:2])):
            raise _bad(f"section {code.name} after {last.name}")
        if last in _BODY and code in _BODY and code != last:
            raise _bad(f"body section {code.name} after {last.name}")
        value, pos = reader.value(pos, end)
        expected = _SECTION_TYPE.get(code)
        if expected is not None and value.type is not expected:
            raise _bad(f"{code.name} section holds a {value.type.value}")
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
                raise _bad(f"annotation key of type {key.type.value}")


def encode_message(message: AmqpMessage) -> bytes:
    out = bytearray()
    for s in message.sections:
        out.append(0x00)
        if s.descriptor_code == 0x80:
            out += b"\x80" + int(s.code).to_bytes(8, "big")
        else:
            out += bytes((0x53, s.code))
        _write(out, s.value)
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
