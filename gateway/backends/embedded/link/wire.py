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

# What a worker may ask for: the embedded backend's commands and the two that are not commands.
# The one table: the owner serves these, and the workers' backend forwards each of them.
METHODS: Final = frozenset({
    "ping", "record_listeners",
    "create_stream", "delete_stream", "update_stream", "purge_stream", "list_streams",
    "create_topic", "delete_topic", "list_topics", "describe_topic", "update_topic",
    "create_partitions", "delete_partitions", "purge_topic", "delete_records",
    "append", "read", "await_data", "list_offsets",
    "commit_offset", "fetch_offset", "delete_offset", "stats",
    "init_transaction", "add_to_transaction", "commit_transaction_offsets", "end_transaction",
})  # fmt: skip

MAX_FRAME_BYTES: Final = 1 << 30  # far above any answer (a Fetch is capped at its byte budget)
_LENGTH = struct.Struct(">I")


class LinkError(Exception):
    """The other end sent what this end cannot read: the link is closed."""


def _memoryview(view: memoryview) -> tuple[type[bytes], tuple[Any]]:
    if view.contiguous:  # a stored batch read as a view: out of band, not copied into the pickle
        return bytes, (pickle.PickleBuffer(view),)
    return bytes, (view.tobytes(),)


_TABLE = copyreg.dispatch_table.copy()
_TABLE[memoryview] = _memoryview


def encode(frame: tuple[Any, ...]) -> list[memoryview]:
    """The frame in pieces to write in order: its head (the size of the rest, the pickle's, the
    pickle, the out-of-band buffers' count and sizes) as a view of the buffer it was pickled
    into (``getvalue`` would copy it, and ``pickle.dumps`` grows its buffer by copies), then
    the out-of-band buffers (memoryviews: the stored batches of a read) themselves."""
    out = io.BytesIO()
    out.write(bytes(8))
    buffers: list[pickle.PickleBuffer] = []
    pickler = pickle.Pickler(out, protocol=5, buffer_callback=buffers.append)
    pickler.dispatch_table = _TABLE
    pickler.dump(frame)
    pickled = out.tell() - 8
    views = [b.raw() for b in buffers]
    out.write(_LENGTH.pack(len(views)))
    for view in views:
        out.write(_LENGTH.pack(len(view)))
    head = out.getbuffer()
    _LENGTH.pack_into(head, 0, len(head) - 4 + sum(len(v) for v in views))
    _LENGTH.pack_into(head, 4, pickled)
    return [head, *views]


def _decode(frame: memoryview) -> Any:
    (pickled,) = _LENGTH.unpack_from(frame, 0)
    at = 4 + pickled
    (count,) = _LENGTH.unpack_from(frame, at)
    sizes = struct.unpack_from(f">{count}I", frame, at + 4)
    at += 4 + 4 * count
    buffers = []
    for size in sizes:
        buffers.append(frame[at : at + size])
        at += size
    if at != len(frame):
        raise LinkError(f"a frame of {len(frame)} bytes holding {at}")
    return pickle.loads(frame[4 : 4 + pickled], buffers=buffers)


def _shape(frame: tuple[Any, ...]) -> str:
    """What a frame holds, said without its contents (which may be a megabyte of data)."""
    return "(" + ", ".join(type(item).__name__ for item in frame[:5]) + ")"


def from_worker(frame: tuple[Any, ...]) -> tuple[int, int, str, Any]:
    """``(kind, id, method, argument)`` of a frame a worker sent (``method`` and ``argument``
    are ``""`` and None for a CANCEL); a frame of any other shape is a LinkError."""
    match frame:
        case (1, int() as rid, str() as method, argument) if method in METHODS:
            return REQUEST, rid, method, argument
        case (2, int() as rid):
            return CANCEL, rid, "", None
    method = frame[2] if len(frame) > 2 and isinstance(frame[2], str) else ""
    raise LinkError(f"an unknown request {_shape(frame)} {method[:64]!r}")


def from_owner(frame: tuple[Any, ...]) -> tuple[int, int, Any]:
    """``(kind, id, value)`` of a frame the owner sent (a result or an error); a frame of any
    other shape is a LinkError."""
    match frame:
        case (3, int() as rid, value):
            return RESULT, rid, value
        case (4, int() as rid, error):
            return ERROR, rid, error
    raise LinkError(f"an unknown answer {_shape(frame)}")


class Reader:
    """Frames out of the bytes received so far."""

    def __init__(self, max_frame_bytes: int = MAX_FRAME_BYTES) -> None:
        self._buffer = bytearray()
        self._max = max_frame_bytes

    def feed(self, data: bytes | bytearray | memoryview) -> list[tuple[Any, ...]]:
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
                    frame = _decode(piece)  # out-of-band buffers come back as bytes (copies)
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
    "METHODS",
    "REQUEST",
    "RESULT",
    "LinkError",
    "Reader",
    "encode",
    "from_owner",
    "from_worker",
]
