"""Malformed batches: each kind of corruption is a RemoteProtocolError hinting CORRUPT_MESSAGE."""

from __future__ import annotations

import struct

import pytest
from kio.schema.errors import ErrorCode

from protocols._wire import FrameTooLarge, RemoteProtocolError, encode_varint
from protocols.kafka import (
    Compression,
    Record,
    decode_batch,
    encode_batch,
    iter_batches,
    parse_header,
    split_batches,
    verify_crc,
)

from .support import restamp_crc, sample_batch


def corrupt(batch: bytes | bytearray, match: str | None = None) -> RemoteProtocolError:
    with pytest.raises(RemoteProtocolError, match=match) as info:
        decode_batch(bytes(batch))
    assert info.value.hint is ErrorCode.corrupt_message
    return info.value


def with_field(batch: bytes, fmt: str, at: int, value: int) -> bytes:
    out = bytearray(batch)
    struct.pack_into(fmt, out, at, value)
    return restamp_crc(out)


def with_records(count: int, body: bytes, *, declared: int | None = None) -> bytes:
    """A batch whose records section is ``body`` (hand-made record bytes)."""
    shell = bytearray(sample_batch(1)[:61])
    struct.pack_into(">i", shell, 8, 49 + len(body))
    struct.pack_into(">i", shell, 57, count if declared is None else declared)
    return restamp_crc(shell + body)


def record(*fields: bytes) -> bytes:
    body = b"".join(fields)
    return encode_varint(len(body)) + body


def v(n: int) -> bytes:
    return encode_varint(n)


GOOD = record(b"\x00", v(0), v(0), v(1), b"k", v(1), b"v", v(0))


def test_hand_made_record_is_valid() -> None:
    _, records = decode_batch(with_records(1, GOOD))
    assert records == [Record(offset_delta=0, timestamp_delta=0, key=b"k", value=b"v")]


# --- header -----------------------------------------------------------------------------------


def test_short_input_is_not_a_batch() -> None:
    for n in (0, 1, 12, 60):
        corrupt(sample_batch(1)[:n], "shorter than its 61-byte header")


@pytest.mark.parametrize("magic", [0, 1, 3, 255])
def test_magic_other_than_2(magic: int) -> None:
    batch = bytearray(sample_batch(1))
    batch[16] = magic
    corrupt(batch, "magic")
    with pytest.raises(RemoteProtocolError, match="magic"):
        list(iter_batches(bytes(batch)))
    with pytest.raises(RemoteProtocolError, match="magic"):
        split_batches(bytes(batch[:20]))  # even in a partial tail, as Kafka does


def test_crc_mismatch() -> None:
    batch = bytearray(sample_batch(3))
    batch[-5] ^= 1  # inside the last value
    corrupt(batch, "CRC")
    # The codec can be told to skip the check (the broker already verified it).
    assert len(decode_batch(restamp_crc(batch), check_crc=False)[1]) == 3


@pytest.mark.parametrize("length", [-1, -(1 << 31), 0, 48])
def test_batch_length_below_the_header(length: int) -> None:
    batch = with_field(sample_batch(1), ">i", 8, length)
    corrupt(batch, "batchLength")
    with pytest.raises(RemoteProtocolError, match="batchLength"):
        split_batches(batch)


@pytest.mark.parametrize("extra", [1, 1000, None])
def test_batch_length_longer_than_the_data(extra: int | None) -> None:
    batch = sample_batch(2)
    claim = (1 << 31) - 1 if extra is None else len(batch) - 12 + extra
    wrong = with_field(batch, ">i", 8, claim)
    corrupt(wrong, "batchLength says")
    # Walking, it is a partial batch: more bytes may follow.
    assert bytes(split_batches(wrong)[1]) == wrong


@pytest.mark.parametrize("short", [1, 11, 100])
def test_batch_length_shorter_than_the_data(short: int) -> None:
    batch = sample_batch(20)
    wrong = with_field(batch, ">i", 8, len(batch) - 12 - short)
    corrupt(wrong, "batchLength says")
    # Walking, the batch ends early (and fails its CRC); the rest is a partial tail while it is
    # under 12 bytes, and from 17 bytes on its "magic" (a value byte here) is checked.
    if short < 12:
        ((_, view),) = split_batches(wrong)[0]
        assert not verify_crc(view)
        assert bytes(split_batches(wrong)[1]) == wrong[-short:]
    else:
        with pytest.raises(RemoteProtocolError):
            split_batches(wrong)


def test_oversized_batch_is_refused_before_it_arrives() -> None:
    batch = sample_batch(5)
    with pytest.raises(FrameTooLarge) as info:
        split_batches(batch[:20], max_batch_size=len(batch) - 1)
    assert info.value.hint is ErrorCode.message_too_large
    assert len(split_batches(batch, max_batch_size=len(batch))[0]) == 1


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_unknown_compression_codec(codec: int) -> None:
    corrupt(with_field(sample_batch(1), ">h", 21, codec), "compression codec")


def test_negative_records_count() -> None:
    corrupt(with_field(sample_batch(1), ">i", 57, -1), "negative recordsCount")


# --- records ----------------------------------------------------------------------------------


def test_records_count_larger_than_the_records() -> None:
    corrupt(with_records(2, GOOD), "truncated record")
    corrupt(with_records((1 << 31) - 1, GOOD * 3), "truncated record")  # no allocation by count


def test_records_count_smaller_than_the_records() -> None:
    corrupt(with_records(1, GOOD * 2), "bytes after the last of 1 records")
    corrupt(with_records(0, GOOD), "bytes after the last of 0 records")


@pytest.mark.parametrize(
    ("body", "match"),
    [
        (v(-1) + GOOD[1:], "record length -1"),
        (v(5) + GOOD[1:], "record length 5"),
        (v(len(GOOD) + 10) + GOOD[1:], "record length"),
        (record(b"\x00", v(0), v(0), v(-2), v(1), b"v", v(0)), "key length -2"),
        (record(b"\x00", v(0), v(0), v(50), b"k", v(1), b"v", v(0)), "key length 50"),
        (record(b"\x00", v(0), v(0), v(-1), v(-7), v(0)), "value length -7"),
        (record(b"\x00", v(0), v(0), v(-1), v(9), b"v", v(0)), "value length 9"),
        (record(b"\x00", v(0), v(0), v(-1), v(-1), v(-1)), "negative record header count"),
        (record(b"\x00", v(0), v(0), v(-1), v(-1), v(1), v(-1), v(-1)), "header key length"),
        (record(b"\x00", v(0), v(0), v(-1), v(-1), v(1), v(0), v(-3)), "header value length"),
        (record(b"\x00", v(0), v(0), v(-1), v(-1), v(1), v(0), v(5), b"x"), "header value of"),
        (record(b"\x00", v(0), v(0), v(-1), v(-1), v(9), v(0), v(-1)), "truncated record"),
        (record(b"\x00", v(0), v(0), v(-1), v(-1), v(0), b"\x00"), "fall short"),
        (record(b"\x00", v(0), v(0), v(-1), v(-1)), "record length 5"),
    ],
)
def test_malformed_record(body: bytes, match: str) -> None:
    corrupt(with_records(1, body), match)


@pytest.mark.parametrize(
    "body",
    [
        b"\xff" * 6 + b"\x01",  # record length varint longer than 5 bytes
        record(b"\x00", b"\xff" * 10 + b"\x01", v(0), v(-1), v(-1), v(0)),  # 11-byte varlong
        record(b"\x00", v(0), b"\xff" * 5 + b"\x01", v(-1), v(-1), v(0)),
        record(b"\x00", v(0), v(0), v(-1), v(-1), b"\xff" * 5 + b"\x01"),
        b"\x80",  # varint cut by the end of the data
        record(b"\x00", v(0), v(0), v(-1), v(-1))[:-1] + b"\xff",
    ],
)
def test_bad_varints(body: bytes) -> None:
    corrupt(with_records(1, body))


# --- compressed -------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", [c for c in Compression if c is not Compression.NONE])
def test_garbage_compressed_section(codec: Compression) -> None:
    batch = bytearray(sample_batch(20, codec))
    for at in range(61, len(batch), 7):
        batch[at] ^= 0x5A
    corrupt(restamp_crc(batch))
    corrupt(restamp_crc(batch[:70]))
    corrupt(restamp_crc(batch[:61]))


@pytest.mark.parametrize("codec", [c for c in Compression if c is not Compression.NONE])
def test_compressed_records_count_mismatch(codec: Compression) -> None:
    batch = sample_batch(5, codec)
    corrupt(with_field(batch, ">i", 57, 6), "truncated record")
    corrupt(with_field(batch, ">i", 57, 4), "after the last of 4 records")


@pytest.mark.parametrize("codec", [c for c in Compression if c is not Compression.NONE])
def test_decompression_bomb_is_refused(codec: Compression) -> None:
    records = [Record(offset_delta=0, timestamp_delta=0, key=None, value=bytes(4 << 20))]
    batch = encode_batch(records, base_timestamp_ms=0, compression=codec)
    assert len(batch) < 256 * 1024
    with pytest.raises(RemoteProtocolError, match="limit") as info:
        decode_batch(batch, max_decompressed_size=1 << 20)
    assert info.value.hint is ErrorCode.corrupt_message
    assert decode_batch(batch, max_decompressed_size=5 << 20)[1] == records


def test_header_parse_does_not_look_past_the_header() -> None:
    batch = sample_batch(2)
    header = parse_header(batch[:61] + b"junk")
    assert header.records_count == 2
