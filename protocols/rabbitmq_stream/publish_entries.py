"""The entries of Publish frames (rabbitmq-stream.md §5 "Publish v1"): the items a Publish
carries, read without an object per message (``SimpleEntries``), and the Publish frames a client
sends of entries stored as a chunk holds them (``publish_frames``) or of a received frame's items
(``items_frame``).
"""

from __future__ import annotations

import itertools
import operator
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Final, Self, overload

from protocols._wire import LocalProtocolError

from .codes import Key
from .wire import Reader, malformed

__all__ = [
    "PUBLISH_ITEMS_AT",
    "Entry",
    "PublishedMessage",
    "PublishedSubBatch",
    "SimpleEntries",
    "items_entries",
    "items_frame",
    "publish_frames",
    "scan_simple",
]

_SUB_BATCH_FLAG: Final = 0x80
_SUB_BATCH_HEAD = struct.Struct(">BHII")  # flags, records, uncompressed length, data length
_ID_LENGTH = struct.Struct(">QI")  # a v1 item: publishing id, then a simple entry's length
_LENGTH = struct.Struct(">I")
_VIEWS_FROM: Final = 256  # average item bytes from which ``SimpleEntries`` joins views
# Where a Publish v1 body's items begin: key, version, publisher id, entry count.
PUBLISH_ITEMS_AT: Final = 2 + 2 + 1 + 4


@dataclass(frozen=True, slots=True, kw_only=True)
class PublishedMessage:
    """A simple entry; ``filter_value`` is carried by Publish v2 only (None = no value)."""

    publishing_id: int
    data: bytes
    filter_value: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PublishedSubBatch:
    """A sub-batch entry (v1 only): ``record_count`` records of ``uint32 len, bytes``,
    compressed with ``compression`` (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd; §6)."""

    publishing_id: int
    compression: int
    record_count: int
    uncompressed_length: int
    data: bytes


Entry = PublishedMessage | PublishedSubBatch


class SimpleEntries(Sequence[PublishedMessage]):
    """The items of a Publish v1 frame whose entries are all simple, read in one pass: the
    publishing ids, and the entries as an Osiris chunk holds them (``stored``: ``uint32
    length, bytes`` each, the ids cut out). A publisher's entries are stored and delivered in
    that form, so the hot path never builds an object per message; ``PublishedMessage`` items
    are made only when indexed. Decoded from a frame, it also has the frame's ``items`` as
    received (each entry after its publishing id: what a Publish to a broker carries), and cuts
    ``stored`` out of them only when asked. Compares equal to the tuple of its items."""

    __slots__ = ("_begins", "_data", "_starts", "_stored", "ids", "items")

    def __init__(self, ids: tuple[int, ...], stored: bytes, starts: tuple[int, ...]) -> None:
        self.ids = ids
        self._stored: bytes | None = stored
        self._starts: tuple[int, ...] | None = starts  # where each entry's length is in stored
        self._data = b""
        self._begins: list[int] = []
        self.items: memoryview | None = None

    @classmethod
    def of_frame(cls, ids: tuple[int, ...], data: bytes, begins: list[int], end: int) -> Self:
        """The items of the frame ``data`` from the first entry's id to ``end``; ``begins``:
        where each entry (its length) is in ``data``."""
        self = cls.__new__(cls)
        self.ids, self._data, self._begins = ids, data, begins
        first = begins[0] - 8 if begins else end
        self.items = memoryview(data)[first:end]  # immutable bytes: the view stays valid
        self._stored = self._starts = None
        return self

    def frame_body(self) -> bytes | None:
        """The whole Publish v1 frame body these entries were decoded from (key, version,
        publisher id, count, then ``items``), when they are all of it; else None."""
        items = self.items
        if items is None or len(self._data) - len(items) != PUBLISH_ITEMS_AT:
            return None
        return self._data

    @property
    def stored(self) -> bytes:
        if self._stored is None:
            self._cut()
            assert self._stored is not None
        return self._stored

    def _cut(self) -> None:
        """``stored``, cut out of ``items`` in C (no Python step per entry)."""
        data, begins, items = self._data, self._begins, self.items
        assert items is not None
        n = len(begins)
        first = begins[0] if begins else 0
        ends = [*map(operator.sub, begins[1:], itertools.repeat(8, n - 1)), first - 8 + len(items)]
        # Large entries are joined from views: bytes slices of them, allocated and freed around
        # the joined buffer, make that several times slower; small ones are cheaper as slices.
        source = memoryview(data) if len(items) > _VIEWS_FROM * n else data
        self._stored = b"".join(map(source.__getitem__, map(slice, begins, ends)))

    def _place(self, index: int) -> int:
        if self._starts is None:
            if self._stored is None:
                self._cut()
            begins = self._begins
            first = begins[0] if begins else 0
            # Entry i is in ``stored`` where it was in ``data``, less the first's place and i ids.
            ids = range(first, first + 8 * len(begins), 8)
            self._starts = tuple(map(operator.sub, begins, ids))
        return self._starts[index]

    def __len__(self) -> int:
        return len(self.ids)

    @overload
    def __getitem__(self, index: int) -> PublishedMessage: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[PublishedMessage, ...]: ...
    def __getitem__(self, index: int | slice) -> PublishedMessage | tuple[PublishedMessage, ...]:
        if isinstance(index, slice):
            return tuple(self[i] for i in range(*index.indices(len(self))))
        start = self._place(index)
        stored = self.stored
        (size,) = _LENGTH.unpack_from(stored, start)
        data = stored[start + 4 : start + 4 + size]
        return PublishedMessage(publishing_id=self.ids[index], data=data)

    def __iter__(self) -> Iterator[PublishedMessage]:
        return (self[i] for i in range(len(self)))

    def stored_range(self, start: int, stop: int) -> bytes:
        """``stored`` of the entries ``start .. stop - 1`` (a cut at entry boundaries)."""
        stored = self.stored
        if start == 0 and stop >= len(self):
            return stored  # the whole frame: no copy
        begin = self._place(start) if start < len(self) else len(stored)
        end = self._place(stop) if stop < len(self) else len(stored)
        return stored[begin:end]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, SimpleEntries):
            return self.ids == other.ids and self.stored == other.stored
        if isinstance(other, tuple | list):
            return tuple(self) == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"SimpleEntries({len(self)} entries)"


def scan_simple(reader: Reader, n: int) -> SimpleEntries | None:
    """The ``n`` items at the reader as SimpleEntries, or None (nothing consumed) when one of
    them is a sub-batch. One Python step per entry: its id and where it is; nothing copied."""
    data, pos, end = reader.data, reader.pos, reader.end
    ids: list[int] = []
    begins: list[int] = []  # where each entry (its length) is in ``data``
    unpack = _ID_LENGTH.unpack_from
    for _ in range(n):
        if end - pos < 12:
            malformed("truncated Publish entry")
        if data[pos + 8] & _SUB_BATCH_FLAG:
            return None
        publishing_id, size = unpack(data, pos)
        ids.append(publishing_id)
        begins.append(pos + 8)
        pos += 12 + size
    if pos > end:
        malformed(f"the last entry runs {pos - end} bytes past the frame")
    reader.pos = pos
    return SimpleEntries.of_frame(tuple(ids), data, begins, pos)


_PUBLISH_HEAD = struct.Struct(">IHHBi")  # size, key, version, publisher id, entry count
_U64_PACK = struct.Struct(">Q").pack


def publish_frames(
    publisher_id: int,
    first_id: int,
    stored: bytes,
    max_frame_size: int,
    ids: Sequence[int] | None = None,
) -> tuple[list[bytes], int, int]:
    """Publish v1 frames (whole, size prefix included) of entries encoded as a chunk holds them
    (``uint32 length, bytes`` or a sub-batch: what ``SimpleEntries.stored`` holds), numbered
    from ``first_id`` (or given their publishing ``ids``, one per entry: a deduplicating
    publisher's own), as many per frame as fit ``max_frame_size`` (its size prefix excluded,
    §7; an entry too large for it goes alone); how many entries there were, and the size of the
    largest. The client's hot path (the RabbitMQ backend's every append): one Python step per
    entry to find where it ends, the rest (ids, slices, interleaving) in C."""
    ends = _entry_ends(stored)
    count = len(ends)
    if ids is not None and len(ids) != count:
        if count > len(ids):
            raise LocalProtocolError(f"more entries than the {len(ids)} publishing ids given")
        raise LocalProtocolError(f"{count} entries for {len(ids)} publishing ids")
    if not count:
        return [], 0, 0
    starts = [0, *ends[:-1]]
    sizes = list(map(operator.sub, ends, starts))
    try:
        id_parts = list(map(_U64_PACK, range(first_id, first_id + count) if ids is None else ids))
    except struct.error as exc:
        raise LocalProtocolError(f"a publishing id does not fit u64: {exc}") from None
    view = memoryview(stored)
    entry_parts: list[bytes | memoryview] = list(map(view.__getitem__, map(slice, starts, ends)))
    limit = max_frame_size - (_PUBLISH_HEAD.size - 4)
    total = len(stored) + 8 * count
    if total <= limit:  # the usual case: one frame
        return [_publish_frame(publisher_id, id_parts, entry_parts, total)], count, max(sizes)
    frames: list[bytes] = []
    first = size = 0
    for i, n in enumerate(sizes):
        item = 8 + n
        if i > first and size + item > limit:
            frames.append(_publish_frame(publisher_id, id_parts[first:i], entry_parts[first:i],
                                         size))  # fmt: skip
            first, size = i, 0
        size += item
    frames.append(_publish_frame(publisher_id, id_parts[first:], entry_parts[first:], size))
    return frames, count, max(sizes)


def _entry_ends(stored: bytes) -> list[int]:
    """Where each entry of ``stored`` ends (§6: simple or sub-batch)."""
    ends: list[int] = []
    append = ends.append
    length = _LENGTH.unpack_from
    sub_batch = _SUB_BATCH_HEAD.unpack_from
    pos = 0
    end = len(stored)
    last = end - 4
    while pos < end:
        if stored[pos] & _SUB_BATCH_FLAG:
            if end - pos < _SUB_BATCH_HEAD.size:
                raise LocalProtocolError("truncated sub-batch header")
            pos += _SUB_BATCH_HEAD.size + sub_batch(stored, pos)[3]
        elif pos <= last:
            pos += 4 + length(stored, pos)[0]
        else:
            raise LocalProtocolError("truncated entry length")
        append(pos)
    if pos > end:
        raise LocalProtocolError(f"an entry runs {pos - end} bytes past the end")
    return ends


def _publish_frame(
    publisher_id: int, id_parts: list[bytes], entry_parts: list[bytes | memoryview], size: int
) -> bytes:
    n = len(id_parts)
    head = _PUBLISH_HEAD.pack(_PUBLISH_HEAD.size - 4 + size, Key.PUBLISH, 1, publisher_id, n)
    parts: list[bytes | memoryview] = [head] * (2 * n + 1)
    parts[1::2] = id_parts
    parts[2::2] = entry_parts
    return b"".join(parts)


def items_entries(items: bytes | memoryview) -> bytes:
    """The entries of Publish v1 items of simple entries (``SimpleEntries.items``) as a chunk
    holds them: the publishing ids cut out (one Python step per entry; off the hot path)."""
    items = memoryview(items)
    parts: list[bytes] = []
    pos, end = 0, len(items)
    while pos < end:
        if end - pos < 12 or items[pos + 8] & _SUB_BATCH_FLAG:
            raise LocalProtocolError("Publish items of simple entries expected")
        after = pos + 12 + _LENGTH.unpack_from(items, pos + 8)[0]
        if after > end:
            raise LocalProtocolError(f"an entry runs {after - end} bytes past the items")
        parts.append(bytes(items[pos + 8 : after]))
        pos = after
    return b"".join(parts)


def items_frame(publisher_id: int, items: bytes | memoryview, count: int) -> bytes:
    """A Publish v1 frame (size prefix included) of ``count`` items as a Publish frame holds
    them (``SimpleEntries.items``: each entry after its publishing id), passed on as they came."""
    size = _PUBLISH_HEAD.size - 4 + len(items)
    try:
        head = _PUBLISH_HEAD.pack(size, Key.PUBLISH, 1, publisher_id, count)
    except struct.error as exc:
        raise LocalProtocolError(f"Publish header: {exc}") from None
    return b"".join((head, items))
