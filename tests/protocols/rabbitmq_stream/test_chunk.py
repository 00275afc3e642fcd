"""The Osiris chunk and the Publish/chunk entries (rabbitmq-stream.md §5, §6): captured frames
of rstream 1.1.1, rbfly 0.11.1 and the probe against RabbitMQ 3.10.8, sub-entry codecs, bombs."""

from __future__ import annotations

import contextlib
import gzip
import json
import struct
import zlib
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import cast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocols._wire import LocalProtocolError, RemoteProtocolError
from protocols.rabbitmq_stream.chunk import (
    HEADER_SIZE,
    Chunk,
    ChunkType,
    Compression,
    Entry,
    SimpleEntry,
    SubEntryBatch,
    TrackingRecord,
    TrackingType,
    decode_chunk,
    decode_entries,
    decode_entry,
    decode_tracking,
    encode_chunk,
    encode_entry,
    encode_tracking,
    iter_records,
    read_chunk,
    reencode_chunk,
)

VECTORS = Path(__file__).resolve().parents[2] / "vectors" / "rabbitmq_stream" / "chunk_frames.jsonl"
PUBLISH, DELIVER = 2, 8


def frames(key: int) -> list[tuple[str, bytes]]:
    """(capture file, whole frame) of every captured Publish or Deliver."""
    rows = [json.loads(line) for line in VECTORS.read_text().splitlines()]
    return [(r["file"], bytes.fromhex(r["hex"])) for r in rows if r["key"] == key]


def publish_items(frame: bytes) -> list[tuple[int, Entry, bytes]]:
    """Publish v1 (§5): size, key, version, publisher id, int32 n, n x (u64 id, entry)."""
    (count,) = struct.unpack_from(">i", frame, 9)
    pos = 13
    items = []
    for _ in range(count):
        (publishing_id,) = struct.unpack_from(">Q", frame, pos)
        entry, end = decode_entry(frame, pos + 8)
        items.append((publishing_id, entry, frame[pos + 8 : end]))
        pos = end
    assert pos == len(frame)
    return items


def deliver_chunk(frame: bytes) -> bytes:
    """Deliver v1 (§5): size, key, version, subscription id, then the chunk."""
    assert struct.unpack_from(">HH", frame, 4) == (DELIVER, 1)
    return frame[9:]


# --- captured frames --------------------------------------------------------------------------

# (Publish frames, Deliver frames, delivered records) per capture: a pin against lost vectors.
COUNTS = {
    "capture-probe-3.10.8.jsonl": (2, 3, 6),
    "capture-rbfly.jsonl": (4, 4, 6),
    "capture-rstream.jsonl": (3, 3, 7),
}


def test_capture_counts_are_pinned() -> None:
    publishes = Counter(f for f, _ in frames(PUBLISH))
    delivers = Counter(f for f, _ in frames(DELIVER))
    records: Counter[str] = Counter()
    for f, frame in frames(DELIVER):
        records[f] += len(list(iter_records(decode_chunk(deliver_chunk(frame)))))
    assert {f: (publishes[f], delivers[f], records[f]) for f in COUNTS} == COUNTS
    assert set(publishes) | set(delivers) == set(COUNTS)


@pytest.mark.parametrize("where,frame", frames(DELIVER))
def test_every_captured_chunk_decodes_and_reencodes(where: str, frame: bytes) -> None:
    raw = deliver_chunk(frame)
    chunk = decode_chunk(raw)
    assert reencode_chunk(chunk) == raw
    assert chunk.chunk_type is ChunkType.USER and chunk.epoch == 1
    assert chunk.crc == zlib.crc32(raw[HEADER_SIZE:])  # §6: zlib CRC-32 of the data only
    assert chunk.bloom_size == 0 and chunk.reserved == b"\0\0\0"  # 3.10.8, osiris 1.3.1
    assert chunk.trailer is None  # never sent to a default subscriber
    # A named publisher's chunk states its tracking trailer (1+1+len(ref)+8): rs-pub, rb-pub*.
    assert chunk.trailer_length in (0, 16, 17)
    again = encode_chunk(
        chunk.entries,
        chunk_id=chunk.chunk_id,
        timestamp_ms=chunk.timestamp_ms,
        epoch=chunk.epoch,
        trailer_length=chunk.trailer_length,
    )
    assert again == raw
    assert decode_chunk(memoryview(bytearray(raw))) == chunk


def test_the_gzip_chunk_fields() -> None:
    (raw,) = [deliver_chunk(f) for w, f in frames(DELIVER) if b"\x1f\x8b" in f]
    chunk = decode_chunk(raw)
    assert (chunk.chunk_id, chunk.timestamp_ms, chunk.num_records) == (4, 0x1A202C61962, 3)
    (batch,) = chunk.entries
    assert isinstance(batch, SubEntryBatch)
    assert (batch.compression, batch.record_count, batch.uncompressed_length) == (1, 3, 42)
    assert batch.records() == tuple(bytes.fromhex("005375a005") + b"sub-%d" % i for i in range(3))
    assert [o for o, _ in iter_records(chunk)] == [4, 5, 6]  # chunk id + i (§6)
    # rstream compresses with gzip.compress (level 9, mtime = now): the same call reproduces it.
    plain = b"".join(struct.pack(">I", len(r)) + r for r in batch.records())
    mtime = int.from_bytes(batch.data[4:8], "little")
    assert gzip.compress(plain, compresslevel=9, mtime=mtime) == batch.data


@pytest.mark.parametrize("where,frame", frames(PUBLISH))
def test_every_captured_publish_entry_reencodes(where: str, frame: bytes) -> None:
    for _, entry, raw in publish_items(frame):
        assert encode_entry(entry) == raw


def test_published_entries_are_delivered_unchanged() -> None:
    # The broker stores entries (sub-batches included) as sent (§6): pass-through is exact.
    for where in ("capture-rbfly.jsonl", "capture-rstream.jsonl"):
        sent = [
            raw for f, frame in frames(PUBLISH) if f == where for _, _, raw in publish_items(frame)
        ]
        stored = [
            encode_entry(e)
            for f, frame in frames(DELIVER)
            if f == where
            for e in decode_chunk(deliver_chunk(frame)).entries
        ]
        assert sent == stored


# --- sub-entry batches ------------------------------------------------------------------------

RECORDS = [b"", b"x", b"record %d " % 7 * 300, bytes(range(256))]


@pytest.mark.parametrize("codec", list(Compression))
def test_sub_entry_batches_round_trip(codec: Compression) -> None:
    batch = SubEntryBatch.build(RECORDS, codec)
    assert batch.records() == tuple(RECORDS)
    entry, end = decode_entry(encode_entry(batch))
    assert entry == batch and end == len(encode_entry(batch))
    chunk = decode_chunk(encode_chunk([batch, SimpleEntry(b"after")], chunk_id=9, timestamp_ms=1))
    assert [r for _, r in iter_records(chunk)] == [*RECORDS, b"after"]
    assert [o for o, _ in iter_records(chunk)] == list(range(9, 9 + len(RECORDS) + 1))


def test_gzip_is_rstreams_magic() -> None:
    assert SubEntryBatch.build([b"a"], Compression.GZIP).data[:2] == b"\x1f\x8b"
    assert SubEntryBatch.build([b"a"], Compression.SNAPPY).data[:4] == b"\xff\x06\x00\x00"


def batch_of(codec: Compression, plain: bytes, declared: int, count: int = 1) -> SubEntryBatch:
    packed = SubEntryBatch.build([plain], codec).data
    return SubEntryBatch(
        compression=codec, record_count=count, uncompressed_length=declared, data=packed
    )


@pytest.mark.parametrize("codec", [c for c in Compression if c is not Compression.NONE])
def test_decompression_is_bounded(codec: Compression) -> None:
    bomb = b"\0" * 4_000_000
    declared = len(bomb) + 4
    with pytest.raises(RemoteProtocolError, match="limit"):
        batch_of(codec, bomb, declared).records(max_size=1 << 20)
    # A batch that inflates past what its header says stops at the declared size + 1.
    with pytest.raises(RemoteProtocolError, match=r"more than|longer than"):
        batch_of(codec, bomb, 1000).records()
    with pytest.raises(RemoteProtocolError):
        batch_of(codec, b"abc", 1000).records()  # shorter than declared
    with pytest.raises(RemoteProtocolError):
        SubEntryBatch(
            compression=codec, record_count=1, uncompressed_length=9, data=b"junk"
        ).records()


def test_sub_entry_records_must_fill_the_batch() -> None:
    plain = struct.pack(">I", 2) + b"ab"
    ok = SubEntryBatch(compression=0, record_count=1, uncompressed_length=6, data=plain)
    assert ok.records() == (b"ab",)
    for count in (0, 2):
        with pytest.raises(RemoteProtocolError):
            SubEntryBatch(
                compression=0, record_count=count, uncompressed_length=6, data=plain
            ).records()
    long = struct.pack(">I", 99) + b"ab"
    with pytest.raises(RemoteProtocolError, match="past the end"):
        SubEntryBatch(compression=0, record_count=1, uncompressed_length=6, data=long).records()


def test_unknown_codecs_pass_through_but_do_not_inflate() -> None:
    odd = SubEntryBatch(compression=6, record_count=2, uncompressed_length=8, data=b"opaque")
    raw = encode_entry(odd)
    assert raw[0] == 0x80 | 6 << 4 and decode_entry(raw) == (odd, len(raw))
    with pytest.raises(RemoteProtocolError, match="compression 6"):
        odd.records()
    with pytest.raises(LocalProtocolError):
        SubEntryBatch.build([b"a"], cast(Compression, 6))
    with pytest.raises(LocalProtocolError):
        encode_entry(SubEntryBatch(compression=8, record_count=0, uncompressed_length=0, data=b""))


# --- malformed chunks -------------------------------------------------------------------------

SAMPLE = encode_chunk(
    [SimpleEntry(b"one"), SubEntryBatch.build([b"a", b"b"], Compression.GZIP)],
    chunk_id=100,
    timestamp_ms=1_700_000_000_000,
    trailer_length=16,
)


def test_every_truncation_is_refused() -> None:
    for n in range(len(SAMPLE)):
        with pytest.raises(RemoteProtocolError):
            decode_chunk(SAMPLE[:n])


def test_crc_and_header_checks() -> None:
    flipped = bytearray(SAMPLE)
    flipped[-1] ^= 1
    with pytest.raises(RemoteProtocolError, match="CRC"):
        decode_chunk(bytes(flipped))
    decode_chunk(bytes(flipped), verify_crc=False)  # the body still parses
    with pytest.raises(RemoteProtocolError, match="magic"):
        decode_chunk(b"\x51" + SAMPLE[1:])
    counted = bytearray(SAMPLE)
    counted[4:8] = struct.pack(">I", 4)
    with pytest.raises(RemoteProtocolError, match="records"):
        decode_chunk(bytes(counted))
    entries = bytearray(SAMPLE)
    entries[2:4] = struct.pack(">H", 1)
    with pytest.raises(RemoteProtocolError, match="after 1 entries"):
        decode_chunk(bytes(entries))
    with pytest.raises(RemoteProtocolError, match="after the chunk data"):
        decode_chunk(SAMPLE + b"\0")


def test_a_trailer_when_sent() -> None:
    # chunk_selector=all (§6): header + data + trailer; a named publisher's tracking record.
    trailer = encode_tracking([TrackingRecord(TrackingType.SEQUENCE, b"rs-pub", 7)])
    assert len(trailer) == 16
    raw = encode_chunk([SimpleEntry(b"x")], chunk_id=0, timestamp_ms=0, trailer=trailer)
    chunk = decode_chunk(raw)
    assert chunk.trailer == trailer and chunk.trailer_length == 16
    assert decode_tracking(chunk.trailer) == (TrackingRecord(0, b"rs-pub", 7),)
    assert reencode_chunk(chunk) == raw
    for n in range(1, len(trailer)):
        with pytest.raises(RemoteProtocolError):
            decode_tracking(trailer[:n])


def test_tracking_delta_chunk_type_is_kept() -> None:
    body = encode_tracking([TrackingRecord(TrackingType.OFFSET, b"ref", 6)])
    raw = encode_chunk([SimpleEntry(body)], chunk_id=3, timestamp_ms=0, chunk_type=1)
    chunk = decode_chunk(raw)
    assert chunk.chunk_type is ChunkType.TRACKING_DELTA
    odd = decode_chunk(raw[:1] + b"\x07" + raw[2:])
    assert odd.chunk_type == 7 and reencode_chunk(odd) == raw[:1] + b"\x07" + raw[2:]


def test_read_chunk_gives_the_header_and_the_entries_bytes() -> None:
    # What a client that passes entries on reads: nothing decoded, the trailer left out.
    trailer = encode_tracking([TrackingRecord(TrackingType.SEQUENCE, b"ref", 3)])
    entries: list[Entry] = [SimpleEntry(b"a"), SubEntryBatch.build([b"b", b"c"], Compression.GZIP)]
    raw = encode_chunk(entries, chunk_id=9, timestamp_ms=1234, trailer=trailer)
    header, body = read_chunk(raw)
    assert (header.chunk_id, header.entries, header.records, header.next_offset) == (9, 2, 3, 12)
    assert (header.timestamp_ms, header.trailer_length, header.chunk_type) == (1234, 13, 0)
    assert bytes(body) == b"".join(encode_entry(e) for e in entries)
    assert read_chunk(raw[: -len(trailer)])[1] == body  # as a default subscriber gets it
    for n in range(HEADER_SIZE + len(body)):
        with pytest.raises(RemoteProtocolError):
            read_chunk(raw[:n])
    flipped = bytearray(raw)
    flipped[HEADER_SIZE] ^= 1
    with pytest.raises(RemoteProtocolError, match="CRC"):
        read_chunk(bytes(flipped))


def test_encode_refuses_what_does_not_fit() -> None:
    with pytest.raises(LocalProtocolError):
        encode_chunk([], chunk_id=-1, timestamp_ms=0)
    with pytest.raises(LocalProtocolError):
        encode_tracking([TrackingRecord(0, b"x" * 256, 0)])


# --- properties -------------------------------------------------------------------------------

entries_st: st.SearchStrategy[Entry] = st.one_of(
    st.binary(max_size=64).map(SimpleEntry),
    st.builds(
        SubEntryBatch.build,
        st.lists(st.binary(max_size=32), max_size=5),
        st.sampled_from(list(Compression)),
    ),
)


@given(
    entries=st.lists(entries_st, max_size=6),
    chunk_id=st.integers(0, 2**64 - 1),
    timestamp_ms=st.integers(-(2**63), 2**63 - 1),
    epoch=st.integers(0, 2**64 - 1),
    trailer_length=st.integers(0, 2**32 - 1),
)
def test_chunks_round_trip(
    entries: list[Entry], chunk_id: int, timestamp_ms: int, epoch: int, trailer_length: int
) -> None:
    raw = encode_chunk(
        entries,
        chunk_id=chunk_id,
        timestamp_ms=timestamp_ms,
        epoch=epoch,
        trailer_length=trailer_length,
    )
    chunk = decode_chunk(raw)
    assert chunk == Chunk(
        chunk_type=ChunkType.USER,
        chunk_id=chunk_id,
        timestamp_ms=timestamp_ms,
        epoch=epoch,
        entries=tuple(entries),
        num_records=chunk.num_records,
        crc=zlib.crc32(raw[HEADER_SIZE:]),
        trailer_length=trailer_length,
    )
    assert reencode_chunk(chunk) == raw
    assert decode_entries(raw[HEADER_SIZE:], len(entries)) == tuple(entries)


def only_remote_errors(call: Callable[[], object]) -> None:
    with contextlib.suppress(RemoteProtocolError):
        call()


@given(st.binary(max_size=200))
def test_fuzz_bytes_decode_or_raise_the_protocol_error(data: bytes) -> None:
    only_remote_errors(lambda: decode_chunk(data))
    only_remote_errors(lambda: decode_entry(data))
    only_remote_errors(lambda: decode_tracking(data))
    only_remote_errors(lambda: decode_entries(data, len(data) % 5))


@given(st.binary(max_size=200), st.integers(0, 7), st.integers(0, 300))
def test_fuzz_past_the_crc(body: bytes, codec: int, declared: int) -> None:
    # A header that matches the body (CRC, length), so the entry parser sees arbitrary bytes.
    header = bytearray(SAMPLE[:HEADER_SIZE])
    header[32:40] = struct.pack(">II", zlib.crc32(body), len(body))
    only_remote_errors(lambda: decode_chunk(bytes(header) + body))
    batch = SubEntryBatch(
        compression=codec, record_count=2, uncompressed_length=declared, data=body
    )
    only_remote_errors(batch.records)
