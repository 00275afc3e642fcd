"""AMQP 1.0 typed values (rabbitmq-stream.md §8): every primitive and compound type, decoded
and encoded. A decoded ``Value`` remembers its constructor byte so it re-encodes to the same
bytes; a value built without one gets the shortest form (what rstream writes).
"""

from __future__ import annotations

import enum
import struct
import uuid
from dataclasses import dataclass, field

from protocols._wire import RemoteProtocolError

__all__ = [
    "MAX_DEPTH",
    "NULL",
    "AmqpType",
    "Array",
    "Described",
    "Value",
    "ValueReader",
    "bad_value",
    "decode_value",
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

FIXED: dict[int, tuple[AmqpType, int]] = {
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
INT_FORMATS: dict[int, struct.Struct] = {
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
VARIABLE: dict[int, tuple[AmqpType, int]] = {
    0xA0: (AmqpType.BINARY, 1),
    0xB0: (AmqpType.BINARY, 4),
    0xA1: (AmqpType.STRING, 1),
    0xB1: (AmqpType.STRING, 4),
    0xA3: (AmqpType.SYMBOL, 1),
    0xB3: (AmqpType.SYMBOL, 4),
}
# Compound: (type, bytes of the size and of the count fields).
COMPOUND: dict[int, tuple[AmqpType, int]] = {
    0xC0: (AmqpType.LIST, 1),
    0xD0: (AmqpType.LIST, 4),
    0xC1: (AmqpType.MAP, 1),
    0xD1: (AmqpType.MAP, 4),
    0xE0: (AmqpType.ARRAY, 1),
    0xF0: (AmqpType.ARRAY, 4),
}
TYPE_OF: dict[int, AmqpType] = {
    **{c: t for c, (t, _) in FIXED.items()},
    **{c: t for c, (t, _) in VARIABLE.items()},
    **{c: t for c, (t, _) in COMPOUND.items()},
    0x00: AmqpType.DESCRIBED,
}
SIZE = {1: struct.Struct(">B"), 4: struct.Struct(">I")}
U8_MAX, U32_MAX = 0xFF, 0xFFFF_FFFF
# An array of zero-width elements (nulls, true, uint 0) costs no bytes per element; bound the
# count so that a 10-byte array cannot make the decoder loop 2**32 times.
_MAX_ZERO_WIDTH_ITEMS = 65536


def bad_value(message: str) -> RemoteProtocolError:
    return RemoteProtocolError(f"AMQP 1.0: {message}")


# --- decoding ---------------------------------------------------------------------------------


class ValueReader:
    __slots__ = ("data", "depth")

    def __init__(self, data: bytes | bytearray | memoryview) -> None:
        self.data = memoryview(data)
        self.depth = 0

    def take(self, pos: int, n: int, end: int) -> int:
        if n > end - pos:
            raise bad_value(f"{n} bytes needed at {pos}, {end - pos} left")
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
            raise bad_value(f"nesting deeper than {MAX_DEPTH}")
        descriptor, pos = self.value(pos, end)
        inner, pos = self.value(pos, end)
        self.depth -= 1
        return Value(AmqpType.DESCRIBED, Described(descriptor, inner), 0x00), pos

    def body(self, code: int, pos: int, end: int) -> tuple[Value, int]:
        """The value of constructor ``code`` whose bytes start at ``pos``."""
        data = self.data
        if code in FIXED:
            kind, width = FIXED[code]
            nxt = self.take(pos, width, end)
            raw = data[pos:nxt]
            if kind is AmqpType.BOOLEAN:
                if code == 0x56:
                    if raw[0] > 1:
                        raise bad_value(f"boolean octet {raw[0]}")
                    return Value(kind, raw[0] == 1, code), nxt
                return Value(kind, code == 0x41, code), nxt
            if code in INT_FORMATS:
                return Value(kind, INT_FORMATS[code].unpack(raw)[0], code), nxt
            if width == 0:
                zero: object = {AmqpType.NULL: None, AmqpType.LIST: ()}.get(kind, 0)
                return Value(kind, zero, code), nxt
            if kind is AmqpType.UUID:
                return Value(kind, uuid.UUID(bytes=bytes(raw)), code), nxt
            if kind is AmqpType.CHAR:
                point = int.from_bytes(raw, "big")
                if point > 0x10FFFF:
                    raise bad_value(f"char U+{point:X}")
                return Value(kind, chr(point), code), nxt
            return Value(kind, bytes(raw), code), nxt  # decimals
        if code in VARIABLE:
            kind, prefix = VARIABLE[code]
            pos_len = self.take(pos, prefix, end)
            (size,) = SIZE[prefix].unpack(data[pos:pos_len])
            nxt = self.take(pos_len, size, end)
            raw_bytes = bytes(data[pos_len:nxt])
            if kind is AmqpType.BINARY:
                return Value(kind, raw_bytes, code), nxt
            try:
                text = raw_bytes.decode("utf-8" if kind is AmqpType.STRING else "ascii")
            except UnicodeDecodeError as exc:
                raise bad_value(f"{kind.value}: {exc.reason}") from None
            return Value(kind, text, code), nxt
        if code in COMPOUND:
            return self.compound(code, pos, end)
        raise bad_value(f"unknown constructor 0x{code:02x}")

    def compound(self, code: int, pos: int, end: int) -> tuple[Value, int]:
        kind, width = COMPOUND[code]
        fmt = SIZE[width]
        pos_size = self.take(pos, width, end)
        (size,) = fmt.unpack(self.data[pos:pos_size])
        stop = self.take(pos_size, size, end)
        pos = self.take(pos_size, width, stop)
        (count,) = fmt.unpack(self.data[pos_size:pos])
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise bad_value(f"nesting deeper than {MAX_DEPTH}")
        if kind is AmqpType.ARRAY:
            out: Value = Value(kind, self.array(count, pos, stop), code)
        else:
            if count > stop - pos:  # every element has a constructor byte at least
                raise bad_value(f"{kind.value} of {count} elements in {stop - pos} bytes")
            items: list[Value] = []
            for _ in range(count):
                item, pos = self.value(pos, stop)
                items.append(item)
            if kind is AmqpType.MAP:
                if count % 2:
                    raise bad_value(f"map with an odd element count {count}")
                pairs = tuple(zip(items[::2], items[1::2], strict=True))
                out = Value(kind, pairs, code)
            else:
                out = Value(kind, tuple(items), code)
            if pos != stop:
                raise bad_value(f"{kind.value} leaves {stop - pos} of its bytes unread")
        self.depth -= 1
        return out, stop

    def array(self, count: int, pos: int, stop: int) -> Array:
        nxt = self.take(pos, 1, stop)
        element_code = self.data[pos]
        if element_code == 0x00 or element_code not in TYPE_OF:
            raise bad_value(f"array element constructor 0x{element_code:02x} not supported")
        if count > max(_MAX_ZERO_WIDTH_ITEMS, stop - nxt):
            raise bad_value(f"array of {count} elements in {stop - nxt} bytes")
        items: list[Value] = []
        pos = nxt
        for _ in range(count):
            item, pos = self.body(element_code, pos, stop)
            items.append(item)
        if pos != stop:
            raise bad_value(f"array leaves {stop - pos} of its bytes unread")
        return Array(TYPE_OF[element_code], tuple(items), element_code)


def decode_value(data: bytes | bytearray | memoryview) -> Value:
    """Exactly one encoded value (trailing bytes are an error)."""
    reader = ValueReader(data)
    value, pos = reader.value(0, len(reader.data))
    if pos != len(reader.data):
        raise bad_value(f"{len(reader.data) - pos} bytes after the value")
    return value
