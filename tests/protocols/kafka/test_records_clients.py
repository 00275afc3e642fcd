"""Cross-checks with the real client libraries' record codecs (aiokafka 0.14, kafka-python 3.0):
they read what we encode, and we read what their batch builders produce, for every codec.
"""

from __future__ import annotations

import io
import random
import types
import warnings
from collections.abc import Iterator
from typing import Any

import cramjam
import pytest
from aiokafka.record.default_records import (  # type: ignore[import-untyped]
    DefaultRecordBatchBuilder as AioBuilder,
)
from aiokafka.record.memory_records import (  # type: ignore[import-untyped]
    MemoryRecords as AioMemoryRecords,
)

from protocols.kafka import (
    Compression,
    Record,
    TimestampType,
    decode_batch,
    encode_batch,
    set_log_append_time,
)

from .support import BASE_TS, CODECS, sample_records

with warnings.catch_warnings():
    # kafka-python 3.0 loads its protocol schemas with deprecated importlib.resources calls.
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.codec  # type: ignore[import-untyped]
    import kafka.record.default_records as kp_default_records  # type: ignore[import-untyped]
    from kafka.record.memory_records import (  # type: ignore[import-untyped]
        MemoryRecords as KpMemoryRecords,
    )

# --- kafka-python without its optional codec packages -----------------------------------------
# kafka-python needs python-snappy, lz4 and zstandard for those codecs, and none is a project
# dependency; these stand-ins give it cramjam's raw codecs under the APIs it calls. Its batch
# framing and its xerial snappy chunking stay kafka-python's own code. The lz4 stand-in writes
# cramjam's default frame (linked blocks, content checksum): another flavour than ours.


class _Snappy:
    @staticmethod
    def compress(data: bytes) -> bytes:
        return bytes(cramjam.snappy.compress_raw(data))

    @staticmethod
    def decompress(data: bytes) -> bytes:
        return bytes(cramjam.snappy.decompress_raw(data))


class _ZstdCompressor:
    def compress(self, data: bytes) -> bytes:
        return bytes(cramjam.zstd.compress(data, level=3))


class _ZstdDecompressor:
    def stream_reader(self, source: io.BytesIO, read_across_frames: bool = True) -> io.BytesIO:
        return io.BytesIO(bytes(cramjam.zstd.decompress(source.read())))


@pytest.fixture
def kafka_python_codecs(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(kafka.codec, "snappy", _Snappy)
    zstd = types.SimpleNamespace(ZstdCompressor=_ZstdCompressor, ZstdDecompressor=_ZstdDecompressor)
    monkeypatch.setattr(kafka.codec, "zstd", zstd)
    monkeypatch.setattr(kafka.codec, "lz4", types.SimpleNamespace())
    monkeypatch.setattr(
        kp_default_records, "lz4_encode", lambda data: bytes(cramjam.lz4.compress(data))
    )
    monkeypatch.setattr(
        kp_default_records, "lz4_decode", lambda data: bytes(cramjam.lz4.decompress(data))
    )
    yield


def compressible_records() -> list[Record]:
    # Clients send a batch uncompressed when compression does not shrink it; make sure it does.
    records = sample_records(40, value_size=300)
    records[3] = Record(offset_delta=3, timestamp_delta=-5, key=b"", value=None)
    return records


def their_records(memory_records: Any) -> tuple[Any, list[Any]]:
    batch = memory_records.next_batch()
    assert batch is not None and batch.validate_crc()
    assert memory_records.next_batch() is None
    return batch, list(batch)


def assert_same(ours: list[Record], theirs: list[Any], *, base_offset: int, ts: int) -> None:
    assert len(theirs) == len(ours)
    for mine, other in zip(ours, theirs, strict=True):
        assert other.offset == base_offset + mine.offset_delta
        assert other.timestamp == ts + mine.timestamp_delta
        assert other.key == mine.key and other.value == mine.value
        assert [tuple(h) for h in other.headers] == list(mine.headers)


# --- they read ours ---------------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
def test_aiokafka_reads_our_batches(codec: Compression) -> None:
    records = compressible_records()
    batch = encode_batch(
        records, base_offset=1000, base_timestamp_ms=BASE_TS, compression=codec, producer_id=7,
        producer_epoch=1, base_sequence=50,
    )  # fmt: skip
    theirs_batch, theirs = their_records(AioMemoryRecords(batch))
    assert theirs_batch.compression_type == codec
    assert (theirs_batch.producer_id, theirs_batch.base_sequence) == (7, 50)
    assert theirs_batch.next_offset == 1000 + len(records)
    assert_same(records, theirs, base_offset=1000, ts=BASE_TS)


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_reads_our_batches(codec: Compression, kafka_python_codecs: None) -> None:
    records = compressible_records()
    batch = encode_batch(records, base_offset=5, base_timestamp_ms=BASE_TS, compression=codec)
    theirs_batch, theirs = their_records(KpMemoryRecords(batch))
    assert theirs_batch.compression_type == codec
    assert_same(records, theirs, base_offset=5, ts=BASE_TS)


def test_clients_read_log_append_time_from_max_timestamp() -> None:
    batch = set_log_append_time(encode_batch(sample_records(3), base_timestamp_ms=BASE_TS), 42)
    for reader in (AioMemoryRecords, KpMemoryRecords):
        theirs_batch, theirs = their_records(reader(batch))
        assert theirs_batch.timestamp_type == TimestampType.LOG_APPEND_TIME
        assert [r.timestamp for r in theirs] == [42, 42, 42]


# --- we read theirs ---------------------------------------------------------------------------


def fill(builder: Any, records: list[Record]) -> bytes:
    for r in records:
        builder.append(r.offset_delta, BASE_TS + r.timestamp_delta, r.key, r.value, list(r.headers))
    return bytes(builder.build())


def check_ours(batch: bytes, codec: Compression, records: list[Record]) -> None:
    header, decoded = decode_batch(batch)
    assert header.compression is codec
    # Their builders take the first record's timestamp as the base: shift our deltas to it.
    shift = header.base_timestamp - BASE_TS
    expected = [
        Record(
            offset_delta=r.offset_delta,
            timestamp_delta=r.timestamp_delta - shift,
            key=r.key,
            value=r.value,
            headers=r.headers,
        )
        for r in records
    ]
    assert decoded == expected
    assert header.max_timestamp == BASE_TS + max(r.timestamp_delta for r in records)
    assert header.last_offset_delta == len(records) - 1


@pytest.mark.parametrize("codec", CODECS)
def test_we_read_aiokafka_batches(codec: Compression) -> None:
    records = compressible_records()
    batch = fill(AioBuilder(2, codec, 0, -1, -1, -1, 1 << 24), records)
    if codec is Compression.SNAPPY:
        assert batch[61:69] == b"\x82SNAPPY\x00"  # aiokafka frames snappy like Java
    check_ours(batch, codec, records)


@pytest.mark.parametrize("codec", CODECS)
def test_we_read_kafka_python_batches(codec: Compression, kafka_python_codecs: None) -> None:
    records = compressible_records()
    builder = kp_default_records.DefaultRecordBatchBuilder(
        magic=2, compression_type=codec, is_transactional=False, producer_id=-1,
        producer_epoch=-1, base_sequence=-1, batch_size=1 << 24,
    )  # fmt: skip
    batch = fill(builder, records)
    if codec is Compression.SNAPPY:
        assert batch[61:69] == b"\x82SNAPPY\x00"
    check_ours(batch, codec, records)


def test_we_read_a_multi_block_xerial_batch_from_aiokafka() -> None:
    # ~130 kB that compresses about 2:1, so several 32 KiB xerial blocks.
    noise = random.Random(7)
    records = [
        Record(
            offset_delta=i, timestamp_delta=i, key=None, value=noise.randbytes(200).hex().encode()
        )
        for i in range(300)
    ]
    batch = fill(AioBuilder(2, Compression.SNAPPY, 0, -1, -1, -1, 1 << 24), records)
    assert batch.count(b"\x82SNAPPY") == 1 and len(batch) > 32768
    check_ours(batch, Compression.SNAPPY, records)
