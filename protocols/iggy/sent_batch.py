"""A producer's era C batch checked without building one object per message (iggy.md §6.1).

A server stores a sent batch as it came (256-byte header and frames) and serves it restamped,
so on the send path nothing needs a ``Message``: ``scan_sent_batch`` checks what the real
server checks at admission (lengths, reserved fields, user headers, both checksums: 4027 /
4039) and keeps what a server needs about the batch (count, origin timestamp range, whether a
payload is empty, whether the offset deltas are 0, 1, 2, ...). Frames of one size (most
producers') are checked a field at a time over all of them (``columns``), others frame by
frame, which is also what words the error when something is wrong. The
messages themselves are a ``SentMessages`` sequence that decodes the frames only when read: a
translation to another protocol, or a batch a store cannot keep as it is.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from typing import overload

from xxhash import xxh3_64_intdigest

from protocols._wire import RemoteProtocolError

from .batch import BATCH_HEADER_SIZE, FRAME_HEADER_SIZE, decode_batch_messages
from .codes import Era
from .columns import uniform_frames
from .frames_messages import Message
from .headers import decode_headers
from .status import Status
from .wire import Reader, malformed

__all__ = ["SentMessages", "empty_payload", "origin_range", "scan_sent_batch"]

# partition id, base offset, base timestamp, origin timestamp, length, checksum, count
_HEAD = struct.Struct("<QQQQQQI")
_FRAME = struct.Struct("<QQQIIIIQ")  # checksum, id (two halves), deltas, lengths, reserved
_RESERVED = bytes(BATCH_HEADER_SIZE - 52)


class SentMessages(Sequence[Message]):
    """The messages of a checked sent batch, decoded on first use; ``len``, the origin
    timestamp range and ``empty_payload`` without decoding. Compares equal to a tuple of the
    same messages."""

    __slots__ = ("_count", "_data", "_decoded", "empty_payload", "max_origin", "min_origin")

    def __init__(
        self, data: bytes, count: int, *, min_origin: int, max_origin: int, empty_payload: bool
    ) -> None:
        self._data = data  # the batch, header included
        self._decoded: tuple[Message, ...] | None = None
        self._count = count
        self.min_origin = min_origin
        self.max_origin = max_origin
        self.empty_payload = empty_payload

    @property
    def batch(self) -> bytes:
        """The batch as sent: 256-byte header and frames."""
        return self._data

    def _messages(self) -> tuple[Message, ...]:
        if self._decoded is None:
            self._decoded = tuple(decode_batch_messages(self._data))
        return self._decoded

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> Message: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Message]: ...
    def __getitem__(self, index: int | slice) -> Message | Sequence[Message]:
        return self._messages()[index]

    def __iter__(self) -> Iterator[Message]:
        return iter(self._messages())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, SentMessages | tuple | list):
            return self._messages() == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._messages())

    def __repr__(self) -> str:
        return repr(self._messages())


def empty_payload(messages: Sequence[Message]) -> bool:
    """Whether a message has an empty payload (Iggy refuses it: 4024)."""
    if isinstance(messages, SentMessages):
        return messages.empty_payload
    return any(not m.payload for m in messages)


def origin_range(messages: Sequence[Message]) -> tuple[int, int]:
    """The smallest and largest origin timestamp (µs) of non-empty ``messages``."""
    if isinstance(messages, SentMessages):
        return messages.min_origin, messages.max_origin
    stamps = [m.origin_timestamp for m in messages]
    return min(stamps), max(stamps)


def scan_sent_batch(reader: Reader) -> tuple[SentMessages, bool]:
    """The batch at the reader, checked as the server admits it; the reader moves past it.
    Returns its messages and whether it can be stored as it is (base offset 0 and offset
    deltas 0, 1, 2, ...)."""
    data, start = reader.data, reader.pos
    if start + BATCH_HEADER_SIZE > reader.end:
        reader.take(BATCH_HEADER_SIZE, "batch header")  # the usual "runs past" error
    _, base_offset, _, origin, length, batch_checksum, count = _HEAD.unpack_from(data, start)
    if data[start + 52 : start + BATCH_HEADER_SIZE] != _RESERVED:
        malformed("the batch header's reserved bytes are not zero")
    if length < BATCH_HEADER_SIZE:
        malformed(f"batch length {length} is below the 256-byte header")
    end = start + length
    if end > reader.end:
        reader.take(length, "batch")  # the usual "runs past" error
    frames_at = start + BATCH_HEADER_SIZE
    # Frames of one size are checked column by column; anything else (or anything wrong, so
    # that the error names the first bad message) frame by frame.
    frames = _Scan.of_table(data, frames_at, end, count)
    if frames is None:
        frames = _Scan.of_frames(data, frames_at, end, count)
    view = memoryview(data)
    head = view[start : start + 40]
    checked = b"".join((head, view[start + 48 : start + 52], frames.checksums))
    if xxh3_64_intdigest(checked) != batch_checksum:
        malformed("the batch checksum is wrong", Status.INVALID_BATCH_CHECKSUM)
    reader.pos = end
    batch = data[start:end]  # the body itself when it is only the batch: no copy
    messages = SentMessages(
        batch if type(batch) is bytes else bytes(batch),
        count,
        min_origin=origin + frames.low,
        max_origin=origin + frames.high,
        empty_payload=frames.empty,
    )
    return messages, base_offset == 0 and frames.in_order


class _Scan:
    """What the scan of a batch's frames found."""

    __slots__ = ("checksums", "empty", "high", "in_order", "low")

    def __init__(self, checksums: bytes, low: int, high: int, empty: bool, in_order: bool) -> None:
        self.checksums = checksums  # the frames' checksum fields, one after the other
        self.low, self.high = low, high  # the smallest and largest timestamp delta
        self.empty = empty  # a payload is empty
        self.in_order = in_order  # the offset deltas are 0, 1, 2, ...

    @classmethod
    def of_table(cls, data: bytes, start: int, end: int, count: int) -> _Scan | None:
        """Frames of one size, each field checked over all of them at once; None when they are
        not of one size or something is wrong (the frame-by-frame scan then says what)."""
        if not isinstance(data, bytes):  # (strided slices of a view have no count())
            return None
        frames = uniform_frames(data, start, end, count)
        checksums = None if frames is None else frames.verified_checksums()
        if frames is None or checksums is None:
            return None
        for block in frames.user_headers():
            try:
                decode_headers(Reader(block), Era.C)  # checked, not kept
            except RemoteProtocolError:
                return None
        deltas = frames.timestamp_deltas()
        return cls(
            checksums,
            min(deltas),
            max(deltas),
            frames.payload_length == 0,
            frames.offset_deltas_are_indexes(),
        )

    @classmethod
    def of_frames(cls, data: bytes, start: int, end: int, count: int) -> _Scan:
        """Frame by frame, as the real server admits them: the first bad one is refused."""
        view = memoryview(data)
        unpack = _FRAME.unpack_from
        digest = xxh3_64_intdigest
        in_order = True
        empty = False
        low = high = None
        pos = start
        checksums = bytearray()
        for i in range(count):
            frame = pos
            if pos + FRAME_HEADER_SIZE > end:
                malformed("a message header runs past the end of its batch")
            (checksum, id_low, id_high, offset_delta, ts_delta, headers_length, payload_length,
             reserved) = unpack(data, pos)  # fmt: skip
            if reserved:
                malformed("a message's reserved field is not zero")
            pos += FRAME_HEADER_SIZE
            payload_end = pos + payload_length
            frame_end = payload_end + headers_length
            if frame_end > end:
                malformed(f"message {id_high << 64 | id_low} runs past the end of its batch")
            if headers_length:
                decode_headers(Reader(data, payload_end, frame_end), Era.C)  # checked, not kept
            if digest(view[frame + 8 : frame_end]) != checksum:
                malformed(
                    f"message {id_high << 64 | id_low} has a wrong checksum",
                    Status.INVALID_MESSAGE_CHECKSUM,
                )
            checksums += view[frame : frame + 8]
            empty = empty or not payload_length
            in_order = in_order and offset_delta == i
            if low is None or ts_delta < low:
                low = ts_delta
            if high is None or ts_delta > high:
                high = ts_delta
            pos = frame_end
        if pos != end:
            malformed(f"{end - pos} bytes after the batch's messages")
        return cls(bytes(checksums), low or 0, high or 0, empty, in_order)
