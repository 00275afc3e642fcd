"""Kafka records, errors and configs <-> the canonical model (DESIGN.md §3, kafka.md §3, §6).

Pure functions. Produce batches become ``WireBatch(format="kafka")`` after their headers and CRC
are checked, without decoding a record: a backend that stores the format keeps them as-is and
Fetch sends them back with only the base offset stamped. Batches of any other format are decoded
to ``Message``s and encoded as Kafka batches (the canonical path, e.g. Rog in, Kafka out).

The record <-> message conversion, topic names and configs live in
``gateway.translate.kafka.messages``, the error table in ``gateway.translate.kafka.errors`` (the
Kafka backend uses both too); they are re-exported here.
"""

from __future__ import annotations

from collections.abc import Iterable

from crc32c import crc32c
from kio.schema.errors import ErrorCode

from gateway.model import (
    CorruptMessage,
    InvalidRequest,
    MessageBatch,
    MessageTooLarge,
    WireBatch,
)
from gateway.translate.kafka.errors import error_code
from gateway.translate.kafka.messages import (
    CONFIG_DEFAULTS,
    WIRE_FORMAT,
    InvalidTopicName,
    check_topic_name,
    config_entries,
    decode_wire,
    encode_messages,
    millis,
    topic_config,
)
from gateway.translate.lossy import Lossy, ignore_lossy
from protocols._wire import I64_BE, RemoteProtocolError
from protocols.kafka import RecordBatchHeader, iter_batches

PROTOCOL = "kafka"


# --- produce: one batch per partition, stored as it came (kafka.md §3.3) ------------------------


def produce_batch(
    records: bytes | None, *, max_batch_size: int
) -> tuple[WireBatch, RecordBatchHeader]:
    """Check a Produce ``records`` field and wrap it for the store; raises CorruptMessage,
    InvalidRecord (InvalidRequest) or MessageTooLarge."""
    if not records:
        raise InvalidRequest("a produce request with no records")
    try:
        walker = iter_batches(records, max_batch_size=max_batch_size)
        batches = list(walker)
    except RemoteProtocolError as exc:
        if exc.hint == ErrorCode.message_too_large:
            raise MessageTooLarge(str(exc)) from None
        raise CorruptMessage(str(exc)) from None
    if walker.truncated or len(batches) != 1:
        # Produce v3+ carries exactly one batch per partition (LogValidator).
        raise CorruptMessage(
            f"expected one whole record batch, got {len(batches)}"
            + (f" and {len(walker.truncated)} trailing bytes" if walker.truncated else "")
        )
    header, view = batches[0]
    if crc32c(view[21:]) != header.crc:
        raise CorruptMessage("record batch CRC mismatch")
    if header.records_count <= 0 or header.last_offset_delta != header.records_count - 1:
        raise CorruptMessage(
            f"batch of {header.records_count} records with lastOffsetDelta "
            f"{header.last_offset_delta}"
        )
    if header.is_control:
        raise InvalidRequest("producers may not write control batches")
    first, last = header.base_timestamp, header.max_timestamp
    wire = WireBatch(
        format=WIRE_FORMAT,
        data=records,
        count=header.records_count,
        first_timestamp_us=first * 1000 if first >= 0 else 0,
        max_timestamp_us=last * 1000 if last >= 0 else 0,
    )
    return wire, header


def fetch_records(
    batches: Iterable[MessageBatch], max_bytes: int, lossy: Lossy = ignore_lossy
) -> list[bytes | memoryview]:
    """Record-batch pieces for a Fetch response. Stored Kafka batches go out untouched apart from
    the 8-byte base offset in front; others are encoded, reporting what a record cannot hold to
    ``lossy``. At least one batch is always sent (KIP-74)."""
    pieces: list[bytes | memoryview] = []
    size = 0
    for batch in batches:
        wire = batch.wire
        if wire is not None and wire.format == WIRE_FORMAT:
            data = memoryview(wire.data)
            n = len(data)
            if pieces and size + n > max_bytes:
                break
            pieces += (I64_BE.pack(wire.base_offset), data[8:])
        else:
            encoded = encode_messages(batch.messages, lossy)
            n = len(encoded)
            if pieces and size + n > max_bytes:
                break
            pieces.append(encoded)
        size += n
    return pieces


__all__ = [
    "CONFIG_DEFAULTS",
    "PROTOCOL",
    "WIRE_FORMAT",
    "InvalidTopicName",
    "check_topic_name",
    "config_entries",
    "decode_wire",
    "encode_messages",
    "error_code",
    "fetch_records",
    "millis",
    "produce_batch",
    "topic_config",
]
