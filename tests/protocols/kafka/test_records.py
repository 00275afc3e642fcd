"""RecordBatch v2 against the batches real producers sent, plus batch walking and stamping."""

from __future__ import annotations

import re

import pytest

from protocols._wire import LocalProtocolError, RemoteProtocolError
from protocols.kafka import (
    HEADER_SIZE,
    Compression,
    Record,
    TimestampType,
    batch_attributes,
    decode_batch,
    decode_records,
    encode_batch,
    iter_batches,
    parse_header,
    set_base_offset,
    set_log_append_time,
    set_producer,
    split_batches,
    verify_crc,
)

from .support import BASE_TS, CODECS, Captured, captured, restamp_crc, same_header, sample_batch

CAPTURED = captured()
# What the capture sessions produced (tests/vectors/kafka/README.md): keys k<n> with values
# v<n> and header h=x, or no key with "hello world ..." / "xxx..." / "a" values.
PLAUSIBLE_VALUE = re.compile(rb"v\d+|hello world \d+.*|x+|a", re.DOTALL)


# --- golden vectors ---------------------------------------------------------------------------


def test_the_vectors_cover_every_codec_and_both_directions() -> None:
    codecs = {h.compression for c in CAPTURED for h, _ in iter_batches(c.records)}
    assert codecs == set(Compression)
    frames = [where for c in CAPTURED for where in (c.where, *c.also)]
    assert sum(" req api 0 " in f for f in frames) >= 30
    assert sum(" resp api 1 " in f for f in frames) >= 20
    assert {c.client_id for c in CAPTURED} >= {
        "rdkafka",
        "kafka-python-producer-1",
        "aiokafka-producer-1",
    }


@pytest.mark.parametrize("vector", CAPTURED, ids=[c.where for c in CAPTURED])
def test_captured_batch_decodes_and_re_encodes(vector: Captured) -> None:
    batches, truncated = split_batches(vector.records)
    assert batches and not truncated
    for header, batch in batches:
        assert header.magic == 2 and verify_crc(batch)
        assert header.size == len(batch)
        records = decode_records(header, batch)
        assert len(records) == header.records_count > 0
        assert [r.offset_delta for r in records] == list(range(len(records)))
        assert header.last_offset_delta == len(records) - 1
        stamps = [header.timestamp_of(r) for r in records]
        assert stamps[0] == header.base_timestamp and max(stamps) == header.max_timestamp
        for record in records:
            assert record.attributes == 0
            assert record.value is not None and PLAUSIBLE_VALUE.fullmatch(record.value)
            if record.key is not None:
                assert record.key == b"k" + record.value[1:]
            assert record.headers in ((), (("h", b"x"),))

        again = encode_batch(records, **same_header(header))
        if header.compression is Compression.NONE:
            assert again == bytes(batch)
        else:
            # Compressed bytes depend on the compressor; everything else must match.
            new_header, new_records = decode_batch(again)
            assert new_records == records
            assert new_header.compression is header.compression
            assert same_header(new_header) == same_header(header)
            assert new_header.records_count == header.records_count


def test_fetch_response_batches_equal_produced_ones_after_stamping() -> None:
    # Tansu returned the produced bytes; restamping offset 0 / same epoch is the identity.
    for vector in CAPTURED:
        for header, batch in iter_batches(vector.records):
            stamped = set_base_offset(
                batch, header.base_offset, partition_leader_epoch=header.partition_leader_epoch
            )
            assert stamped == bytes(batch)


# --- walking ----------------------------------------------------------------------------------


def three_batches() -> list[bytes]:
    return [
        sample_batch(3, base_offset=0),
        sample_batch(5, Compression.ZSTD, base_offset=3),
        sample_batch(1, Compression.GZIP, base_offset=8),
    ]


def test_iter_batches_splits_concatenated_batches_without_copying() -> None:
    parts = three_batches()
    data = b"".join(parts)
    walker = iter_batches(data)
    found = list(walker)
    assert [bytes(view) for _, view in found] == parts
    assert [h.base_offset for h, _ in found] == [0, 3, 8]
    assert [h.compression.name for h, _ in found] == ["NONE", "ZSTD", "GZIP"]
    assert all(view.obj is data for _, view in found)
    assert len(walker.truncated) == 0
    assert list(iter_batches(b"")) == []


@pytest.mark.parametrize("cut", [1, 11, 12, 16, 17, 60, 61, 100, -1])
def test_partial_trailing_batch_is_reported_not_raised(cut: int) -> None:
    parts = three_batches()
    tail = parts[1][:cut]
    batches, truncated = split_batches(b"".join(parts[:1] + parts[2:]) + tail)
    assert [bytes(view) for _, view in batches] == [parts[0], parts[2]]
    assert bytes(truncated) == tail


def test_iter_batches_accepts_memoryview_and_bytearray() -> None:
    data = b"".join(three_batches())
    for form in (memoryview(data), bytearray(data), memoryview(data)[0:]):
        assert [bytes(v) for _, v in iter_batches(form)] == three_batches()
    batch = three_batches()[0]
    assert decode_batch(bytearray(batch)) == decode_batch(memoryview(batch)) == decode_batch(batch)


def test_header_fields_and_attribute_helpers() -> None:
    batch = sample_batch(
        4,
        Compression.LZ4,
        base_offset=41,
        partition_leader_epoch=7,
        producer_id=1234,
        producer_epoch=3,
        base_sequence=99,
        transactional=True,
    )
    header = parse_header(batch)
    assert header.base_offset == 41 and header.partition_leader_epoch == 7
    assert header.batch_length == len(batch) - 12 and header.size == len(batch)
    assert header.compression is Compression.LZ4
    assert header.timestamp_type is TimestampType.CREATE_TIME
    assert header.is_transactional and not header.is_control and not header.has_delete_horizon
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (1234, 3, 99)
    assert header.records_count == 4 and header.last_offset_delta == 3
    assert header.last_offset == 44
    assert header.attributes == batch_attributes(Compression.LZ4, transactional=True) == 0x13
    assert batch_attributes(timestamp_type=TimestampType.LOG_APPEND_TIME, control=True) == 0x28


# --- stamping ---------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
def test_set_base_offset_keeps_the_crc_valid(codec: Compression) -> None:
    batch = sample_batch(6, codec)
    stamped = set_base_offset(batch, 1 << 40, partition_leader_epoch=12)
    assert verify_crc(stamped) and stamped[17:] == batch[17:]
    header, records = decode_batch(stamped)
    assert header.base_offset == 1 << 40 and header.partition_leader_epoch == 12
    assert [header.offset_of(r) for r in records] == [(1 << 40) + i for i in range(6)]
    assert set_base_offset(memoryview(stamped), 5)[12:16] == (12).to_bytes(4, "big")


def test_set_log_append_time_rewrites_timestamps_and_crc() -> None:
    batch = sample_batch(5)
    appended = set_log_append_time(batch, BASE_TS + 999)
    assert verify_crc(appended) and not verify_crc(appended[:17] + batch[17:21] + appended[21:])
    header, records = decode_batch(appended)
    assert header.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert [header.timestamp_of(r) for r in records] == [BASE_TS + 999] * 5
    assert decode_batch(batch)[1] == records


def test_set_producer_rewrites_the_producer_fields_and_crc_only() -> None:
    batch = encode_batch(
        [Record(offset_delta=0, timestamp_delta=0, key=b"k", value=b"v")],
        base_timestamp_ms=BASE_TS,
        producer_id=77,
        producer_epoch=3,
        base_sequence=12,
    )
    cleared = set_producer(batch)
    assert verify_crc(cleared) and len(cleared) == len(batch)
    header = parse_header(cleared)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (-1, -1, -1)
    assert cleared[HEADER_SIZE:] == batch[HEADER_SIZE:] and cleared[:17] == batch[:17]
    assert set_producer(cleared, 77, 3, 12) == batch
    with pytest.raises(LocalProtocolError):
        set_producer(batch, 1 << 63)


def test_stamping_refuses_non_batches_and_out_of_range_values() -> None:
    with pytest.raises(LocalProtocolError):
        set_base_offset(b"\x00" * 60, 1)
    with pytest.raises(LocalProtocolError):
        set_base_offset(sample_batch(1), 1 << 63)
    with pytest.raises(LocalProtocolError):
        set_log_append_time(sample_batch(1), -(1 << 64))


def test_verify_crc_detects_any_changed_byte_after_the_crc() -> None:
    batch = sample_batch(2)
    assert verify_crc(batch)
    assert not verify_crc(batch[:60])
    for at in (21, 30, HEADER_SIZE, len(batch) - 1):
        broken = bytearray(batch)
        broken[at] ^= 0x40
        assert not verify_crc(broken)
        assert verify_crc(restamp_crc(broken))
    with pytest.raises(RemoteProtocolError, match="CRC"):
        decode_batch(bytes(broken))


# --- encoding details -------------------------------------------------------------------------


def test_encode_computes_length_last_offset_and_max_timestamp() -> None:
    records = [
        Record(offset_delta=0, timestamp_delta=5, key=None, value=b""),
        Record(offset_delta=2, timestamp_delta=-3, key=b"", value=None),
    ]
    header, decoded = decode_batch(encode_batch(records, base_timestamp_ms=BASE_TS))
    assert decoded == records
    assert header.last_offset_delta == 2 and header.max_timestamp == BASE_TS + 5
    assert header.partition_leader_epoch == -1 and header.producer_id == -1
    assert (header.base_sequence, header.producer_epoch) == (-1, -1)


def test_encode_empty_batch_needs_explicit_last_offset_delta() -> None:
    with pytest.raises(LocalProtocolError):
        encode_batch([], base_timestamp_ms=BASE_TS)
    # Compaction can leave an empty batch that keeps its offset range (kafka.md §3.1).
    header, records = decode_batch(encode_batch([], base_timestamp_ms=0, last_offset_delta=9))
    assert records == [] and header.last_offset_delta == 9 and header.records_count == 0


@pytest.mark.parametrize("codec", CODECS)
def test_empty_batch_has_no_body_whatever_the_codec(codec: Compression) -> None:
    batch = encode_batch([], base_timestamp_ms=0, last_offset_delta=3, compression=codec)
    assert len(batch) == HEADER_SIZE and parse_header(batch).compression is Compression.NONE
    flagged = restamp_crc(batch[:21] + bytes((0, codec)) + batch[23:])
    header, records = decode_batch(flagged)
    assert records == [] and header.compression is codec and header.last_offset == 3


def test_log_append_time_batch_needs_max_timestamp() -> None:
    records = [Record(offset_delta=0, timestamp_delta=0, key=None, value=b"v")]
    with pytest.raises(LocalProtocolError):
        encode_batch(records, base_timestamp_ms=0, timestamp_type=TimestampType.LOG_APPEND_TIME)
    header, _ = decode_batch(
        encode_batch(
            records,
            base_timestamp_ms=0,
            timestamp_type=TimestampType.LOG_APPEND_TIME,
            max_timestamp_ms=77,
        )
    )
    assert header.timestamp_type is TimestampType.LOG_APPEND_TIME and header.max_timestamp == 77


@pytest.mark.parametrize(
    "record",
    [
        Record(offset_delta=1 << 31, timestamp_delta=0, key=None, value=None),
        Record(offset_delta=0, timestamp_delta=1 << 63, key=None, value=None),
        Record(offset_delta=0, timestamp_delta=0, key=None, value=None, attributes=256),
        Record(offset_delta=0, timestamp_delta=0, key=None, value=None, headers=(("\ud800", b""),)),
    ],
)
def test_encode_refuses_what_the_format_cannot_carry(record: Record) -> None:
    with pytest.raises(LocalProtocolError):
        encode_batch([record], base_timestamp_ms=0)


def test_encode_refuses_out_of_range_header_fields() -> None:
    record = Record(offset_delta=0, timestamp_delta=0, key=None, value=None)
    with pytest.raises(LocalProtocolError):
        encode_batch([record], base_timestamp_ms=0, producer_epoch=1 << 15)


def test_non_utf8_header_keys_survive_a_round_trip() -> None:
    # Java decodes header keys leniently; the gateway must forward such bytes unchanged.
    good = encode_batch(
        [Record(offset_delta=0, timestamp_delta=0, key=None, value=None, headers=(("ab", b""),))],
        base_timestamp_ms=0,
    )
    raw = restamp_crc(good.replace(b"ab", b"\xff\xfe"))
    header, records = decode_batch(raw)
    assert records[0].headers == (("\udcff\udcfe", b""),)
    assert encode_batch(records, **same_header(header)) == raw
