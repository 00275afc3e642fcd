"""Little-endian primitives of Iggy payloads (iggy.md §2): a bounds-checked reader over one
complete body, and the matching encoders.

Bodies are only decoded once their frame is complete, so running out of bytes here is never
"need more data": it is a malformed body, reported as RemoteProtocolError with the status a
real server would answer (``INVALID_FORMAT`` unless the caller says otherwise).
"""

from __future__ import annotations

import struct
from typing import NoReturn

from protocols._wire import (
    U8,
    U16_LE,
    U32_LE,
    U64_LE,
    BodyReader,
    LocalProtocolError,
    RemoteProtocolError,
)

from .status import Status

__all__ = [
    "F32_LE",
    "U32_MAX",
    "U64_MAX",
    "Reader",
    "malformed",
    "pack_bytes32",
    "pack_f32",
    "pack_name",
    "pack_str32",
    "pack_u8",
    "pack_u16",
    "pack_u32",
    "pack_u64",
    "pack_u128",
    "utf8",
]

F32_LE = struct.Struct("<f")
U32_MAX = 0xFFFF_FFFF
U64_MAX = 0xFFFF_FFFF_FFFF_FFFF
_U128_MAX = (1 << 128) - 1


def malformed(message: str, status: Status = Status.INVALID_FORMAT) -> NoReturn:
    raise RemoteProtocolError(message, hint=status)


class Reader(BodyReader):
    """Reads one body front to back (little-endian); a read past the end is InvalidFormat."""

    __slots__ = ()
    HINT = Status.INVALID_FORMAT

    def sub(self, n: int, what: str) -> Reader:
        """A reader over the next ``n`` bytes, which this one skips."""
        start = self.pos
        self.take(n, what)
        return Reader(self.data, start, start + n)

    def u8(self, what: str = "u8") -> int:
        return self.take(1, what)[0]

    def u16(self, what: str = "u16") -> int:
        return int(U16_LE.unpack(self.take(2, what))[0])

    def u32(self, what: str = "u32") -> int:
        return int(U32_LE.unpack(self.take(4, what))[0])

    def u64(self, what: str = "u64") -> int:
        return int(U64_LE.unpack(self.take(8, what))[0])

    def u128(self, what: str = "u128") -> int:
        return int.from_bytes(self.take(16, what), "little")

    def f32(self, what: str = "f32") -> float:
        return float(F32_LE.unpack(self.take(4, what))[0])

    def flag(self, what: str) -> bool:
        value = self.u8(what)
        if value > 1:
            malformed(f"{what} is {value}, not 0 or 1")
        return value == 1

    def name(self, what: str = "name") -> str:
        """``[len u8][utf8]`` with a length of 1..255 (§2)."""
        size = self.u8(f"{what} length")
        if size == 0:
            malformed(f"the {what} is empty")
        return utf8(self.take(size, what), what)

    def str32(self, what: str) -> str:
        return utf8(self.bytes32(what), what)

    def bytes32(self, what: str) -> bytes:
        return self.take(self.u32(f"{what} length"), what)


def utf8(raw: bytes, what: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        malformed(f"the {what} is not UTF-8")


# --- encoding ---------------------------------------------------------------------------------


def _check(value: int, maximum: int, what: str) -> None:
    if not 0 <= value <= maximum:
        raise LocalProtocolError(f"{what} {value} does not fit 0..{maximum}")


def pack_u8(value: int, what: str = "u8") -> bytes:
    _check(value, 0xFF, what)
    return U8.pack(value)


def pack_u16(value: int, what: str = "u16") -> bytes:
    _check(value, 0xFFFF, what)
    return U16_LE.pack(value)


def pack_u32(value: int, what: str = "u32") -> bytes:
    _check(value, U32_MAX, what)
    return U32_LE.pack(value)


def pack_u64(value: int, what: str = "u64") -> bytes:
    _check(value, U64_MAX, what)
    return U64_LE.pack(value)


def pack_u128(value: int, what: str = "u128") -> bytes:
    _check(value, _U128_MAX, what)
    return value.to_bytes(16, "little")


def pack_f32(value: float) -> bytes:
    try:
        return F32_LE.pack(value)
    except OverflowError as exc:
        raise LocalProtocolError(f"{value} does not fit an f32") from exc


def _encode_text(text: str, what: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise LocalProtocolError(f"the {what} has no UTF-8 form: {exc}") from exc


def pack_name(text: str, what: str = "name") -> bytes:
    raw = _encode_text(text, what)
    if not 1 <= len(raw) <= 255:
        raise LocalProtocolError(f"the {what} is {len(raw)} bytes; Iggy names are 1..255")
    return U8.pack(len(raw)) + raw


def pack_bytes32(raw: bytes, what: str = "bytes") -> bytes:
    return pack_u32(len(raw), f"{what} length") + raw


def pack_str32(text: str, what: str = "string") -> bytes:
    return pack_bytes32(_encode_text(text, what), what)
