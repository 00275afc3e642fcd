"""Publishing frames (rabbitmq-stream.md §5 "Publishing"): DeclarePublisher, Publish v1/v2,
PublishConfirm, PublishError, QueryPublisherSequence, DeletePublisher.

Entries are kept as sent: a simple entry's bytes (an AMQP 1.0 message for interoperable
clients, §8) and a sub-batch's compressed data are opaque here.
"""

from __future__ import annotations

import itertools
import operator
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final, Self, overload

from protocols._wire import LocalProtocolError

from .codes import Key
from .frame import CodeResponse, Frame, Request
from .layout import CODE, NULLABLE_STRING, STRING, U8, U32, U64, ArrayOf, Kind, Nested, Struct
from .publish_columns import SUB_BATCH_SIZE as _SUB_BATCH_SIZE
from .publish_columns import uniform_items
from .wire import Reader, malformed, pack

__all__ = [
    "PUBLISH_HEAD_SIZE",
    "PUBLISH_ITEM_HEAD",
    "DeclarePublisher",
    "DeclarePublisherResponse",
    "DeletePublisher",
    "DeletePublisherResponse",
    "Publish",
    "PublishConfirm",
    "PublishError",
    "PublishedMessage",
    "PublishedSubBatch",
    "PublishingError",
    "QueryPublisherSequence",
    "QueryPublisherSequenceResponse",
    "SimpleEntries",
    "publish_frames",
    "readdressed",
    "sent_entries",
]

_SUB_BATCH_FLAG: Final = 0x80
_ENTRY_LENGTH_MAX: Final = 0x7FFF_FFFF  # a simple entry's length has its top bit 0
_I32 = struct.Struct(">i")
_SUB_BATCH_HEAD = struct.Struct(">BHII")  # flags, records, uncompressed length, data length
_ID_LENGTH = struct.Struct(">QI")  # a v1 item: publishing id, then a simple entry's length
_LENGTH = struct.Struct(">I")


@dataclass(frozen=True, slots=True, kw_only=True)
class DeclarePublisher(Request):
    """An empty reference means no deduplication."""

    KEY: ClassVar[int] = Key.DECLARE_PUBLISHER
    LAYOUT: ClassVar[tuple[Kind, ...]] = (U32, U8, STRING, STRING)
    publisher_id: int
    reference: str
    stream: str


@dataclass(frozen=True, slots=True, kw_only=True)
class DeclarePublisherResponse(CodeResponse):
    KEY: ClassVar[int] = Key.DECLARE_PUBLISHER


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
    publishing ids and where each item is in the frame, nothing copied. ``stored`` is the
    entries as an Osiris chunk holds them (``uint32 length, bytes`` each, the ids cut out),
    made once when asked for; ``as_sent`` is the frame itself, for a broker that takes the
    items as they came. So the hot paths never build an object per message;
    ``PublishedMessage`` items are made only when indexed. Compares equal to the tuple of its
    items."""

    __slots__ = ("_at", "_end", "_stored", "frame", "ids")

    def __init__(self, ids: tuple[int, ...], frame: bytes, at: Sequence[int], end: int) -> None:
        self.ids = ids
        self.frame = frame  # the bytes the items are in: the frame after its size prefix
        self._at = at  # where each item (its publishing id) starts in ``frame``
        self._end = end  # where the last one ends
        self._stored: bytes | None = None

    def __len__(self) -> int:
        return len(self.ids)

    @overload
    def __getitem__(self, index: int) -> PublishedMessage: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[PublishedMessage, ...]: ...
    def __getitem__(self, index: int | slice) -> PublishedMessage | tuple[PublishedMessage, ...]:
        if isinstance(index, slice):
            return tuple(self[i] for i in range(*index.indices(len(self))))
        start = self._at[index]
        publishing_id, size = _ID_LENGTH.unpack_from(self.frame, start)
        data = bytes(self.frame[start + 12 : start + 12 + size])
        return PublishedMessage(publishing_id=publishing_id, data=data)

    def __iter__(self) -> Iterator[PublishedMessage]:
        return (self[i] for i in range(len(self)))

    @property
    def stored(self) -> bytes:
        """The entries without their ids, as a chunk holds them."""
        if self._stored is None:
            self._stored = self._join(0, len(self))
        return self._stored

    def stored_range(self, start: int, stop: int) -> bytes:
        """``stored`` of the entries ``start .. stop - 1`` (a cut at entry boundaries)."""
        if start == 0 and stop >= len(self):
            return self.stored
        return self._join(start, min(stop, len(self)))

    def _join(self, start: int, stop: int) -> bytes:
        if start >= stop:
            return b""
        at = self._at
        begins = map(operator.add, at[start:stop], itertools.repeat(8))  # after each id
        ends = [*at[start + 1 : stop], at[stop] if stop < len(at) else self._end]
        # Entries are cut out as views and joined once: a bytes slice above 512 bytes is a
        # malloc and a copy of its own (0.6 us an entry of 1 KiB here, a view 0.09); below, a
        # slice is the cheaper of the two.
        average = (ends[-1] - at[start]) // (stop - start)
        source = memoryview(self.frame) if average > _VIEW_FROM else self.frame
        return b"".join(map(source.__getitem__, map(slice, begins, ends)))

    def as_sent(self) -> bytes | None:
        """The Publish frame (after its size prefix) when its items are all of it, else None."""
        if self._at and (self._at[0] != PUBLISH_HEAD_SIZE or self._end != len(self.frame)):
            return None
        return self.frame

    def __eq__(self, other: object) -> bool:
        if isinstance(other, SimpleEntries):
            return self.ids == other.ids and self.stored == other.stored
        if isinstance(other, tuple | list):
            return tuple(self) == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"SimpleEntries({len(self)} entries, {self._end - (self._at or (0,))[0]} bytes)"


_VIEW_FROM: Final = 512  # average bytes per entry from which entries are cut as views
# A Publish v1 frame after its size prefix: key, version, publisher id, entry count; then each
# item: its publishing id and its entry's length, before the entry.
PUBLISH_HEAD_SIZE: Final = 2 + 2 + 1 + 4
PUBLISH_ITEM_HEAD: Final = 8 + 4


def _scan_simple(reader: Reader, n: int) -> SimpleEntries | None:
    """The ``n`` items at the reader as SimpleEntries, or None (nothing consumed) when one of
    them is a sub-batch. One unpack an item; an entry running past the frame shows in where
    the last one ends (positions only grow), a truncated item as struct's error."""
    data, pos, end = reader.data, reader.pos, reader.end
    table = uniform_items(data, pos, end, n)  # entries of one size: no step per entry
    if table is not None:
        reader.pos = end
        return SimpleEntries(table[0], data, table[1], end)
    ids: list[int] = []
    at: list[int] = []
    item = _ID_LENGTH.unpack_from
    try:
        for _ in range(n):
            publishing_id, size = item(data, pos)
            if size & _SUB_BATCH_SIZE:
                return None
            ids.append(publishing_id)
            at.append(pos)
            pos += PUBLISH_ITEM_HEAD + size
    except struct.error:
        malformed(f"truncated Publish entry ({end - pos} bytes left)")
    if pos > end:
        malformed(f"the last Publish entry runs {pos - end} bytes past the frame")
    reader.pos = pos
    return SimpleEntries(tuple(ids), data, tuple(at), pos)


@dataclass(frozen=True, slots=True, kw_only=True)
class Publish(Frame):
    """No correlation id; answered by PublishConfirm / PublishError. ``version`` 2 (3.13+)
    puts a nullable filter value before each simple entry and allows no sub-batches."""

    KEY: ClassVar[int] = Key.PUBLISH
    VERSIONS: ClassVar[frozenset[int]] = frozenset((1, 2))
    publisher_id: int
    messages: Sequence[Entry] = ()  # decoded v1 frames of simple entries: a SimpleEntries
    publish_version: int = 1

    @property
    def version(self) -> int:
        return self.publish_version

    def encode_body(self) -> bytes:
        v2 = self.publish_version == 2
        if self.publish_version not in self.VERSIONS:
            raise LocalProtocolError(f"Publish has no version {self.publish_version}")
        parts = [U8.encode(self.publisher_id), pack(_I32, len(self.messages), "entry count")]
        for entry in self.messages:
            parts.append(U64.encode(entry.publishing_id))
            if isinstance(entry, PublishedSubBatch):
                if v2:
                    raise LocalProtocolError("Publish v2 carries no sub-batches")
                parts.append(_encode_sub_batch(entry))
                continue
            if v2:
                parts.append(NULLABLE_STRING.encode(entry.filter_value))
            elif entry.filter_value is not None:
                raise LocalProtocolError("a filter value needs Publish v2")
            parts.append(_encode_simple(entry.data))
        return b"".join(parts)

    @classmethod
    def decode(cls, reader: Reader, version: int, **header: Any) -> Self:
        publisher_id = U8.decode(reader)
        # Smallest entry: publishing id + a 4-byte length (+ a 2-byte filter value in v2).
        n = reader.count("entry", 14 if version == 2 else 12)
        if version == 1:
            simple = _scan_simple(reader, n)
            if simple is not None:
                return cls(publisher_id=publisher_id, messages=simple, publish_version=version)
        entries: list[Entry] = []
        for _ in range(n):
            publishing_id = U64.decode(reader)
            if version == 2:
                filter_value = NULLABLE_STRING.decode(reader)
                data = _decode_simple(reader)
                if data is None:
                    malformed("Publish v2 carries no sub-batches")
                entries.append(
                    PublishedMessage(
                        publishing_id=publishing_id, data=data, filter_value=filter_value
                    )
                )
            else:
                entries.append(_decode_entry(reader, publishing_id))
        return cls(publisher_id=publisher_id, messages=tuple(entries), publish_version=version)


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


def sent_entries(frame: bytes) -> SimpleEntries:
    """The entries of a Publish v1 frame of simple entries, as a client sent it (after its
    size prefix); RemoteProtocolError for any other frame."""
    if len(frame) < PUBLISH_HEAD_SIZE or struct.unpack_from(">HH", frame, 0) != (Key.PUBLISH, 1):
        malformed("not a Publish v1 frame")
    reader = Reader(frame, 4)
    publish = Publish.decode(reader, 1)
    reader.expect_end("Publish")
    if not isinstance(publish.messages, SimpleEntries):
        malformed("a Publish frame with a sub-entry batch")
    return publish.messages


_READDRESSED = struct.Struct(">IHHB")  # size, key, version, publisher id
_SENT_HEAD = struct.Struct(">HHBi")  # key, version, publisher id, entry count


def readdressed(publisher_id: int, frame: bytes, count: int) -> tuple[bytes, memoryview]:
    """A Publish v1 frame of ``count`` entries as a client sent it (after its size prefix:
    ``SimpleEntries.as_sent``) sent on as another publisher's, in two pieces: its new head (size
    prefix included), then the rest of it (the entry count and the items) untouched."""
    if len(frame) < PUBLISH_HEAD_SIZE:
        raise LocalProtocolError(f"a {len(frame)}-byte Publish frame")
    key, version, _, said = _SENT_HEAD.unpack_from(frame, 0)
    if key != Key.PUBLISH or version != 1:
        raise LocalProtocolError("not a Publish v1 frame")
    if said != count:
        raise LocalProtocolError(f"a Publish frame of {said} entries, {count} expected")
    head = _READDRESSED.pack(len(frame), Key.PUBLISH, 1, publisher_id)
    return head, memoryview(frame)[_READDRESSED.size - 4 :]


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


def _encode_simple(data: bytes) -> bytes:
    if len(data) > _ENTRY_LENGTH_MAX:
        raise LocalProtocolError(f"a {len(data)}-byte entry does not fit 31 bits")
    return U32.encode(len(data)) + data


def _encode_sub_batch(entry: PublishedSubBatch) -> bytes:
    if not 0 <= entry.compression <= 7:
        raise LocalProtocolError(f"compression {entry.compression} does not fit 3 bits")
    flags = _SUB_BATCH_FLAG | entry.compression << 4
    try:
        head = _SUB_BATCH_HEAD.pack(
            flags, entry.record_count, entry.uncompressed_length, len(entry.data)
        )
    except struct.error as exc:
        raise LocalProtocolError(f"sub-batch header does not fit: {exc}") from exc
    return head + entry.data


def _decode_simple(reader: Reader) -> bytes | None:
    """A simple entry, or None (nothing read) when the next entry is a sub-batch."""
    if reader.remaining and reader.data[reader.pos] & _SUB_BATCH_FLAG:
        return None
    return reader.take(U32.decode(reader), "entry")


def _decode_entry(reader: Reader, publishing_id: int) -> Entry:
    data = _decode_simple(reader)
    if data is not None:
        return PublishedMessage(publishing_id=publishing_id, data=data)
    head = reader.take(_SUB_BATCH_HEAD.size, "sub-batch header")
    flags, records, uncompressed, size = _SUB_BATCH_HEAD.unpack(head)
    if flags & 0x0F:
        malformed(f"sub-batch flags {flags:#04x}: the reserved bits are set")
    return PublishedSubBatch(
        publishing_id=publishing_id,
        compression=(flags >> 4) & 0x07,
        record_count=records,
        uncompressed_length=uncompressed,
        data=reader.take(size, "sub-batch data"),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class PublishConfirm(Frame):
    KEY: ClassVar[int] = Key.PUBLISH_CONFIRM
    LAYOUT: ClassVar[tuple[Kind, ...]] = (U8, ArrayOf(U64))
    publisher_id: int
    publishing_ids: tuple[int, ...] = ()

    @classmethod
    def decode(cls, reader: Reader, version: int, **header: Any) -> Self:
        # The hot answer of a publishing client: the ids in one unpack, not one call each.
        publisher_id = U8.decode(reader)
        n = reader.count("publishing id", 8)
        ids = struct.unpack_from(f">{n}Q", reader.data, reader.pos)
        reader.pos += 8 * n
        return cls(publisher_id=publisher_id, publishing_ids=ids)


@dataclass(frozen=True, slots=True, kw_only=True)
class PublishingError(Struct):
    LAYOUT: ClassVar[tuple[Kind, ...]] = (U64, CODE)
    publishing_id: int
    code: int


@dataclass(frozen=True, slots=True, kw_only=True)
class PublishError(Frame):
    KEY: ClassVar[int] = Key.PUBLISH_ERROR
    LAYOUT: ClassVar[tuple[Kind, ...]] = (U8, ArrayOf(Nested(PublishingError)))
    publisher_id: int
    errors: tuple[PublishingError, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class QueryPublisherSequence(Request):
    KEY: ClassVar[int] = Key.QUERY_PUBLISHER_SEQUENCE
    LAYOUT: ClassVar[tuple[Kind, ...]] = (U32, STRING, STRING)
    reference: str
    stream: str


@dataclass(frozen=True, slots=True, kw_only=True)
class QueryPublisherSequenceResponse(CodeResponse):
    """``sequence`` is 0, still with code OK, for an unknown reference."""

    KEY: ClassVar[int] = Key.QUERY_PUBLISHER_SEQUENCE
    LAYOUT: ClassVar[tuple[Kind, ...]] = (*CodeResponse.LAYOUT, U64)
    sequence: int


@dataclass(frozen=True, slots=True, kw_only=True)
class DeletePublisher(Request):
    KEY: ClassVar[int] = Key.DELETE_PUBLISHER
    LAYOUT: ClassVar[tuple[Kind, ...]] = (U32, U8)
    publisher_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class DeletePublisherResponse(CodeResponse):
    KEY: ClassVar[int] = Key.DELETE_PUBLISHER
