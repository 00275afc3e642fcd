"""The Osiris chunk a Deliver carries, and the entries Publish and chunks share
(rabbitmq-stream.md §5 "Publish v1", §6).

Sub-entry batches stay compressed: the broker stores them as the publisher sent them and hands
them on unchanged, so ``SubEntryBatch`` keeps the raw body and its record count, and only
``SubEntryBatch.records()`` inflates it (bounded by the declared uncompressed length and a
maximum). Every malformed input raises RemoteProtocolError; no declared length drives an
allocation before the bytes it describes are known to be present.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from isal.isal_zlib import crc32

from protocols._wire import U32_BE, LocalProtocolError, RemoteProtocolError

from .compression import Compression, compress, decompress
from .tracking import TrackingRecord, TrackingType, decode_tracking, encode_tracking

__all__ = [
    "DEFAULT_MAX_DECOMPRESSED_SIZE",
    "HEADER_SIZE",
    "MAGIC_VERSION",
    "Chunk",
    "ChunkHeader",
    "ChunkParts",
    "ChunkType",
    "Compression",
    "DeliveredChunk",
    "Entry",
    "SimpleEntry",
    "SubEntryBatch",
    "TrackingRecord",
    "TrackingType",
    "chunk_header",
    "count_entries",
    "decode_chunk",
    "decode_entries",
    "decode_entry",
    "decode_tracking",
    "encode_chunk",
    "encode_entry",
    "encode_tracking",
    "iter_records",
    "read_chunk",
    "reencode_chunk",
]

HEADER_SIZE = 48
MAGIC_VERSION = 0x50  # magic 5 in the high nibble, chunk format version 0 (osiris.hrl)
DEFAULT_MAX_DECOMPRESSED_SIZE = 64 * 1024 * 1024  # the gateway's own memory guard

# §6 table: magic/version, type, entries, records, timestamp, epoch, chunk id, CRC, data
# length, trailer length, bloom size, 3 reserved bytes.
_HEADER = struct.Struct(">BBHIqQQIIIB3s")
assert _HEADER.size == HEADER_SIZE
_SUB_BATCH = struct.Struct(">BHII")  # flags, record count, uncompressed length, length
_SUB_BATCH_BIT = 0x80
_MAX_U31 = 0x7FFF_FFFF


class ChunkType(enum.IntEnum):
    USER = 0
    TRACKING_DELTA = 1
    TRACKING_SNAPSHOT = 2


@dataclass(frozen=True, slots=True)
class SimpleEntry:
    data: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class SubEntryBatch:
    compression: int  # a Compression value; 5-7 are kept (and passed on) but cannot be inflated
    record_count: int
    uncompressed_length: int
    data: bytes  # the body as the publisher compressed it
    reserved: int = 0  # the low nibble of the flag byte (0 from every client)

    @classmethod
    def build(
        cls, records: Sequence[bytes], compression: Compression, *, level: int | None = None
    ) -> SubEntryBatch:
        plain = b"".join(U32_BE.pack(len(r)) + r for r in records)
        return cls(
            compression=compression,
            record_count=len(records),
            uncompressed_length=len(plain),
            data=compress(compression, plain, level),
        )

    def records(self, *, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> tuple[bytes, ...]:
        """The records, inflated; more than ``max_size`` bytes declared is refused up front."""
        if self.uncompressed_length > max_size:
            raise RemoteProtocolError(
                f"sub-entry batch declares {self.uncompressed_length} bytes, limit {max_size}"
            )
        plain = decompress(self.compression, self.data, self.uncompressed_length)
        out: list[bytes] = []
        pos = 0
        for _ in range(self.record_count):
            size, pos = _u32(plain, pos, "sub-entry record length")
            if size > len(plain) - pos:
                raise RemoteProtocolError(f"sub-entry record of {size} bytes past the end")
            out.append(plain[pos : pos + size])
            pos += size
        if pos != len(plain):
            raise RemoteProtocolError(f"{len(plain) - pos} bytes after {self.record_count} records")
        return tuple(out)


Entry = SimpleEntry | SubEntryBatch


def _u32(data: bytes | memoryview, pos: int, what: str) -> tuple[int, int]:
    if len(data) - pos < 4:
        raise RemoteProtocolError(f"truncated {what}")
    return U32_BE.unpack_from(data, pos)[0], pos + 4


# --- entries ----------------------------------------------------------------------------------


def decode_entry(data: bytes | memoryview, pos: int = 0) -> tuple[Entry, int]:
    """One entry at ``pos`` (Publish v1 item after its publishing id, or a chunk entry)."""
    if pos >= len(data):
        raise RemoteProtocolError("truncated entry")
    flags = data[pos]
    if not flags & _SUB_BATCH_BIT:
        size, pos = _u32(data, pos, "entry length")
        if size > len(data) - pos:
            raise RemoteProtocolError(f"entry of {size} bytes, {len(data) - pos} left")
        return SimpleEntry(bytes(data[pos : pos + size])), pos + size
    if len(data) - pos < _SUB_BATCH.size:
        raise RemoteProtocolError("truncated sub-entry batch header")
    _, count, plain, size = _SUB_BATCH.unpack_from(data, pos)
    pos += _SUB_BATCH.size
    if size > len(data) - pos:
        raise RemoteProtocolError(f"sub-entry batch of {size} bytes, {len(data) - pos} left")
    batch = SubEntryBatch(
        compression=(flags >> 4) & 0x07,
        record_count=count,
        uncompressed_length=plain,
        data=bytes(data[pos : pos + size]),
        reserved=flags & 0x0F,
    )
    return batch, pos + size


def encode_entry(entry: Entry) -> bytes:
    if isinstance(entry, SimpleEntry):
        if len(entry.data) > _MAX_U31:
            raise LocalProtocolError(f"entry of {len(entry.data)} bytes")
        return U32_BE.pack(len(entry.data)) + entry.data
    if not 0 <= entry.compression <= 7 or not 0 <= entry.reserved <= 0x0F:
        raise LocalProtocolError(f"sub-entry flags {entry.compression}/{entry.reserved}")
    try:
        head = _SUB_BATCH.pack(
            _SUB_BATCH_BIT | entry.compression << 4 | entry.reserved,
            entry.record_count,
            entry.uncompressed_length,
            len(entry.data),
        )
    except struct.error as exc:
        raise LocalProtocolError(f"sub-entry batch header: {exc}") from None
    return head + entry.data


def decode_entries(data: bytes | memoryview, count: int) -> tuple[Entry, ...]:
    """Exactly ``count`` entries filling ``data``."""
    if count > len(data):  # every entry takes at least 4 bytes: refuse before looping
        raise RemoteProtocolError(f"{count} entries in {len(data)} bytes")
    entries: list[Entry] = []
    pos = 0
    for _ in range(count):
        entry, pos = decode_entry(data, pos)
        entries.append(entry)
    if pos != len(data):
        raise RemoteProtocolError(f"{len(data) - pos} bytes after {count} entries")
    return tuple(entries)


def _record_count(entries: Sequence[Entry]) -> int:
    return sum(1 if isinstance(e, SimpleEntry) else e.record_count for e in entries)


# --- chunks -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Chunk:
    chunk_type: ChunkType | int
    chunk_id: int  # offset of the first record
    timestamp_ms: int
    epoch: int
    entries: tuple[Entry, ...]
    num_records: int  # as the header states (sub-batch records counted one by one)
    crc: int
    trailer_length: int = 0
    bloom_size: int = 0  # osiris >= 1.6 (RabbitMQ 3.13+); bloom bytes are never sent
    reserved: bytes = b"\0\0\0"
    # Trailer bytes when the sender included them (chunk_selector=all), else None.
    trailer: bytes | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ChunkHeader:
    """The §6 header fields of a chunk, for readers that do not decode its entries."""

    chunk_type: int
    entries: int
    records: int
    timestamp_ms: int
    epoch: int
    chunk_id: int
    crc: int
    data_length: int
    trailer_length: int
    bloom_size: int
    reserved: bytes = b"\0\0\0"

    @property
    def next_offset(self) -> int:
        return self.chunk_id + self.records


class ChunkParts(NamedTuple):
    """A chunk as a big Deliver was read (``RabbitStreamClientCodec``): its header, its data
    section and its trailer (``b""`` when the sender left it out), each as it came, not joined:
    the data section is kept as it is, with no copy."""

    header: bytes
    data: bytes
    trailer: bytes

    def joined(self) -> bytes:
        return b"".join(self)


# A chunk as a Deliver carries it: a view of the frame, or the parts a big one was read in.
DeliveredChunk = bytes | memoryview | ChunkParts


def read_chunk(
    data: bytes | bytearray | memoryview | ChunkParts, *, verify_crc: bool = True
) -> tuple[ChunkHeader, bytes | memoryview]:
    """A chunk's header and its data section (the entries' bytes), nothing decoded: what a
    client that hands entries on as they are reads. A trailer, when the sender included one
    (``chunk_selector=all``), is checked for length and left out (``decode_chunk`` keeps it).
    The data section is a view of ``data``, or a ``ChunkParts``' own bytes."""
    if isinstance(data, ChunkParts):
        view = memoryview(data.header)
        header = _read_header(view)
        body: bytes | memoryview = data.data
        size, rest = len(body), len(data.trailer)
        if len(view) != HEADER_SIZE or size != header.data_length:
            raise RemoteProtocolError(
                f"chunk header of {len(view)} bytes and data of {size}: "
                f"{HEADER_SIZE} and {header.data_length} expected"
            )
    else:
        view = memoryview(data)
        header = _read_header(view)
        size, body_end = header.data_length, HEADER_SIZE + header.data_length
        if size > len(view) - HEADER_SIZE:
            raise RemoteProtocolError(f"chunk data of {size} bytes, {len(view) - HEADER_SIZE} left")
        body, rest = view[HEADER_SIZE:body_end], len(view) - body_end
    if rest not in (0, header.trailer_length):
        raise RemoteProtocolError(
            f"{rest} bytes after the chunk data (trailer is {header.trailer_length})"
        )
    if verify_crc and crc32(body) != header.crc:
        raise RemoteProtocolError(
            f"chunk {header.chunk_id}: CRC 0x{crc32(body):08x} != 0x{header.crc:08x}"
        )
    return header, body


def _read_header(view: memoryview) -> ChunkHeader:
    if len(view) < HEADER_SIZE:
        raise RemoteProtocolError(f"chunk of {len(view)} bytes, header is {HEADER_SIZE}")
    magic, kind, n_entries, n_records, ts, epoch, chunk_id, crc, size, trailer, bloom, rsv = (
        _HEADER.unpack_from(view, 0)
    )
    if magic != MAGIC_VERSION:
        raise RemoteProtocolError(f"chunk magic/version byte 0x{magic:02x}, expected 0x50")
    return ChunkHeader(
        chunk_type=kind, entries=n_entries, records=n_records, timestamp_ms=ts, epoch=epoch,
        chunk_id=chunk_id, crc=crc, data_length=size, trailer_length=trailer, bloom_size=bloom,
        reserved=rsv,
    )  # fmt: skip


def decode_chunk(
    data: bytes | bytearray | memoryview | ChunkParts, *, verify_crc: bool = True
) -> Chunk:
    """A whole chunk: header, ``data_length`` bytes of entries, and either nothing more (what
    3.10-4.x send to a default subscriber) or exactly the trailer."""
    if isinstance(data, ChunkParts):
        data = data.joined()
    h, body = read_chunk(data, verify_crc=verify_crc)
    entries = decode_entries(body, h.entries)
    if _record_count(entries) != h.records:
        raise RemoteProtocolError(
            f"chunk {h.chunk_id} header says {h.records} records, entries hold "
            f"{_record_count(entries)}"
        )
    trailer = bytes(memoryview(data)[HEADER_SIZE + h.data_length :])
    return Chunk(
        chunk_type=ChunkType(h.chunk_type)
        if h.chunk_type in ChunkType._value2member_map_
        else h.chunk_type,
        chunk_id=h.chunk_id,
        timestamp_ms=h.timestamp_ms,
        epoch=h.epoch,
        entries=entries,
        num_records=h.records,
        crc=h.crc,
        trailer_length=h.trailer_length,
        bloom_size=h.bloom_size,
        reserved=h.reserved,
        trailer=trailer or None,
    )


def encode_chunk(
    entries: Sequence[Entry],
    *,
    chunk_id: int,
    timestamp_ms: int,
    epoch: int = 1,
    chunk_type: ChunkType | int = ChunkType.USER,
    trailer_length: int = 0,
    bloom_size: int = 0,
    trailer: bytes | None = None,
) -> bytes:
    """Header + entries (+ ``trailer`` if given; its length then sets ``trailer_length``)."""
    body = b"".join(encode_entry(e) for e in entries)
    header = chunk_header(
        (body,), entries=len(entries), records=_record_count(entries), chunk_id=chunk_id,
        timestamp_ms=timestamp_ms, epoch=epoch, chunk_type=chunk_type,
        trailer_length=trailer_length if trailer is None else len(trailer), bloom_size=bloom_size,
    )  # fmt: skip
    return header + body + (trailer or b"")


def count_entries(body: bytes | memoryview) -> tuple[int, int]:
    """(entries, records) of encoded entries, read from their lengths only."""
    simple = batches = records = pos = 0
    end = len(body)
    length = U32_BE.unpack_from  # one call per entry: this runs on every delivered chunk
    last = end - 4
    while pos < end:
        if body[pos] & _SUB_BATCH_BIT:
            if end - pos < _SUB_BATCH.size:
                raise RemoteProtocolError("truncated sub-entry batch header")
            _, count, _, size = _SUB_BATCH.unpack_from(body, pos)
            pos += _SUB_BATCH.size + size
            records += count
            batches += 1
        elif pos <= last:
            pos += 4 + length(body, pos)[0]
            simple += 1
        else:
            raise RemoteProtocolError("truncated entry length")
    entries = simple + batches
    records += simple
    if pos != end:
        raise RemoteProtocolError(f"the last entry runs {pos - end} bytes past the end")
    return entries, records


def chunk_header(
    body: Sequence[bytes],
    *,
    entries: int,
    records: int,
    chunk_id: int,
    timestamp_ms: int,
    epoch: int = 1,
    chunk_type: ChunkType | int = ChunkType.USER,
    trailer_length: int = 0,
    bloom_size: int = 0,
) -> bytes:
    """The header of a chunk whose data section is the pieces of ``body`` one after another
    (their CRC and length, without joining them: a Deliver sends them as they are)."""
    crc = 0
    size = 0
    for piece in body:
        crc = crc32(piece, crc)
        size += len(piece)
    try:
        return _HEADER.pack(
            MAGIC_VERSION, chunk_type, entries, records, timestamp_ms, epoch, chunk_id, crc, size,
            trailer_length, bloom_size, b"\0\0\0",
        )  # fmt: skip
    except struct.error as exc:
        raise LocalProtocolError(f"chunk header: {exc}") from None


def reencode_chunk(chunk: Chunk) -> bytes:
    """``chunk`` as it was received (its header fields, CRC recomputed from the entries)."""
    out = bytearray(
        encode_chunk(
            chunk.entries,
            chunk_id=chunk.chunk_id,
            timestamp_ms=chunk.timestamp_ms,
            epoch=chunk.epoch,
            chunk_type=chunk.chunk_type,
            trailer_length=chunk.trailer_length,
            bloom_size=chunk.bloom_size,
            trailer=chunk.trailer,
        )
    )
    out[45:48] = chunk.reserved
    return bytes(out)


def iter_records(
    chunk: Chunk, *, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE
) -> Iterator[tuple[int, bytes]]:
    """(offset, record bytes) for every record: record i has offset ``chunk_id + i`` (§6)."""
    offset = chunk.chunk_id
    for entry in chunk.entries:
        records = (
            (entry.data,) if isinstance(entry, SimpleEntry) else entry.records(max_size=max_size)
        )
        for record in records:
            yield offset, record
            offset += 1
