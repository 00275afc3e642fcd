"""What an Osiris chunk knows about itself besides its entries (rabbitmq-stream.md §6), kept with
a stored ``rabbitmq_stream`` batch: the publisher references that wrote it (RabbitMQ's trailer
holds one publisher-sequence record per reference, and the Deliver header states that
trailer's length) and the filter values of its entries (RabbitMQ 3.13's chunk bloom filter,
which decides what a filtering subscriber gets). Pure functions.

Stored form: the notes go in front of the entries as a block no publisher can send, a
sub-entry header with compression 7 (unused, refused on Publish) and reserved bits set::

    0xFF, uint32 length, then `length` bytes:
      uint8 references, each: uint8 length + UTF-8
      uint8 flags (bit 0: some entry has no filter value)
      uint16 filter values, each: uint16 length + UTF-8

A batch without the block has no references and no filter values: every batch stored before
these notes existed, and every publish without a reference or filter values (the hot path is
unchanged). Readers of other protocols never see the block (``split`` drops it before decoding).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

from gateway.model import CorruptMessage

MARKER: Final = 0xFF
_HEAD = struct.Struct(">BI")
_U8 = struct.Struct(">B")
_U16 = struct.Struct(">H")
# One publisher-sequence record of an Osiris trailer: type, id length, id, uint64 sequence.
_TRACKING_OVERHEAD: Final = 1 + 1 + 8
# The bloom filter RabbitMQ 3.13 writes when a chunk has filter values
# (``stream-filter-size-bytes``, default 16); its bytes are never sent to consumers.
BLOOM_SIZE: Final = 16


@dataclass(frozen=True, slots=True)
class ChunkNotes:
    writers: tuple[str, ...] = ()  # publisher references whose entries are in the chunk
    filters: frozenset[str] = field(default_factory=frozenset)
    unfiltered: bool = True  # some entry has no filter value

    @property
    def trailer_length(self) -> int:
        """The Osiris trailer RabbitMQ writes: one sequence record per reference (§6)."""
        return sum(_TRACKING_OVERHEAD + len(w.encode()) for w in self.writers)

    @property
    def bloom_size(self) -> int:
        return BLOOM_SIZE if self.filters else 0

    def merged(self, other: ChunkNotes) -> ChunkNotes:
        writers = self.writers + tuple(w for w in other.writers if w not in self.writers)
        return ChunkNotes(
            writers, self.filters | other.filters, self.unfiltered or other.unfiltered
        )


PLAIN: Final = ChunkNotes()


@dataclass(frozen=True, slots=True)
class Filter:
    """A subscriber's ``filter.N`` values and ``match-unfiltered`` (Subscribe properties)."""

    values: frozenset[str]
    match_unfiltered: bool = False

    def accepts(self, notes: ChunkNotes) -> bool:
        """As RabbitMQ's chunk filter: a chunk holding one of the values, or (with
        ``match-unfiltered``) an entry without a value. Exact where the bloom filter may also
        let a chunk through that holds none (clients filter the entries themselves)."""
        if not self.values.isdisjoint(notes.filters):
            return True
        return self.match_unfiltered and notes.unfiltered


def filter_of(properties: Iterable[tuple[str, str]]) -> Filter | None:
    """The Subscribe properties' filter, None when there is no ``filter.N`` (deliver all)."""
    values: set[str] = set()
    match_unfiltered = False
    for key, value in properties:
        if key.startswith("filter."):
            values.add(value)
        elif key == "match-unfiltered":
            match_unfiltered = value.lower() == "true"
    return Filter(frozenset(values), match_unfiltered) if values else None


def notes_for(reference: str, filter_values: Iterable[str | None] = ()) -> ChunkNotes:
    """The notes of entries a publisher (``reference``, "" = none) sent with these values."""
    filters = set()
    unfiltered = False
    seen = False
    for value in filter_values:
        seen = True
        if value is None:
            unfiltered = True
        else:
            filters.add(value)
    return ChunkNotes((reference,) if reference else (), frozenset(filters), unfiltered or not seen)


_MARKER_BYTE = bytes([MARKER])


def _encode(notes: ChunkNotes) -> bytes:
    parts = [_U8.pack(len(notes.writers))]
    for writer in notes.writers:
        raw = writer.encode()[:255]
        parts += [_U8.pack(len(raw)), raw]
    parts.append(_U8.pack(1 if notes.unfiltered else 0))
    parts.append(_U16.pack(len(notes.filters)))
    for value in sorted(notes.filters):
        raw = value.encode()[:0xFFFF]
        parts += [_U16.pack(len(raw)), raw]
    body = b"".join(parts)
    return _HEAD.pack(MARKER, len(body)) + body


def annotate(notes: ChunkNotes, entries: bytes) -> bytes:
    """Entries to store with their notes (as they are when there is nothing to note, unless
    they begin with the marker byte: Publish refuses such entries, but a block keeps the stored
    form unambiguous whatever comes)."""
    if notes == PLAIN and entries[:1] != _MARKER_BYTE:
        return entries
    return _encode(notes) + entries


def _parse(data: bytes) -> tuple[ChunkNotes, int]:
    """(notes, where the entries start) of a stored batch."""
    if not data or data[0] != MARKER:
        return PLAIN, 0
    try:
        _, length = _HEAD.unpack_from(data, 0)
        end = _HEAD.size + length
        if end > len(data):
            raise CorruptMessage("stored RabbitMQ chunk notes run past the batch")
        pos = _HEAD.size
        writers = []
        (n,) = _U8.unpack_from(data, pos)
        pos += 1
        for _ in range(n):
            (size,) = _U8.unpack_from(data, pos)
            writers.append(data[pos + 1 : pos + 1 + size].decode())
            pos += 1 + size
        (flags,) = _U8.unpack_from(data, pos)
        (n,) = _U16.unpack_from(data, pos + 1)
        pos += 3
        filters = set()
        for _ in range(n):
            (size,) = _U16.unpack_from(data, pos)
            filters.add(data[pos + 2 : pos + 2 + size].decode())
            pos += 2 + size
    except (struct.error, UnicodeDecodeError) as exc:
        raise CorruptMessage(f"stored RabbitMQ chunk notes: {exc}") from None
    return ChunkNotes(tuple(writers), frozenset(filters), bool(flags & 1)), end


def notes_in(data: bytes) -> ChunkNotes:
    return _parse(data)[0]


def split(data: bytes) -> tuple[ChunkNotes, bytes]:
    """(notes, entries) of a stored batch."""
    notes, start = _parse(data)
    return notes, (data[start:] if start else data)


__all__ = [
    "BLOOM_SIZE", "PLAIN", "ChunkNotes", "Filter", "annotate", "filter_of", "notes_for", "notes_in",
    "split",
]  # fmt: skip
