"""The frames between the store owner of ``--workers`` and its workers: sans-I/O.

A frame is a u32 big-endian length and a pickle (protocol 5) of a tuple:

- worker -> owner: ``(REQUEST, id, method, command)`` and ``(CANCEL, id)``;
- owner -> worker: ``(RESULT, id, result)`` and ``(ERROR, id, exception)``.

Pickle, because both ends are this code base at one version, started by one supervisor, and
the canonical commands and results (frozen dataclasses, NamedTuples, WireFormats equal by name)
pickle as they are. The socket is a unix socket in the supervisor's private (0700) directory:
only the user running streamgate reaches it, and that user can already read the data directory.
A memoryview (a stored batch read as a view) goes as bytes.
"""

from __future__ import annotations

import copyreg
import io
import pickle
import struct
from typing import Any, Final

REQUEST: Final = 1
CANCEL: Final = 2
RESULT: Final = 3
ERROR: Final = 4

MAX_FRAME_BYTES: Final = 1 << 30  # far above any answer (a Fetch is capped at its byte budget)
_LENGTH = struct.Struct(">I")


class LinkError(Exception):
    """The other end sent what this end cannot read: the link is closed."""


def _memoryview(view: memoryview) -> tuple[type[bytes], tuple[bytes]]:
    return bytes, (view.tobytes(),)


_TABLE = copyreg.dispatch_table.copy()
_TABLE[memoryview] = _memoryview


def encode(frame: tuple[Any, ...]) -> bytes:
    out = io.BytesIO()
    out.write(b"\0\0\0\0")
    pickler = pickle.Pickler(out, protocol=5)
    pickler.dispatch_table = _TABLE
    pickler.dump(frame)
    data = out.getbuffer()
    _LENGTH.pack_into(data, 0, len(data) - 4)
    del data
    return out.getvalue()


class Reader:
    """Frames out of the bytes received so far."""

    def __init__(self, max_frame_bytes: int = MAX_FRAME_BYTES) -> None:
        self._buffer = bytearray()
        self._max = max_frame_bytes

    def feed(self, data: bytes) -> list[tuple[Any, ...]]:
        self._buffer += data
        frames: list[tuple[Any, ...]] = []
        buf = self._buffer
        at = 0
        while len(buf) - at >= 4:
            (size,) = _LENGTH.unpack_from(buf, at)
            if size > self._max:
                raise LinkError(f"a frame of {size} bytes (at most {self._max})")
            if len(buf) - at - 4 < size:
                break
            try:
                with memoryview(buf) as view, view[at + 4 : at + 4 + size] as piece:
                    frame = pickle.loads(piece)
            except Exception as exc:
                raise LinkError(f"an unreadable frame: {exc}") from None
            if not isinstance(frame, tuple) or not frame:
                raise LinkError("a frame that is not a tuple")
            frames.append(frame)
            at += 4 + size
        if at:
            del buf[:at]
        return frames


__all__ = [
    "CANCEL",
    "ERROR",
    "MAX_FRAME_BYTES",
    "REQUEST",
    "RESULT",
    "LinkError",
    "Reader",
    "encode",
]
