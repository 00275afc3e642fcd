"""Typed key/value pairs: message user headers and the VSR options blocks (iggy.md §2 "TLV").

Both use ``[key_kind u8][key_len u32][key][val_kind u8][val_len u32][val]`` repeated; era A
user headers were ``[key_len u32][key][kind u8][val_len u32][val]`` with string keys (§7).
Headers are kept as an ordered tuple of raw typed values: nothing is lost, duplicates included.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

from protocols._wire import LocalProtocolError

from .codes import Era
from .wire import Reader, malformed, pack_bytes32, pack_u8, pack_u32

__all__ = [
    "Header",
    "HeaderKind",
    "HeaderValue",
    "decode_headers",
    "encode_headers",
]


class HeaderKind(IntEnum):
    RAW = 1
    STRING = 2
    BOOL = 3
    INT8 = 4
    INT16 = 5
    INT32 = 6
    INT64 = 7
    INT128 = 8
    UINT8 = 9
    UINT16 = 10
    UINT32 = 11
    UINT64 = 12
    UINT128 = 13
    FLOAT32 = 14
    FLOAT64 = 15


# Fixed-size kinds: (struct format or byte count, signed) for the typed helpers below.
_INTS: dict[HeaderKind, tuple[int, bool]] = {
    HeaderKind.INT8: (1, True),
    HeaderKind.INT16: (2, True),
    HeaderKind.INT32: (4, True),
    HeaderKind.INT64: (8, True),
    HeaderKind.INT128: (16, True),
    HeaderKind.UINT8: (1, False),
    HeaderKind.UINT16: (2, False),
    HeaderKind.UINT32: (4, False),
    HeaderKind.UINT64: (8, False),
    HeaderKind.UINT128: (16, False),
}
_FLOATS = {HeaderKind.FLOAT32: struct.Struct("<f"), HeaderKind.FLOAT64: struct.Struct("<d")}


@dataclass(frozen=True, slots=True, kw_only=True)
class HeaderValue:
    """One typed value as it travels: its kind and 1..255 bytes (little-endian numbers)."""

    kind: HeaderKind
    value: bytes

    @classmethod
    def string(cls, text: str) -> HeaderValue:
        return cls(kind=HeaderKind.STRING, value=text.encode())

    @classmethod
    def raw(cls, data: bytes) -> HeaderValue:
        return cls(kind=HeaderKind.RAW, value=data)

    @classmethod
    def boolean(cls, flag: bool) -> HeaderValue:
        return cls(kind=HeaderKind.BOOL, value=b"\x01" if flag else b"\x00")

    @classmethod
    def integer(cls, kind: HeaderKind, number: int) -> HeaderValue:
        size, signed = _INTS[kind]
        try:
            return cls(kind=kind, value=number.to_bytes(size, "little", signed=signed))
        except OverflowError as exc:
            raise LocalProtocolError(f"{number} does not fit {kind.name}") from exc

    @classmethod
    def floating(cls, kind: HeaderKind, number: float) -> HeaderValue:
        return cls(kind=kind, value=_FLOATS[kind].pack(number))

    def to_python(self) -> bytes | str | bool | int | float:
        """The value as Python sees it; ValueError if its size does not fit its kind."""
        if self.kind is HeaderKind.RAW:
            return self.value
        if self.kind is HeaderKind.STRING:
            return self.value.decode()
        if self.kind is HeaderKind.BOOL:
            if len(self.value) != 1:
                raise ValueError("a Bool header value is one byte")
            return self.value != b"\x00"
        if self.kind in _FLOATS:
            fmt = _FLOATS[self.kind]
            if len(self.value) != fmt.size:
                raise ValueError(f"a {self.kind.name} header value is {fmt.size} bytes")
            return float(fmt.unpack(self.value)[0])
        size, signed = _INTS[self.kind]
        if len(self.value) != size:
            raise ValueError(f"a {self.kind.name} header value is {size} bytes")
        return int.from_bytes(self.value, "little", signed=signed)


@dataclass(frozen=True, slots=True, kw_only=True)
class Header:
    key: HeaderValue
    value: HeaderValue


def _pack_value(value: HeaderValue, what: str) -> bytes:
    if not 1 <= len(value.value) <= 255:
        raise LocalProtocolError(f"{what} of {len(value.value)} bytes; 1..255 fit (§2)")
    return pack_u8(value.kind, f"{what} kind") + pack_bytes32(value.value, what)


def _read_value(reader: Reader, what: str) -> HeaderValue:
    kind = reader.u8(f"{what} kind")
    if not HeaderKind.RAW <= kind <= HeaderKind.FLOAT64:
        malformed(f"{what} kind {kind} is not 1..15")
    size = reader.u32(f"{what} length")
    if not 1 <= size <= 255:
        malformed(f"{what} of {size} bytes; 1..255 fit")
    return HeaderValue(kind=HeaderKind(kind), value=reader.take(size, what))


def encode_headers(headers: tuple[Header, ...], era: Era = Era.C) -> bytes:
    out = []
    for header in headers:
        if era is Era.A:
            # Era A keys are bare strings; whatever the kind, its bytes are the key.
            if not 1 <= len(header.key.value) <= 255:
                raise LocalProtocolError(f"header key of {len(header.key.value)} bytes")
            out.append(pack_u32(len(header.key.value)) + header.key.value)
        else:
            out.append(_pack_value(header.key, "header key"))
        out.append(_pack_value(header.value, "header value"))
    return b"".join(out)


def decode_headers(reader: Reader, era: Era = Era.C) -> tuple[Header, ...]:
    """Every pair up to the reader's end."""
    headers = []
    while not reader.at_end():
        if era is Era.A:
            size = reader.u32("header key length")
            if not 1 <= size <= 255:
                malformed(f"header key of {size} bytes; 1..255 fit")
            key = HeaderValue(kind=HeaderKind.STRING, value=reader.take(size, "header key"))
        else:
            key = _read_value(reader, "header key")
        headers.append(Header(key=key, value=_read_value(reader, "header value")))
    return tuple(headers)
