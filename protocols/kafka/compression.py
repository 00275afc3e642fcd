"""The four RecordBatch compression codecs (kafka.md §3.4): stdlib zlib for gzip, cramjam for the
rest, every decompression bounded by a maximum output size so that a small batch cannot expand
into gigabytes (a decompression bomb).
"""

from __future__ import annotations

import enum
import zlib
from collections.abc import Callable

import cramjam
from kio.schema.errors import ErrorCode

from protocols._wire import I32_BE, LocalProtocolError, RemoteProtocolError, decode_uvarint

__all__ = [
    "DEFAULT_MAX_DECOMPRESSED_SIZE",
    "XERIAL_MAGIC",
    "Compression",
    "compress",
    "decompress",
]


class Compression(enum.IntEnum):
    # Attribute bits 0-2 (kafka.md §3.1); 5-7 are unassigned and rejected.
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


# Kafka itself has no limit on the inflated size (max.message.bytes bounds the compressed batch);
# this is the gateway's own memory guard.
DEFAULT_MAX_DECOMPRESSED_SIZE = 64 * 1024 * 1024

# xerial snappy-java's stream header (Java client, kafka-python, aiokafka: kafka.md §3.4): magic,
# then int32 version and int32 compatible-version. Both are 1, but some producers (Redpanda,
# kafka-python issue #2414) write them little-endian, so like kafka-python only the magic counts.
XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + I32_BE.pack(1) + I32_BE.pack(1)
_XERIAL_BLOCK = 32 * 1024  # xerial's default block size, as kafka-python and aiokafka use

_GZIP_WBITS = 16 + zlib.MAX_WBITS  # gzip container only, as Java's GZIPInputStream
# librdkafka's defaults (compression.level -1): gzip 6 (its captured batches happen to re-encode
# byte for byte with it), LZ4 fast mode (cramjam's default, 4, is the ~5x slower HC mode),
# zstd 3 (also Kafka's, KIP-390; cramjam's default 11 is far slower).
_GZIP_DEFAULT_LEVEL = 6
_LZ4_DEFAULT_LEVEL = 0
_ZSTD_DEFAULT_LEVEL = 3
_FIRST_GUESS = 64 * 1024
# cramjam's *_into functions stop with this message once the output buffer is full.
_BUFFER_FULL = "whole buffer"


def _corrupt(message: str) -> RemoteProtocolError:
    return RemoteProtocolError(message, hint=ErrorCode.corrupt_message)


def _too_large(codec: str, limit: int) -> RemoteProtocolError:
    return _corrupt(f"{codec} batch inflates beyond the {limit}-byte limit")


def _codec(codec: int) -> Compression:
    try:
        return Compression(codec)
    except ValueError:
        raise LocalProtocolError(f"no compression codec {codec}") from None


# --- compression ------------------------------------------------------------------------------


def compress(
    codec: Compression,
    data: bytes | bytearray | memoryview,
    *,
    level: int | None = None,
    xerial: bool = False,
) -> bytes:
    """``level=None`` takes librdkafka's default level; ``xerial`` frames snappy like Java."""
    codec = _codec(codec)
    if codec is Compression.GZIP:
        # zlib's gzip wrapper writes mtime 0 and no name: deterministic bytes, as librdkafka.
        z = zlib.compressobj(
            _GZIP_DEFAULT_LEVEL if level is None else level, zlib.DEFLATED, _GZIP_WBITS
        )
        return z.compress(data) + z.flush()
    if codec is Compression.SNAPPY:
        # Raw snappy is what librdkafka sends; every reader accepts it (xerial's stream reader
        # falls back to raw when the magic is absent).
        if not xerial:
            return bytes(cramjam.snappy.compress_raw(data))
        view = memoryview(data)
        parts = [_XERIAL_HEADER]
        for start in range(0, len(view), _XERIAL_BLOCK):
            block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK]))
            parts += (I32_BE.pack(len(block)), block)
        return b"".join(parts)
    if codec is Compression.LZ4:
        # Independent blocks: Kafka's Java Lz4BlockInputStream inflates each block on its own
        # (KIP-57), so linked blocks would not decode there. The same settings as aiokafka.
        lz4 = cramjam.lz4.Compressor(
            level=_LZ4_DEFAULT_LEVEL if level is None else level,
            content_checksum=False,
            block_linked=False,
        )
        lz4.compress(data)
        return bytes(lz4.finish())
    if codec is Compression.ZSTD:
        return bytes(
            cramjam.zstd.compress(data, level=_ZSTD_DEFAULT_LEVEL if level is None else level)
        )
    raise LocalProtocolError(f"no compressor for {codec!r}")


# --- decompression ----------------------------------------------------------------------------


def decompress(
    codec: Compression,
    data: bytes | bytearray | memoryview,
    *,
    max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> bytes:
    """Inflate a batch's records section; more than ``max_size`` bytes is RemoteProtocolError."""
    codec = _codec(codec)
    if codec is Compression.GZIP:
        return _gunzip(data, max_size)
    if codec is Compression.SNAPPY:
        view = memoryview(data)
        if view[: len(XERIAL_MAGIC)] == XERIAL_MAGIC:
            return _unsnappy_xerial(view, max_size)
        return _unsnappy_raw(view, max_size)
    if codec is Compression.LZ4:
        return _inflate_into(cramjam.lz4.decompress_into, "lz4", data, max_size)
    if codec is Compression.ZSTD:
        return _inflate_into(cramjam.zstd.decompress_into, "zstd", data, max_size)
    raise LocalProtocolError(f"no decompressor for {codec!r}")


def _gunzip(data: bytes | bytearray | memoryview, limit: int) -> bytes:
    # Java's GZIPInputStream reads concatenated members, so do the same.
    out = bytearray()
    rest: bytes | bytearray | memoryview = data
    while True:
        z = zlib.decompressobj(_GZIP_WBITS)
        try:
            out += z.decompress(rest, limit - len(out) + 1)
        except zlib.error as exc:
            raise _corrupt(f"gzip: {exc}") from None
        if len(out) > limit:
            raise _too_large("gzip", limit)
        if not z.eof:
            # Either truncated, or stopped by max_length with input left (caught above).
            raise _corrupt("gzip: truncated stream")
        rest = z.unused_data
        if not rest:
            return bytes(out)


def _unsnappy_raw(block: memoryview, limit: int) -> bytes:
    # A raw snappy block starts with its inflated length as a uvarint: check it before cramjam
    # allocates that much.
    try:
        declared, _ = decode_uvarint(block, 0)
    except RemoteProtocolError as exc:
        raise _corrupt(f"snappy: length preamble: {exc}") from None
    if declared > limit:
        raise _too_large("snappy", limit)
    try:
        return bytes(cramjam.snappy.decompress_raw(block))
    except cramjam.DecompressionError as exc:
        raise _corrupt(f"snappy: {exc}") from None


def _unsnappy_xerial(view: memoryview, limit: int) -> bytes:
    if len(view) < len(_XERIAL_HEADER):
        raise _corrupt("snappy: truncated xerial header")
    parts: list[bytes] = []
    budget = limit
    pos = len(_XERIAL_HEADER)
    end = len(view)
    while pos < end:
        if end - pos < 4:
            raise _corrupt("snappy: truncated xerial block length")
        (size,) = I32_BE.unpack_from(view, pos)
        pos += 4
        if size < 0 or size > end - pos:
            raise _corrupt(f"snappy: xerial block of {size} bytes, {end - pos} left")
        part = _unsnappy_raw(view[pos : pos + size], budget)
        budget -= len(part)
        parts.append(part)
        pos += size
    return b"".join(parts)


def _inflate_into(
    decompress_into: Callable[[bytes | bytearray | memoryview, bytearray], int],
    codec: str,
    data: bytes | bytearray | memoryview,
    limit: int,
) -> bytes:
    # lz4 and zstd frames need not declare their content size, so inflate into a buffer that
    # grows 4x on each "buffer full" and never beyond the limit. cramjam streams into the
    # buffer and stops when it is full, so a bomb costs at most ``limit`` bytes of work.
    size = min(limit, max(_FIRST_GUESS, 4 * len(data)))
    while True:
        out = bytearray(size)
        try:
            n = decompress_into(data, out)
        except cramjam.DecompressionError as exc:
            if _BUFFER_FULL not in str(exc):
                raise _corrupt(f"{codec}: {exc}") from None
            if size >= limit:
                raise _too_large(codec, limit) from None
            size = min(limit, size * 4)
            continue
        return bytes(memoryview(out)[:n])
