"""What the RabbitMQ backend publishes of an Append: its entries encoded as a chunk holds them
(``entries_of``), or the Publish frame body a RabbitMQ Stream client sent, handed on as it came
(``published_of``: the listener's ``PUBLISHED_FORMAT``, for a deduplicating publisher).
"""

from __future__ import annotations

import time
from dataclasses import replace

from gateway.model import (
    Append,
    CorruptMessage,
    InvalidRequest,
    MessageBatch,
    MessageTooLarge,
)
from gateway.translate.rabbitmq_stream.messages import (
    CHUNK_FORMAT,
    PUBLISHED_FORMAT,
    WIRE_FORMAT,
    chunk_entries,
    published_entries,
    to_amqp,
    wire_entries,
)
from gateway.translate.rabbitmq_stream.notes import split
from protocols._wire import RemoteProtocolError
from protocols.rabbitmq_stream import PUBLISH_ITEMS_AT
from protocols.rabbitmq_stream.chunk import SimpleEntry, count_entries, encode_entry

_ITEM_OVERHEAD = 8 + 4  # a Publish item's publishing id and entry length


def published_of(cmd: Append, max_message_bytes: int) -> bytes | None:
    """The Publish v1 frame body of a ``PUBLISHED_FORMAT`` append, when it goes to the broker
    as it came (``Publisher.send_published``): a deduplicating publisher's, its ids given, no
    entry above ``max_message_bytes`` for certain. None: publish ``entries_of`` it (every entry
    checked)."""
    wire = cmd.batch.wire
    if wire is None or wire.format != PUBLISHED_FORMAT or not cmd.publisher:
        return None
    body = wire.data
    payload = len(body) - PUBLISH_ITEMS_AT - _ITEM_OVERHEAD * wire.count
    if len(cmd.publishing_ids) != wire.count:
        return None
    if wire.count > 1 and payload > max_message_bytes:
        return None  # maybe one entry too large: entries_of finds out
    if payload > max_message_bytes:
        raise MessageTooLarge(f"a {payload}-byte entry exceeds {max_message_bytes}")
    return body


def entries_of(batch: MessageBatch, max_message_bytes: int) -> tuple[bytes, int]:
    """(the entries to publish, encoded as a chunk holds them; the records they hold): stored
    RabbitMQ entries as they are, other messages as AMQP 1.0 simple entries."""
    wire = batch.wire
    if wire is not None and wire.format == PUBLISHED_FORMAT:
        wire = replace(wire, format=WIRE_FORMAT, data=published_entries(wire))
    elif wire is not None and wire.format == CHUNK_FORMAT:  # read from RabbitMQ, appended again
        wire = chunk_entries(wire)
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


__all__ = ["entries_of", "published_of"]
