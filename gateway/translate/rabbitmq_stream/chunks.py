"""RabbitMQ Stream Deliver chunks of canonical batches (rabbitmq-stream.md §6), and the message
mapping the listener shares with the RabbitMQ backend (``messages``: entries <-> canonical
messages, the stored ``rabbitmq_stream`` wire form), re-exported here.
Pure functions.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final, NamedTuple

from gateway.model import CorruptMessage, MessageBatch
from gateway.translate.lossy import Lossy, ignore_lossy
from gateway.translate.rabbitmq_stream.messages import (
    BODY_HEADER,
    PROPERTY_PREFIX,
    PUBLISHED_FORMAT,
    ROUTING_KEY,
    TIMESTAMP_US,
    WIRE_FORMAT,
    decode_wire,
    published_batch,
    record_count,
    stored_batch,
    to_amqp,
    to_canonical,
    wire_batch,
    wire_entries,
)
from gateway.translate.rabbitmq_stream.notes import PLAIN, ChunkNotes, Filter, notes_in, split
from protocols._wire import RemoteProtocolError
from protocols.rabbitmq_stream.chunk import (
    Entry,
    SimpleEntry,
    chunk_header,
    count_entries,
    encode_chunk,
)

__all__ = [
    "BODY_HEADER",
    "MAX_CHUNK_ENTRIES",
    "PROPERTY_PREFIX",
    "PUBLISHED_FORMAT",
    "ROUTING_KEY",
    "TIMESTAMP_US",
    "WIRE_FORMAT",
    "DeliverChunk",
    "Filter",
    "Lossy",
    "chunk_for",
    "decode_wire",
    "published_batch",
    "stored_batch",
    "to_amqp",
    "to_canonical",
    "wire_batch",
    "wire_entries",
]

MAX_CHUNK_ENTRIES: Final = 0xFFFF  # a chunk header's entry count is a uint16 (§6)


class DeliverChunk(NamedTuple):
    pieces: tuple[bytes, ...]  # the Osiris chunk (header + entries) a Deliver carries, in pieces
    chunk_id: int  # offset of its first record
    records: int  # the next offset to read is chunk_id + records

    @property
    def data(self) -> bytes:
        """The chunk in one piece."""
        return b"".join(self.pieces)


def _entries_of(batch: MessageBatch, start: int, lossy: Lossy) -> Iterable[tuple[int, Entry, int]]:
    """(offset, entry, timestamp_us) of the batch's entries holding offsets >= ``start``."""
    wire = batch.wire
    if wire is not None and wire.format == WIRE_FORMAT:
        offset = wire.base_offset
        for entry in wire_entries(wire):
            count = record_count(entry)
            if offset + count > start:
                yield offset, entry, wire.max_timestamp_us
            offset += count
        return
    for m in batch.messages:
        if m.offset >= start:
            yield m.offset, SimpleEntry(to_amqp(m, lossy)), m.timestamp_us


def _notes_of(batch: MessageBatch) -> ChunkNotes:
    wire = batch.wire
    if wire is not None and wire.format == WIRE_FORMAT:
        return notes_in(wire.data)
    return PLAIN  # another protocol's messages: no writer reference, no filter value


def _notes(batches: Iterable[MessageBatch]) -> ChunkNotes:
    notes = PLAIN
    for batch in batches:
        notes = notes.merged(_notes_of(batch))
    return notes


def _whole_stored(
    batches: tuple[MessageBatch, ...], chunk_id: int, epoch: int
) -> DeliverChunk | None:
    """The fast path: stored RabbitMQ batches, contiguous from ``chunk_id`` on, are already a
    chunk's entries; they are joined, not decoded. None when that is not the case."""
    parts: list[bytes] = []
    expected = chunk_id
    timestamp_us = 0
    entries = 0
    notes: ChunkNotes | None = None
    for batch in batches:
        wire = batch.wire
        if wire is None or wire.format != WIRE_FORMAT or wire.base_offset != expected:
            break
        batch_notes, body = split(wire.data)
        if wire.entries > 0:  # counted by RabbitMQ, the chunk checked against its CRC
            n, records = wire.entries, wire.count
        else:
            try:
                n, records = count_entries(body)
            except RemoteProtocolError as exc:
                raise CorruptMessage(f"stored RabbitMQ entries: {exc}") from None
        if records != wire.count:
            raise CorruptMessage(f"stored RabbitMQ batch: {records} records, {wire.count} said")
        if entries + n > MAX_CHUNK_ENTRIES:
            break  # the header counts entries in 16 bits
        parts.append(body)
        entries += n
        expected += records
        timestamp_us = max(timestamp_us, wire.max_timestamp_us)
        notes = batch_notes if notes is None else notes.merged(batch_notes)
    if not parts or notes is None:
        return None
    header = chunk_header(
        parts, entries=entries, records=expected - chunk_id, chunk_id=chunk_id,
        timestamp_ms=timestamp_us // 1000, epoch=epoch, trailer_length=notes.trailer_length,
        bloom_size=notes.bloom_size,
    )  # fmt: skip
    # the stored entries go out as they are: no copy into one chunk (the Deliver is gathered)
    return DeliverChunk((header, *parts), chunk_id, expected - chunk_id)


def _accepted(batches: tuple[MessageBatch, ...], only: Filter) -> tuple[MessageBatch, ...]:
    """The first run of batches the filter lets through (RabbitMQ skips the chunks its filter
    rejects; a chunk never spans a rejected one)."""
    start = 0
    while start < len(batches) and not only.accepts(_notes_of(batches[start])):
        start += 1
    end = start
    while end < len(batches) and only.accepts(_notes_of(batches[end])):
        end += 1
    return batches[start:end]


def chunk_for(
    batches: Iterable[MessageBatch],
    chunk_id: int,
    *,
    epoch: int = 1,
    lossy: Lossy = ignore_lossy,
    only: Filter | None = None,
) -> DeliverChunk | None:
    """One Deliver chunk of the records from ``chunk_id`` on: stored RabbitMQ entries as they
    were published (sub-entry batches stay compressed), other messages as AMQP simple entries.
    A stored sub-entry batch holding ``chunk_id`` starts the chunk at its first record (clients
    skip records below the offset they asked for, §6). The chunk ends at the first gap in the
    offsets or at 65,535 entries; the timestamp is the latest of its records (the writer's clock in
    Osiris). None when no record is at or after ``chunk_id``. Stored RabbitMQ batches starting
    right at ``chunk_id``, or at the first offset after it that holds a record (offsets may have
    gaps: on a RabbitMQ backend a stored consumer offset takes one), are joined as they are,
    without decoding an entry. The header states the trailer RabbitMQ would have written (one
    publisher-sequence record per writer reference) and its bloom filter size. With a filter
    (``only``), stored batches it rejects are skipped whole, as RabbitMQ skips chunks."""
    batches = tuple(batches)
    if only is not None:
        batches = _accepted(batches, only)
    start = chunk_id
    if batches and batches[0].wire is not None and batches[0].base_offset > chunk_id:
        start = batches[0].base_offset
    whole = _whole_stored(batches, start, epoch)
    if whole is not None:
        return whole
    entries: list[Entry] = []
    first = expected = -1
    timestamp_us = 0
    used: list[MessageBatch] = []
    for batch in batches:
        used.append(batch)
        for offset, entry, ts in _entries_of(batch, chunk_id, lossy):
            if first < 0:
                first = expected = offset
            elif offset != expected or len(entries) >= MAX_CHUNK_ENTRIES:
                break
            entries.append(entry)
            expected += record_count(entry)
            timestamp_us = max(timestamp_us, ts)
        else:
            continue
        break
    if not entries:
        return None
    notes = _notes(used)
    data = encode_chunk(
        entries, chunk_id=first, timestamp_ms=timestamp_us // 1000, epoch=epoch,
        trailer_length=notes.trailer_length, bloom_size=notes.bloom_size,
    )  # fmt: skip
    return DeliverChunk((data,), first, expected - first)
