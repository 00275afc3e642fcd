"""Kafka RecordBatch v2 (magic 2) headers, by hand (kafka.md §3.1, §4.4): walk and stamp batches
without decoding their records (the broker hot path).

Every malformed input raises RemoteProtocolError with ``hint=ErrorCode.corrupt_message``; slicing
only ever takes bytes that are present, so no declared length drives an allocation.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass, fields

from crc32c import crc32c
from kio.schema.errors import ErrorCode

from protocols._wire import (
    I16_BE,
    I32_BE,
    I64_BE,
    U32_BE,
    FrameTooLarge,
    LocalProtocolError,
    RemoteProtocolError,
)

from .compression import Compression

__all__ = [
    "HEADER_SIZE",
    "MAGIC",
    "BatchIterator",
    "Record",
    "RecordBatchHeader",
    "TimestampType",
    "batch_attributes",
    "iter_batches",
    "parse_header",
    "set_base_offset",
    "set_log_append_time",
    "set_producer",
    "split_batches",
    "verify_crc",
]


MAGIC = 2
HEADER_SIZE = 61
# kafka.md §3.1: baseOffset(8) + batchLength(4) precede what batchLength counts; the CRC covers
# attributes..end, so everything before offset 21 can be rewritten without recomputing it.
_LOG_OVERHEAD = 12
_LEADER_EPOCH_AT = 12
_MAGIC_AT = 16
_CRC_AT = 17
_ATTRIBUTES_AT = 21
_MAX_TIMESTAMP_AT = 35
_MIN_BATCH_LENGTH = HEADER_SIZE - _LOG_OVERHEAD

_HEADER = struct.Struct(">qiibIhiqqqhii")  # §3.1, all 61 bytes
_BEFORE_CRC = struct.Struct(">qiibI")  # baseOffset .. crc
_CRC_REGION_HEAD = struct.Struct(">hiqqqhii")  # attributes .. recordsCount
assert _HEADER.size == HEADER_SIZE

_CODEC_MASK = 0x07
_TIMESTAMP_TYPE_BIT = 0x08
_TRANSACTIONAL_BIT = 0x10
_CONTROL_BIT = 0x20
_DELETE_HORIZON_BIT = 0x40

_I32_MIN, _I32_MAX = -(1 << 31), (1 << 31) - 1
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1
# attributes(1) + five one-byte varints (timestamp, offset, key, value, header count): §3.2
_MIN_RECORD_LENGTH = 6


class TimestampType(enum.IntEnum):
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


def _corrupt(message: str) -> RemoteProtocolError:
    return RemoteProtocolError(message, hint=ErrorCode.corrupt_message)


def batch_attributes(
    compression: Compression = Compression.NONE,
    *,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    transactional: bool = False,
    control: bool = False,
) -> int:
    return (
        int(compression)
        | (_TIMESTAMP_TYPE_BIT if timestamp_type == TimestampType.LOG_APPEND_TIME else 0)
        | (_TRANSACTIONAL_BIT if transactional else 0)
        | (_CONTROL_BIT if control else 0)
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Record:
    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    value: bytes | None
    # Header keys are Kafka strings; bytes that are not UTF-8 survive as surrogate escapes.
    headers: tuple[tuple[str, bytes | None], ...] = ()
    attributes: int = 0  # int8, unused by Kafka (§3.2)


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordBatchHeader:
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        return self.batch_length + _LOG_OVERHEAD

    @property
    def compression(self) -> Compression:
        return Compression(self.attributes & _CODEC_MASK)  # validated in parse_header

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType(bool(self.attributes & _TIMESTAMP_TYPE_BIT))

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL_BIT)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & _DELETE_HORIZON_BIT)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    def offset_of(self, record: Record) -> int:
        return self.base_offset + record.offset_delta

    def timestamp_of(self, record: Record) -> int:
        # LogAppendTime batches: every record's timestamp is maxTimestamp (kafka.md §3.3).
        if self.attributes & _TIMESTAMP_TYPE_BIT:
            return self.max_timestamp
        return self.base_timestamp + record.timestamp_delta


# --- walking and stamping (no record decoding) -------------------------------------------------

_HEADER_FIELDS = tuple(f.name for f in fields(RecordBatchHeader))  # in _HEADER's (wire) order


def parse_header(batch: bytes | bytearray | memoryview) -> RecordBatchHeader:
    """The 61-byte header at the start of ``batch``; the rest of the batch is not looked at."""
    if len(batch) < HEADER_SIZE:
        raise _corrupt(f"record batch of {len(batch)} bytes is shorter than its 61-byte header")
    header = RecordBatchHeader(**dict(zip(_HEADER_FIELDS, _HEADER.unpack_from(batch), strict=True)))
    if header.magic != MAGIC:
        raise _corrupt(f"record batch magic {header.magic}, only 2 is supported")
    if header.batch_length < _MIN_BATCH_LENGTH:
        raise _corrupt(f"batchLength {header.batch_length} is shorter than the batch header")
    if header.attributes & _CODEC_MASK > Compression.ZSTD:
        raise _corrupt(f"unknown compression codec {header.attributes & _CODEC_MASK}")
    if header.records_count < 0:
        raise _corrupt(f"negative recordsCount {header.records_count}")
    return header


class BatchIterator:
    """Yields ``(header, batch view)`` for each whole batch; afterwards ``truncated`` holds a
    partial trailing batch (empty if none). Brokers cut Fetch responses at max_bytes, so a
    partial tail is normal there and clients skip it (kafka.md §3.3); on Produce it is an error
    for the caller to report.
    """

    __slots__ = ("_max_batch_size", "_pos", "_view", "truncated")

    def __init__(
        self, data: bytes | bytearray | memoryview, *, max_batch_size: int | None = None
    ) -> None:
        self._view = memoryview(data)
        self._pos = 0
        self._max_batch_size = max_batch_size
        self.truncated: memoryview = self._view[0:0]

    def __iter__(self) -> BatchIterator:
        return self

    def __next__(self) -> tuple[RecordBatchHeader, memoryview]:
        view, pos = self._view, self._pos
        remaining = len(view) - pos
        if remaining == 0:
            raise StopIteration
        if remaining >= _LOG_OVERHEAD:
            # The same order of checks as Kafka's ByteBufferLogInputStream: a bad size or magic
            # is corruption even in a partial tail; a good one that runs past the end is not.
            (length,) = I32_BE.unpack_from(view, pos + 8)
            if length < _MIN_BATCH_LENGTH:
                raise _corrupt(f"batchLength {length} is shorter than the batch header")
            size = length + _LOG_OVERHEAD
            if self._max_batch_size is not None and size > self._max_batch_size:
                raise FrameTooLarge(size, self._max_batch_size, hint=ErrorCode.message_too_large)
            if remaining > _MAGIC_AT and view[pos + _MAGIC_AT] != MAGIC:
                raise _corrupt(f"record batch magic {view[pos + _MAGIC_AT]}, only 2 is supported")
            if size <= remaining:
                batch = view[pos : pos + size]
                header = parse_header(batch)
                self._pos = pos + size
                return header, batch
        self.truncated = view[pos:]
        self._pos = len(view)
        raise StopIteration


def iter_batches(
    data: bytes | bytearray | memoryview, *, max_batch_size: int | None = None
) -> BatchIterator:
    """Split a Produce/Fetch ``records`` field into batches, reading only their headers."""
    return BatchIterator(data, max_batch_size=max_batch_size)


def split_batches(
    data: bytes | bytearray | memoryview, *, max_batch_size: int | None = None
) -> tuple[list[tuple[RecordBatchHeader, memoryview]], memoryview]:
    """``(whole batches, partial trailing batch)``; the second is empty if the data ends cleanly."""
    walker = BatchIterator(data, max_batch_size=max_batch_size)
    batches = list(walker)
    return batches, walker.truncated


def verify_crc(batch: bytes | bytearray | memoryview) -> bool:
    """CRC-32C (Castagnoli) of attributes..end against the header's crc (kafka.md §3.1)."""
    if len(batch) < HEADER_SIZE:
        return False
    (stored,) = U32_BE.unpack_from(batch, _CRC_AT)
    return bool(crc32c(memoryview(batch)[_ATTRIBUTES_AT:]) == stored)


def _check_stampable(batch: bytes | bytearray | memoryview) -> memoryview:
    view = memoryview(batch)
    if len(view) < HEADER_SIZE:
        raise LocalProtocolError(f"{len(view)} bytes are not a record batch")
    return view


def set_base_offset(
    batch: bytes | bytearray | memoryview,
    base_offset: int,
    *,
    partition_leader_epoch: int | None = None,
) -> bytes:
    """What a broker does on append (kafka.md §3.3); both fields precede the CRC'd region."""
    view = _check_stampable(batch)
    try:
        offset = I64_BE.pack(base_offset)
        epoch = view[_LEADER_EPOCH_AT:_MAGIC_AT]
        if partition_leader_epoch is not None:
            epoch = memoryview(I32_BE.pack(partition_leader_epoch))
    except struct.error as exc:
        raise LocalProtocolError(f"base offset or leader epoch out of range: {exc}") from None
    return b"".join((offset, view[8:_LEADER_EPOCH_AT], epoch, view[_MAGIC_AT:]))


def set_log_append_time(batch: bytes | bytearray | memoryview, timestamp_ms: int) -> bytes:
    """Mark a batch LogAppendTime with the broker's time; this one does change the CRC (§3.3)."""
    view = _check_stampable(batch)
    region = bytearray(view[_ATTRIBUTES_AT:])
    (attributes,) = I16_BE.unpack_from(region, 0)
    try:
        I16_BE.pack_into(region, 0, attributes | _TIMESTAMP_TYPE_BIT)
        I64_BE.pack_into(region, _MAX_TIMESTAMP_AT - _ATTRIBUTES_AT, timestamp_ms)
    except struct.error as exc:
        raise LocalProtocolError(f"timestamp out of range: {exc}") from None
    return b"".join((view[:_CRC_AT], U32_BE.pack(crc32c(region)), region))


_PRODUCER_AT = 43  # producerId(8), producerEpoch(2), baseSequence(4): inside the CRC'd region
_PRODUCER = struct.Struct(">qhi")


def set_producer(
    batch: bytes | bytearray | memoryview,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
) -> bytes:
    """Rewrite a batch's idempotent-producer fields (the defaults clear them), records untouched;
    they sit in the CRC'd region, so the CRC is recomputed (kafka.md §3.1)."""
    view = _check_stampable(batch)
    region = bytearray(view[_ATTRIBUTES_AT:])
    try:
        _PRODUCER.pack_into(
            region, _PRODUCER_AT - _ATTRIBUTES_AT, producer_id, producer_epoch, base_sequence
        )
    except struct.error as exc:
        raise LocalProtocolError(f"producer field out of range: {exc}") from None
    return b"".join((view[:_CRC_AT], U32_BE.pack(crc32c(region)), region))
