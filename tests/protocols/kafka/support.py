"""Shared by the Kafka record tests: the captured batches and small batch builders."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crc32c import crc32c

from protocols.kafka import Compression, Record, RecordBatchHeader, encode_batch

VECTORS = Path(__file__).resolve().parents[2] / "vectors" / "kafka" / "record_batches.jsonl"
BASE_TS = 1_700_000_000_000
CODECS = list(Compression)


@dataclass(frozen=True, slots=True, kw_only=True)
class Captured:
    where: str
    also: tuple[str, ...]
    client_id: str | None
    records: bytes


def captured() -> list[Captured]:
    with VECTORS.open() as lines:
        rows = [json.loads(line) for line in lines]
    return [
        Captured(
            where=row["from"],
            also=tuple(row.get("also", ())),
            client_id=row["client_id"],
            records=bytes.fromhex(row["records"]),
        )
        for row in rows
    ]


def same_header(header: RecordBatchHeader) -> dict[str, Any]:
    """``encode_batch`` keywords that reproduce ``header``'s fields."""
    return {
        "base_offset": header.base_offset,
        "partition_leader_epoch": header.partition_leader_epoch,
        "base_timestamp_ms": header.base_timestamp,
        "max_timestamp_ms": header.max_timestamp,
        "compression": header.compression,
        "timestamp_type": header.timestamp_type,
        "transactional": header.is_transactional,
        "control": header.is_control,
        "producer_id": header.producer_id,
        "producer_epoch": header.producer_epoch,
        "base_sequence": header.base_sequence,
        "last_offset_delta": header.last_offset_delta,
    }


def restamp_crc(batch: bytes | bytearray) -> bytes:
    """The batch with a CRC that matches whatever its bytes now are (to reach the record parser)."""
    out = bytearray(batch)
    if len(out) >= 21:
        out[17:21] = crc32c(bytes(out[21:])).to_bytes(4, "big")
    return bytes(out)


def sample_records(count: int, value_size: int = 100) -> list[Record]:
    return [
        Record(
            offset_delta=i,
            timestamp_delta=i // 3,
            key=None if i % 5 == 4 else b"key-%d" % i,
            value=(b"value %d " % i * value_size)[:value_size],
            headers=(("trace", b"t%d" % i), ("none", None)) if i % 2 else (),
        )
        for i in range(count)
    ]


def sample_batch(
    count: int = 10, compression: Compression = Compression.NONE, **fields: Any
) -> bytes:
    return encode_batch(
        sample_records(count), base_timestamp_ms=BASE_TS, compression=compression, **fields
    )
