"""Big-endian primitives of RabbitMQ Stream (rabbitmq-stream.md §2): a bounds-checked reader over
one complete frame body, and the matching encoders.

A body is only decoded once its whole frame is buffered, so running out of bytes here is never
"need more data": it is a malformed frame. The server answers a frame it cannot parse with
``Close(0x0d "unknown frame")`` (§10), so that is the hint every decoding error carries.
"""

from __future__ import annotations

import struct
from typing import NoReturn

from protocols._wire import BodyReader, LocalProtocolError, RemoteProtocolError

from .codes import ResponseCode

__all__ = ["Reader", "malformed", "pack", "pack_bytes", "pack_string"]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def malformed(message: str, code: ResponseCode = ResponseCode.UNKNOWN_FRAME) -> NoReturn:
    raise RemoteProtocolError(message, hint=code)


class Reader(BodyReader):
    """Reads one body front to back (big-endian); a read past the end is "unknown frame"."""

    __slots__ = ()
    HINT = ResponseCode.UNKNOWN_FRAME
    UNIT = "frame"

    def unpack(self, fmt: struct.Struct, what: str) -> int:
        value: int = fmt.unpack(self.take(fmt.size, what))[0]
        return value

    def count(self, what: str, min_item_size: int) -> int:
        """An int32 array count, refused when its smallest items could not fit what is left
        (so no loop or list is sized by a hostile count)."""
        n = self.unpack(_I32, f"{what} count")
        if n < 0 or n * min_item_size > self.remaining:
            malformed(f"{what} count {n} does not fit the {self.remaining} bytes left")
        return n

    def string(self, what: str, *, nullable: bool = False) -> str | None:
        size = self.unpack(_I16, f"{what} length")
        if size == -1 and nullable:
            return None
        if size < 0:
            malformed(f"the {what} has length {size}")
        try:
            return self.take(size, what).decode("utf-8")
        except UnicodeDecodeError:
            malformed(f"the {what} is not UTF-8")

    def bytes(self, what: str, *, length: struct.Struct = _I32) -> bytes | None:
        size = self.unpack(length, f"{what} length")
        if size == -1:
            return None
        if size < 0:
            malformed(f"the {what} has length {size}")
        return self.take(size, what)


def pack(fmt: struct.Struct, value: int, what: str) -> bytes:
    try:
        return fmt.pack(value)
    except struct.error as exc:
        raise LocalProtocolError(f"{what} {value!r} does not fit: {exc}") from exc


def pack_string(text: str | None, what: str) -> bytes:
    if text is None:
        return _I16.pack(-1)
    try:
        raw = text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise LocalProtocolError(f"the {what} has no UTF-8 form: {exc}") from exc
    return pack(_I16, len(raw), f"{what} length") + raw


def pack_bytes(raw: bytes | None, what: str, *, length: struct.Struct = _I32) -> bytes:
    if raw is None:
        return length.pack(-1)
    return pack(length, len(raw), f"{what} length") + raw
