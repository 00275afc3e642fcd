"""Tracking records (rabbitmq-stream.md §6): a chunk's trailer, and the body of tracking-delta
chunks: publisher sequences (deduplication), consumer offsets (StoreOffset), timestamps."""

from __future__ import annotations

import enum
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from protocols._wire import U8, U64_BE, LocalProtocolError, RemoteProtocolError

__all__ = ["TrackingRecord", "TrackingType", "decode_tracking", "encode_tracking"]


class TrackingType(enum.IntEnum):
    SEQUENCE = 0  # publisher sequence (deduplication)
    OFFSET = 1  # consumer offset (StoreOffset)
    TIMESTAMP = 2


@dataclass(frozen=True, slots=True)
class TrackingRecord:
    type: int  # a TrackingType value
    id: bytes  # the publisher / consumer reference
    value: int


def decode_tracking(data: bytes | memoryview) -> tuple[TrackingRecord, ...]:
    """``uint8 type, uint8 id_len, id, uint64 value`` repeated (a trailer or a delta body)."""
    out: list[TrackingRecord] = []
    pos = 0
    while pos < len(data):
        if len(data) - pos < 2:
            raise RemoteProtocolError("truncated tracking record")
        kind, id_len = data[pos], data[pos + 1]
        end = pos + 2 + id_len + 8
        if end > len(data):
            raise RemoteProtocolError("tracking record past the end")
        ref = bytes(data[pos + 2 : pos + 2 + id_len])
        out.append(TrackingRecord(kind, ref, U64_BE.unpack_from(data, end - 8)[0]))
        pos = end
    return tuple(out)


def encode_tracking(records: Sequence[TrackingRecord]) -> bytes:
    try:
        return b"".join(
            U8.pack(r.type) + U8.pack(len(r.id)) + r.id + U64_BE.pack(r.value) for r in records
        )
    except struct.error as exc:
        raise LocalProtocolError(f"tracking record: {exc}") from None
