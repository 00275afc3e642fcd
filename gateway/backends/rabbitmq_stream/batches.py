"""How batches meet RabbitMQ's entries (pure): a canonical batch as the entries to publish
(``entries_of``), whether a client's Publish frame goes on as it came (``as_sent``), and the
chunks a read found as canonical batches, trimmed to the offsets asked for (``batches_of``)."""

from __future__ import annotations

import time

from gateway.backends.rabbitmq_stream.tail import Stored
from gateway.model import (
    Append,
    CorruptMessage,
    InvalidRequest,
    MessageBatch,
    MessageTooLarge,
    WireBatch,
)
from gateway.translate.rabbitmq_stream.messages import (
    WIRE_FORMAT,
    decode_wire,
    to_amqp,
    wire_entries,
)
from gateway.translate.rabbitmq_stream.notes import split
from protocols import rabbitmq_stream as rs
from protocols._wire import RemoteProtocolError
from protocols.rabbitmq_stream.chunk import Entry, SimpleEntry, count_entries, encode_entry


def entries_of(batch: MessageBatch, max_message_bytes: int) -> tuple[bytes, int]:
    """(the entries to publish, encoded as a chunk holds them; the records they hold): stored
    RabbitMQ entries as they are, other messages as AMQP 1.0 simple entries."""
    wire = batch.wire
    if wire is not None and wire.format == WIRE_FORMAT:
        # The chunk notes stay behind: RabbitMQ writes its own trailer, and 3.10 takes no filter
        # values (a Publish v2 to it would be refused).
        stored, records = split(wire.data)[1], wire.count
        try:
            entries, counted = count_entries(stored)
        except RemoteProtocolError as exc:
            raise CorruptMessage(f"stored RabbitMQ batch: {exc}") from None
        if counted != records:
            raise CorruptMessage(f"stored RabbitMQ batch: {counted} records, {records} said")
        if entries and len(stored) - 4 * entries > max_message_bytes:
            largest = max(len(e.data) for e in wire_entries(wire))  # rare: worth a look
            if largest > max_message_bytes:
                raise MessageTooLarge(f"a {largest}-byte entry exceeds {max_message_bytes}")
    else:
        # A message without a time (Rog's) is stamped on arrival, as the embedded log does; the
        # AMQP creation-time carries it (DESIGN.md §3).
        now_us = time.time_ns() // 1000
        values = [to_amqp(m if m.timestamp_us else m._replace(timestamp_us=now_us))
                  for m in batch.messages]  # fmt: skip
        largest = max((len(v) for v in values), default=0)
        if largest > max_message_bytes:
            raise MessageTooLarge(f"a {largest}-byte message exceeds {max_message_bytes} bytes")
        stored = b"".join(encode_entry(SimpleEntry(v)) for v in values)
        records = len(values)
    if not records:
        raise InvalidRequest("an append needs at least one message")
    return stored, records


def as_sent(cmd: Append, wire: WireBatch, max_message_bytes: int) -> bool:
    """Whether a ``published_batch`` goes to RabbitMQ as it came: with the client's reference
    and ids (one per entry), and its entries together within the message size limit (else
    the stored form's checks find the largest, and the entries go out as the publisher cuts
    them)."""
    items = len(wire.data) - rs.PUBLISH_HEAD_SIZE
    return (
        bool(cmd.publisher)
        and len(cmd.publishing_ids) == wire.count > 0
        and items - rs.PUBLISH_ITEM_HEAD * wire.count <= max_message_bytes
    )


def _trimmed(stored: Stored, lo: int, hi: int) -> MessageBatch:
    """The records ``lo .. hi - 1`` of a chunk: its entries' bytes when whole entries cover
    them, decoded messages when a sub-entry batch straddles a cut."""
    if lo <= stored.chunk_id and hi >= stored.end:
        return MessageBatch(wire=stored.wire())
    parts: list[Entry] = []
    offset = stored.chunk_id
    for entry in stored.decode():
        n = 1 if isinstance(entry, SimpleEntry) else entry.record_count
        if offset < hi and offset + n > lo:
            if offset < lo or offset + n > hi:
                wanted = [m for m in decode_wire(stored.wire()) if lo <= m.offset < hi]
                return MessageBatch(wanted)
            parts.append(entry)
        offset += n
    return MessageBatch(wire=stored.subset(parts, max(lo, stored.chunk_id)))


def batches_of(
    chunks: list[Stored], offset: int, max_messages: int, *, whole: bool
) -> tuple[MessageBatch, ...]:
    out: list[MessageBatch] = []
    left = max_messages
    for stored in chunks:
        if left <= 0:
            break
        first = max(offset, stored.chunk_id)
        if whole:
            out.append(MessageBatch(wire=stored.wire()))
            left -= stored.end - first
            continue
        take = min(stored.end - first, left)
        out.append(_trimmed(stored, first, first + take))
        left -= take
    return tuple(out)


__all__ = ["as_sent", "batches_of", "entries_of"]
