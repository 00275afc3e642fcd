"""A batch's frame fields read column-wise, without a Python step per message (iggy.md §6.1).

Most producers send frames of one size (same payload and user-header lengths). Such a batch is
a table: frame ``i`` starts at ``start + i * stride``, so one field of every frame is a strided
slice of the batch (``data[start + at : end : stride]``), which C copies out in one call. The
helpers here answer "is it such a table" and read its columns; anything else falls back to the
frame-by-frame walk, which stays the reference (and the one that words the errors).
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Iterable, Iterator
from functools import lru_cache
from operator import itemgetter
from typing import Any

from xxhash import xxh3_64_digest

from protocols._wire import column, same_in_every

__all__ = ["UniformFrames", "uniform_frames"]

FRAME_HEADER_SIZE = 48
_LENGTHS = struct.Struct("<II")  # user headers length, payload length (frame offsets 32, 36)
_LENGTHS_AT = 32
_RESERVED_AT = 40
_NO_RESERVED = bytes(8)
# Batches of up to this many frames have their slices and indexes kept, for 8 / 16 shapes: at most
# ~0.7 MB of slice objects per shape.
_CACHED_COUNT = 10_000
# Frames up to this size are hashed from copies, bigger ones from views of the batch.
_COPIED_STRIDE = 512


class UniformFrames:
    """``count`` frames of ``stride`` bytes each from ``start`` of ``data``, every one with the
    same user-headers and payload lengths and a zero reserved field (checked by
    ``uniform_frames``). Nothing else about them is checked here."""

    __slots__ = ("count", "data", "headers_length", "payload_length", "start", "stride")

    def __init__(
        self, data: bytes, start: int, count: int, headers_length: int, payload_length: int
    ) -> None:
        self.data = data
        self.start = start
        self.count = count
        self.headers_length = headers_length
        self.payload_length = payload_length
        self.stride = FRAME_HEADER_SIZE + headers_length + payload_length

    @property
    def end(self) -> int:
        return self.start + self.count * self.stride

    def column(self, at: int, width: int, first: int = 0, last: int | None = None) -> bytes:
        """Bytes ``at .. at + width`` of frames ``first .. last``, frame after frame."""
        last = self.count if last is None else last
        stride = self.stride
        begin, stop = self.start + first * stride + at, self.start + last * stride
        return column(self.data, begin, stop, stride, width)

    def checksums(self, first: int = 0, last: int | None = None) -> bytes:
        """The frames' u64 checksums as they are on the wire, one after the other (what the
        batch checksum covers, §6.1)."""
        return self.column(0, 8, first, last)

    def verified_checksums(self) -> bytes | None:
        """``checksums()`` when every frame's is the XXH3 of its bytes after the checksum
        (§6.1), else None."""
        start, stride, count = self.start, self.stride, self.count
        if 1 < count <= _CACHED_COUNT:
            # Every frame cut out in one C call: from a view, or as bytes when frames are small
            # (a copy of a few hundred bytes costs less than making a view). This check of 1,000
            # frames: 58 us at 16 B, 77 at 100 B, 104 at 1 KiB, where a view a frame through
            # map() took 102, 100 and 115.
            source = self.data if stride <= _COPIED_STRIDE else memoryview(self.data)
            frames = _cached_getter(start, stride, count)(source)
        else:
            view = memoryview(self.data)
            frames = map(view.__getitem__, _hashed_slices(start, stride, count))
        # Digests as bytes (big-endian), each turned round in one C call: no int per message
        # (making and packing 1,000 64-bit ints cost 0.1 us a message, as much as hashing 1 KiB).
        digests = array("Q", b"".join(map(xxh3_64_digest, frames)))
        digests.byteswap()  # to little-endian, as the checksums are on the wire (any host)
        checksums = self.checksums()
        return checksums if digests.tobytes() == checksums else None

    def offset_deltas_are_indexes(self) -> bool:
        """Whether frame ``i``'s offset delta is ``i`` (what a producer sends, §6.1)."""
        count = self.count
        indexes = _indexes(count) if count <= _CACHED_COUNT else _u32s(count).pack(*range(count))
        return self.column(24, 4) == indexes

    def timestamp_deltas(self) -> tuple[int, ...]:
        return _u32s(self.count).unpack(self.column(28, 4))

    def user_headers(self) -> Iterator[bytes]:
        """Each distinct user-headers block once (whether one is valid depends on its bytes
        only)."""
        if not self.headers_length:
            return iter(())
        data, stride = self.data, self.stride
        at = self.start + FRAME_HEADER_SIZE + self.payload_length
        blocks = map(
            slice,
            range(at, self.end, stride),
            range(at + self.headers_length, self.end + 1, stride),
        )
        return iter(dict.fromkeys(map(data.__getitem__, blocks)))


def uniform_frames(data: bytes, start: int, end: int, count: int) -> UniformFrames | None:
    """The ``count`` frames filling ``data[start:end]`` as a table, or None when they are not
    one (no frames, lengths that differ, a reserved field that is not zero, frames that do not
    fill the span exactly)."""
    if count <= 0 or start + FRAME_HEADER_SIZE > end:
        return None
    headers_length, payload_length = _LENGTHS.unpack_from(data, start + _LENGTHS_AT)
    frames = UniformFrames(data, start, count, headers_length, payload_length)
    if frames.end != end or data[start + _RESERVED_AT : start + FRAME_HEADER_SIZE] != _NO_RESERVED:
        return None
    # Lengths and reserved field (bytes 32..47) equal to the first frame's in every frame.
    width = FRAME_HEADER_SIZE - _LENGTHS_AT
    if not same_in_every(data, start + _LENGTHS_AT, end, frames.stride, width):
        return None
    return frames


def _hashed_slices(start: int, stride: int, count: int) -> Iterable[slice]:
    """Each frame after its checksum. A connection sends batches of one shape over and over:
    the slices of usual batch sizes are built once."""
    if count <= _CACHED_COUNT:
        return _cached_slices(start, stride, count)
    return _slices(start, stride, count)


def _slices(start: int, stride: int, count: int) -> Iterator[slice]:
    starts = range(start + 8, start + count * stride, stride)
    return map(slice, starts, range(start + stride, start + (count + 1) * stride, stride))


@lru_cache(maxsize=8)
def _cached_slices(start: int, stride: int, count: int) -> tuple[slice, ...]:
    return tuple(_slices(start, stride, count))


@lru_cache(maxsize=8)
def _cached_getter(start: int, stride: int, count: int) -> itemgetter[Any]:
    """Each frame after its checksum, all of them in one call (``count`` > 1: a getter of one
    item returns it bare)."""
    return itemgetter(*_cached_slices(start, stride, count))


@lru_cache(maxsize=16)
def _indexes(count: int) -> bytes:
    return _u32s(count).pack(*range(count))


@lru_cache(maxsize=16)
def _u32s(count: int) -> struct.Struct:
    return struct.Struct(f"<{count}I")
