"""Sub-entry batch compression (rabbitmq-stream.md §6): the codes of the sub-batch flag byte
and the codecs the clients use, inflating into exactly the declared size."""

from __future__ import annotations

import enum
import zlib
from collections.abc import Callable

import cramjam

from protocols._wire import LocalProtocolError, RemoteProtocolError

__all__ = ["Compression", "compress", "decompress"]


class Compression(enum.IntEnum):
    """Sub-entry codes (§6): bits 4-6 of the sub-batch flag byte."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


_GZIP_WBITS = 16 + zlib.MAX_WBITS
# rstream compresses with gzip.compress (level 9); the gateway only compresses what it builds.
_GZIP_LEVEL = 9


def compress(codec: Compression, plain: bytes, level: int | None) -> bytes:
    if codec is Compression.NONE:
        return plain
    if codec is Compression.GZIP:
        z = zlib.compressobj(_GZIP_LEVEL if level is None else level, zlib.DEFLATED, _GZIP_WBITS)
        return z.compress(plain) + z.flush()
    # The Java client's codecs (Compression.java): snappy framing format, LZ4 frames, zstd
    # frames; cramjam's compress functions write exactly these.
    compress: dict[Compression, Callable[[bytes], cramjam.Buffer]] = {
        Compression.SNAPPY: cramjam.snappy.compress,
        Compression.LZ4: cramjam.lz4.compress,
        Compression.ZSTD: cramjam.zstd.compress,
    }
    if codec not in compress:
        raise LocalProtocolError(f"no compressor for {codec!r}")
    return bytes(compress[codec](plain))


def decompress(codec: int, data: bytes, expected: int) -> bytes:
    """Inflate into exactly ``expected`` bytes (+1 to see an overrun): the sub-batch header
    states the size, so a bomb stops at the buffer's end instead of filling memory."""
    if codec == Compression.NONE:
        plain = data
    elif codec == Compression.GZIP:
        z = zlib.decompressobj(_GZIP_WBITS)
        try:
            plain = z.decompress(data, expected + 1)
        except zlib.error as exc:
            raise RemoteProtocolError(f"gzip sub-entry batch: {exc}") from None
        if len(plain) == expected and not z.eof:
            raise RemoteProtocolError("gzip sub-entry batch: truncated or longer than declared")
    elif codec in _INTO:
        out = bytearray(expected + 1)
        try:
            n = _INTO[codec](data, out)
        except cramjam.DecompressionError as exc:
            # cramjam stops with "failed to write whole buffer" once the buffer is full.
            why = f"more than {expected} bytes" if "whole buffer" in str(exc) else str(exc)
            raise RemoteProtocolError(f"{Compression(codec).name} sub-entry batch: {why}") from None
        plain = bytes(memoryview(out)[:n])
    else:
        raise RemoteProtocolError(f"unknown sub-entry compression {codec}")
    if len(plain) != expected:
        raise RemoteProtocolError(
            f"sub-entry batch inflates to {'more than ' if len(plain) > expected else ''}"
            f"{len(plain)} bytes, header says {expected}"
        )
    return plain


_INTO: dict[int, Callable[[bytes, bytearray], int]] = {
    Compression.SNAPPY: cramjam.snappy.decompress_into,
    Compression.LZ4: cramjam.lz4.decompress_into,
    Compression.ZSTD: cramjam.zstd.decompress_into,
}
