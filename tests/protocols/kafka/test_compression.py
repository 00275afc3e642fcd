"""The four batch codecs (kafka.md §3.4): both snappy framings, multi-member gzip, bomb guards."""

from __future__ import annotations

import gzip
import os
import struct
from typing import cast

import cramjam
import pytest
from kio.schema.errors import ErrorCode

from protocols._wire import LocalProtocolError, RemoteProtocolError, encode_uvarint
from protocols.kafka import Compression, compress, decompress
from protocols.kafka.compression import XERIAL_MAGIC

COMPRESSED = [c for c in Compression if c is not Compression.NONE]
TEXT = b"".join(b"record %d: hello world " % i for i in range(5000))  # ~120 kB, compressible


def refused(codec: Compression, data: bytes, match: str, limit: int = 1 << 20) -> None:
    with pytest.raises(RemoteProtocolError, match=match) as info:
        decompress(codec, data, max_size=limit)
    assert info.value.hint is ErrorCode.corrupt_message


@pytest.mark.parametrize("codec", COMPRESSED)
@pytest.mark.parametrize(
    "data", [b"", b"x", TEXT, os.urandom(70_000)], ids=["0", "1", "text", "random"]
)
def test_round_trip(codec: Compression, data: bytes) -> None:
    packed = compress(codec, data)
    assert decompress(codec, packed) == data
    assert decompress(codec, memoryview(packed)) == data
    assert decompress(codec, packed, max_size=len(data)) == data


def test_magic_bytes_are_the_ones_seen_on_the_wire() -> None:
    assert compress(Compression.GZIP, TEXT)[:2] == b"\x1f\x8b"
    assert compress(Compression.LZ4, TEXT)[:4] == bytes.fromhex("04224d18")
    assert compress(Compression.ZSTD, TEXT)[:4] == bytes.fromhex("28b52ffd")
    # Raw snappy starts with the inflated length (librdkafka's form).
    assert compress(Compression.SNAPPY, TEXT)[:3] == encode_uvarint(len(TEXT))
    assert compress(Compression.SNAPPY, TEXT, xerial=True)[:8] == XERIAL_MAGIC


def test_lz4_blocks_are_independent() -> None:
    # FLG byte: version 01 and the block-independence bit (Kafka's reader refuses linked blocks).
    flg = compress(Compression.LZ4, TEXT)[4]
    assert flg >> 6 == 1 and flg & 0x20


def test_gzip_is_deterministic_and_levels_apply() -> None:
    assert compress(Compression.GZIP, TEXT) == compress(Compression.GZIP, TEXT)
    assert len(compress(Compression.GZIP, TEXT, level=1)) > len(compress(Compression.GZIP, TEXT))
    assert compress(Compression.ZSTD, TEXT, level=1) != compress(Compression.ZSTD, TEXT)


def test_no_codec_for_none_or_unknown_numbers() -> None:
    for codec in (Compression.NONE, cast(Compression, 5)):
        with pytest.raises(LocalProtocolError):
            compress(codec, b"")
        with pytest.raises(LocalProtocolError):
            decompress(codec, b"")
    assert decompress(cast(Compression, 1), compress(cast(Compression, 1), b"ok")) == b"ok"


# --- snappy -----------------------------------------------------------------------------------


def xerial(*blocks: bytes, version: bytes = struct.pack(">ii", 1, 1)) -> bytes:
    return XERIAL_MAGIC + version + b"".join(struct.pack(">i", len(b)) + b for b in blocks)


def test_xerial_chunks_of_32k() -> None:
    framed = compress(Compression.SNAPPY, TEXT, xerial=True)
    blocks = 0
    pos = 16
    while pos < len(framed):
        (size,) = struct.unpack_from(">i", framed, pos)
        assert len(cramjam.snappy.decompress_raw(framed[pos + 4 : pos + 4 + size])) <= 32768
        pos += 4 + size
        blocks += 1
    assert blocks == -(-len(TEXT) // 32768)
    assert decompress(Compression.SNAPPY, framed) == TEXT


def test_xerial_header_version_is_not_checked() -> None:
    # Redpanda writes version/compat little-endian (kafka-python #2414); only the magic counts.
    block = bytes(cramjam.snappy.compress_raw(b"abc"))
    assert decompress(Compression.SNAPPY, xerial(block, version=struct.pack("<ii", 1, 1))) == b"abc"
    assert decompress(Compression.SNAPPY, xerial()) == b""


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (XERIAL_MAGIC + b"\x00\x00\x00\x01", "truncated xerial header"),
        (xerial() + b"\x00\x00", "truncated xerial block length"),
        (xerial() + struct.pack(">i", -1), "xerial block of -1 bytes"),
        (xerial() + struct.pack(">i", 10) + b"abc", "xerial block of 10 bytes"),
        (xerial(b"\x05abc"), "snappy"),
        (xerial(b""), "snappy"),
        (b"", "snappy"),
        (b"\xff\xff\xff\xff\xff\xff", "snappy"),
        (encode_uvarint(10) + b"\x00", "snappy"),
    ],
)
def test_bad_snappy(data: bytes, match: str) -> None:
    refused(Compression.SNAPPY, data, match)


def test_snappy_declared_length_is_checked_before_inflating() -> None:
    # A raw block that claims 4 GiB: refused on its preamble, nothing allocated.
    refused(Compression.SNAPPY, encode_uvarint(0xFFFFFFFF) + b"\x00" * 10, "limit")
    block = bytes(cramjam.snappy.compress_raw(bytes(600_000)))
    refused(Compression.SNAPPY, xerial(block, block), "limit")  # the limit spans the blocks


# --- gzip -------------------------------------------------------------------------------------


def test_gzip_concatenated_members_are_read_like_java() -> None:
    members = gzip.compress(b"first ") + gzip.compress(b"second")
    assert decompress(Compression.GZIP, members) == b"first second"


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x1f\x8b",
        # mtime=0: a test id made of the bytes must be the same in every pytest-xdist worker
        gzip.compress(TEXT, mtime=0)[:-9],
        gzip.compress(b"x", mtime=0) + b"junk!",
        b"not gzip at all",
        gzip.compress(b"x", mtime=0)[:-4] + b"\x00\x00\x00\x00",  # wrong length in the trailer
    ],
    ids=["empty", "magic-only", "truncated", "junk-after-member", "not-gzip", "wrong-length"],
)
def test_bad_gzip(data: bytes) -> None:
    refused(Compression.GZIP, data, "gzip")


# --- bombs and buffer growth ------------------------------------------------------------------


@pytest.mark.parametrize("codec", COMPRESSED)
def test_bomb_stops_at_the_limit(codec: Compression) -> None:
    bomb = compress(codec, bytes(16 << 20))
    assert len(bomb) < 1 << 20
    refused(codec, bomb, "limit", limit=1 << 20)
    refused(codec, bomb, "limit", limit=(16 << 20) - 1)
    assert decompress(codec, bomb, max_size=16 << 20) == bytes(16 << 20)


@pytest.mark.parametrize("codec", [Compression.LZ4, Compression.ZSTD])
def test_output_buffer_grows_past_the_first_guess(codec: Compression) -> None:
    # 3 MiB from a few kB: the 64 KiB first guess is too small several times over.
    data = (TEXT * 30)[: 3 << 20]
    packed = compress(codec, data)
    assert len(packed) * 4 < len(data)
    assert decompress(codec, packed) == data


@pytest.mark.parametrize("codec", [Compression.LZ4, Compression.ZSTD])
def test_truncated_frames(codec: Compression) -> None:
    packed = compress(codec, TEXT)
    for cut in (0, 3, 4, 10, len(packed) // 2, len(packed) - 1):
        refused(codec, packed[:cut], codec.name.lower())
