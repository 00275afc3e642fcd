"""Kafka RecordBatch v2 records, by hand (kafka.md §3.2, §4.4): decode and encode the records of
a batch (the translation path; the broker hot path only walks headers, see ``batch``).

Every malformed input raises RemoteProtocolError with ``hint=ErrorCode.corrupt_message``.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from crc32c import crc32c

from protocols._wire import (
    LocalProtocolError,
    RemoteProtocolError,
    decode_uvarint,
    decode_uvarlong,
    encode_varint,
)

from .batch import (
    _ATTRIBUTES_AT,
    _BEFORE_CRC,
    _CRC_REGION_HEAD,
    _I32_MAX,
    _I32_MIN,
    _I64_MAX,
    _I64_MIN,
    _MIN_RECORD_LENGTH,
    HEADER_SIZE,
    MAGIC,
    Record,
    RecordBatchHeader,
    TimestampType,
    _corrupt,
    batch_attributes,
    parse_header,
)
from .compression import DEFAULT_MAX_DECOMPRESSED_SIZE, Compression, compress, decompress

__all__ = ["decode_batch", "decode_records", "encode_batch"]


# --- record decoding (§3.2) ---------------------------------------------------------------------


def decode_batch(
    batch: bytes | bytearray | memoryview,
    *,
    check_crc: bool = True,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> tuple[RecordBatchHeader, list[Record]]:
    header = parse_header(batch)
    records = decode_records(
        header, batch, check_crc=check_crc, max_decompressed_size=max_decompressed_size
    )
    return header, records


def decode_records(
    header: RecordBatchHeader,
    batch: bytes | bytearray | memoryview,
    *,
    check_crc: bool = True,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> list[Record]:
    """The records of one whole batch, ``header`` being ``parse_header(batch)``."""
    view = memoryview(batch)
    if len(view) != header.size:
        raise _corrupt(f"batchLength says {header.size} bytes, the batch has {len(view)}")
    if check_crc and crc32c(view[_ATTRIBUTES_AT:]) != header.crc:
        raise _corrupt("record batch CRC mismatch")
    codec = header.compression
    if len(view) == HEADER_SIZE and header.records_count == 0:
        # Compaction's empty batches keep only their offset range (whatever the codec bits say).
        return []
    if codec is not Compression.NONE:
        data = decompress(codec, view[HEADER_SIZE:], max_size=max_decompressed_size)
        start = 0
    elif isinstance(batch, bytes):
        data, start = batch, HEADER_SIZE  # slice keys and values straight out of the batch
    else:
        data, start = bytes(view[HEADER_SIZE:]), 0
    try:
        return _decode_records(data, start, header.records_count)
    except RemoteProtocolError as exc:
        if exc.hint is None:  # from _wire's varint decoder
            raise _corrupt(str(exc)) from None
        raise


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    b = data[pos]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    raw, pos = decode_uvarint(data, pos)
    return (raw >> 1) ^ -(raw & 1), pos


# Record() through its frozen __init__ costs ~0.7 us (six object.__setattr__ calls), as much as
# parsing the record; the decoder fills the slots directly (~0.3 us).
_new = object.__new__
_set_offset_delta, _set_timestamp_delta, _set_key, _set_value, _set_headers, _set_attributes = (
    Record.__dict__[name].__set__
    for name in ("offset_delta", "timestamp_delta", "key", "value", "headers", "attributes")
)


def _decode_records(data: bytes, pos: int, count: int) -> list[Record]:
    # The innermost loop of the translate path: the one- and two-byte varint forms (nearly every
    # field) are inlined, longer ones go through _wire's decoder; zig-zag as in kafka.md §3.2.
    records: list[Record] = []
    append = records.append
    end = len(data)
    try:
        # ``count`` is the declared recordsCount: it bounds the loop, never an allocation.
        for _ in range(count):
            b = data[pos]
            if b < 0x80:
                pos += 1
            elif (c := data[pos + 1]) < 0x80:
                b = (b & 0x7F) | (c << 7)
                pos += 2
            else:
                b, pos = decode_uvarint(data, pos)
            length = (b >> 1) ^ -(b & 1)
            record_end = pos + length
            if length < _MIN_RECORD_LENGTH or record_end > end:
                raise _corrupt(f"record length {length} with {end - pos} bytes left")
            attributes = data[pos]
            b = data[pos + 1]
            if b < 0x80:
                pos += 2
            elif (c := data[pos + 2]) < 0x80:
                b = (b & 0x7F) | (c << 7)
                pos += 3
            else:
                b, pos = decode_uvarlong(data, pos + 1)
            timestamp_delta = (b >> 1) ^ -(b & 1)
            b = data[pos]
            if b < 0x80:
                pos += 1
            elif (c := data[pos + 1]) < 0x80:
                b = (b & 0x7F) | (c << 7)
                pos += 2
            else:
                b, pos = decode_uvarint(data, pos)
            offset_delta = (b >> 1) ^ -(b & 1)
            # key
            b = data[pos]
            if b < 0x80:
                pos += 1
            elif (c := data[pos + 1]) < 0x80:
                b = (b & 0x7F) | (c << 7)
                pos += 2
            else:
                b, pos = decode_uvarint(data, pos)
            if b == 1:  # zig-zag -1: null
                key = None
            elif b & 1 or pos + (b >> 1) > record_end:
                raise _corrupt(f"record key length {(b >> 1) ^ -(b & 1)} does not fit its record")
            else:
                key = data[pos : pos + (b >> 1)]
                pos += b >> 1
            # value
            b = data[pos]
            if b < 0x80:
                pos += 1
            elif (c := data[pos + 1]) < 0x80:
                b = (b & 0x7F) | (c << 7)
                pos += 2
            else:
                b, pos = decode_uvarint(data, pos)
            if b == 1:
                value = None
            elif b & 1 or pos + (b >> 1) > record_end:
                raise _corrupt(f"record value length {(b >> 1) ^ -(b & 1)} does not fit its record")
            else:
                value = data[pos : pos + (b >> 1)]
                pos += b >> 1
            if data[pos] == 0:
                headers: tuple[tuple[str, bytes | None], ...] = ()
                pos += 1
            else:
                n_headers, pos = _varint(data, pos)
                headers, pos = _decode_headers(data, pos, record_end, n_headers)
            if pos != record_end:
                raise _corrupt(f"record fields overrun or fall short of its {length} bytes")
            record = _new(Record)
            _set_offset_delta(record, offset_delta)
            _set_timestamp_delta(record, timestamp_delta)
            _set_key(record, key)
            _set_value(record, value)
            _set_headers(record, headers)
            _set_attributes(record, attributes)
            append(record)
    except IndexError:
        # A varint ran off the end of the data.
        raise _corrupt("truncated record") from None
    if pos != end:
        raise _corrupt(f"{end - pos} bytes after the last of {count} records")
    return records


def _decode_headers(
    data: bytes, pos: int, record_end: int, count: int
) -> tuple[tuple[tuple[str, bytes | None], ...], int]:
    if count < 0:
        raise _corrupt(f"negative record header count {count}")
    headers: list[tuple[str, bytes | None]] = []
    for _ in range(count):
        size, pos = _varint(data, pos)
        if size < 0 or pos + size > record_end:
            raise _corrupt(f"record header key length {size}")
        # Java decodes header keys leniently (malformed UTF-8 -> U+FFFD); surrogateescape keeps
        # such bytes instead, so a forwarded batch re-encodes unchanged.
        key = data[pos : pos + size].decode("utf-8", "surrogateescape")
        pos += size
        size, pos = _varint(data, pos)
        if size < 0:
            if size != -1:
                raise _corrupt(f"record header value length {size}")
            headers.append((key, None))
        elif pos + size > record_end:
            raise _corrupt(f"record header value of {size} bytes overruns its record")
        else:
            headers.append((key, data[pos : pos + size]))
            pos += size
    return tuple(headers), pos


# --- encoding ---------------------------------------------------------------------------------

# Zig-zag varints of -64..63 (one byte) are most record fields; cache them.
_SMALL_VARINTS = tuple(encode_varint(v) for v in range(-64, 64))
_NULL = _SMALL_VARINTS[64 - 1]  # -1


def _zigzag(value: int) -> bytes:
    if -64 <= value < 64:
        return _SMALL_VARINTS[value + 64]
    raw = (value << 1) ^ (value >> 63)
    if raw < 0x4000:
        return bytes(((raw & 0x7F) | 0x80, raw >> 7))
    return encode_varint(value)


def _encode_record(record: Record) -> bytes:
    offset_delta, timestamp_delta = record.offset_delta, record.timestamp_delta
    if not _I32_MIN <= offset_delta <= _I32_MAX or not _I64_MIN <= timestamp_delta <= _I64_MAX:
        raise LocalProtocolError(f"record deltas out of range: {offset_delta}, {timestamp_delta}")
    if not 0 <= record.attributes <= 0xFF:
        raise LocalProtocolError(f"record attributes {record.attributes} do not fit a byte")
    key, value = record.key, record.value
    parts = [
        bytes((record.attributes,)),
        _zigzag(timestamp_delta),
        _zigzag(offset_delta),
        _NULL if key is None else _zigzag(len(key)),
        b"" if key is None else key,
        _NULL if value is None else _zigzag(len(value)),
        b"" if value is None else value,
        _zigzag(len(record.headers)),
    ]
    for name, header_value in record.headers:
        try:
            raw = name.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError as exc:
            raise LocalProtocolError(f"record header key is not UTF-8 encodable: {exc}") from None
        parts += (_zigzag(len(raw)), raw)
        if header_value is None:
            parts.append(_NULL)
        else:
            parts += (_zigzag(len(header_value)), header_value)
    body = b"".join(parts)
    return _zigzag(len(body)) + body


def encode_batch(
    records: Sequence[Record],
    *,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
    base_timestamp_ms: int,
    max_timestamp_ms: int | None = None,
    compression: Compression = Compression.NONE,
    compression_level: int | None = None,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    transactional: bool = False,
    control: bool = False,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    last_offset_delta: int | None = None,
) -> bytes:
    """One RecordBatch v2. ``max_timestamp_ms`` defaults to the largest record timestamp (give
    the broker's time for LogAppendTime); ``last_offset_delta`` to the last record's delta.
    """
    if not records:
        # As Kafka's DefaultRecordBatch.writeEmptyHeader: no body, so nothing to compress.
        compression = Compression.NONE
    if last_offset_delta is None:
        if not records:
            raise LocalProtocolError("an empty batch needs an explicit last_offset_delta")
        last_offset_delta = records[-1].offset_delta
    if max_timestamp_ms is None:
        if timestamp_type == TimestampType.LOG_APPEND_TIME:
            raise LocalProtocolError("a LogAppendTime batch needs max_timestamp_ms")
        max_timestamp_ms = base_timestamp_ms + max((r.timestamp_delta for r in records), default=0)
    body = b"".join([_encode_record(r) for r in records])
    if compression != Compression.NONE:
        body = compress(compression, body, level=compression_level)
    attributes = batch_attributes(
        compression, timestamp_type=timestamp_type, transactional=transactional, control=control
    )
    try:
        region = b"".join(
            (
                _CRC_REGION_HEAD.pack(
                    attributes,
                    last_offset_delta,
                    base_timestamp_ms,
                    max_timestamp_ms,
                    producer_id,
                    producer_epoch,
                    base_sequence,
                    len(records),
                ),
                body,
            )
        )
        # batchLength counts partitionLeaderEpoch(4) + magic(1) + crc(4) + the CRC'd region.
        head = _BEFORE_CRC.pack(
            base_offset, 9 + len(region), partition_leader_epoch, MAGIC, crc32c(region)
        )
    except struct.error as exc:
        raise LocalProtocolError(f"record batch field out of range: {exc}") from None
    return head + region
