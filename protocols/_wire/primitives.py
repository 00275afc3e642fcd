"""Integer encodings shared by the codecs: fixed-width big/little endian and varints."""

from __future__ import annotations

import struct

from .errors import RemoteProtocolError

__all__ = [
    "I16_BE",
    "I32_BE",
    "I32_LE",
    "I64_BE",
    "I64_LE",
    "U8",
    "U16_BE",
    "U16_LE",
    "U32_BE",
    "U32_LE",
    "U64_BE",
    "U64_LE",
    "decode_uvarint",
    "decode_uvarlong",
    "decode_varint",
    "decode_varlong",
    "encode_uvarint",
    "encode_varint",
]

U8 = struct.Struct(">B")
U16_BE = struct.Struct(">H")
U32_BE = struct.Struct(">I")
U64_BE = struct.Struct(">Q")
I16_BE = struct.Struct(">h")
I32_BE = struct.Struct(">i")
I64_BE = struct.Struct(">q")
U16_LE = struct.Struct("<H")
U32_LE = struct.Struct("<I")
U64_LE = struct.Struct("<Q")
I32_LE = struct.Struct("<i")
I64_LE = struct.Struct("<q")


def encode_uvarint(value: int) -> bytes:
    """Unsigned LEB128 (protobuf / Kafka unsigned varint)."""
    if value < 0:
        raise ValueError("uvarint must be >= 0")
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_varint(value: int) -> bytes:
    """Zig-zag signed varint (Kafka record fields), 64-bit range."""
    return encode_uvarint((value << 1) ^ (value >> 63))


def _decode_u(data: bytes | bytearray | memoryview, pos: int, max_bytes: int) -> tuple[int, int]:
    result = 0
    shift = 0
    end = len(data)
    for i in range(max_bytes):
        if pos + i >= end:
            raise RemoteProtocolError("truncated varint")
        b = data[pos + i]
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos + i + 1
        shift += 7
    raise RemoteProtocolError(f"varint longer than {max_bytes} bytes")


def decode_uvarint(data: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int]:
    """Unsigned 32-bit varint at ``pos`` -> (value, next position)."""
    return _decode_u(data, pos, 5)


def decode_varint(data: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int]:
    """Zig-zag signed 32-bit varint -> (value, next position)."""
    raw, pos = _decode_u(data, pos, 5)
    return (raw >> 1) ^ -(raw & 1), pos


def decode_uvarlong(data: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int]:
    return _decode_u(data, pos, 10)


def decode_varlong(data: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int]:
    raw, pos = _decode_u(data, pos, 10)
    return (raw >> 1) ^ -(raw & 1), pos
