"""Which partition a keyed row goes to: Kafka's default partitioner (``murmur2(key) & 0x7fffffff
% partitions``, Kafka's ``Utils.murmur2``), so keyed rows land where a Kafka producer, and
Spark's Kafka sink, put the same key."""

from __future__ import annotations

import struct
from typing import Final

_SEED: Final = 0x9747B28C
_M: Final = 0x5BD1E995
_MASK: Final = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 of ``data``, as an unsigned 32-bit number."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    tail = length & ~3
    for (k,) in struct.iter_unpack("<I", data[:tail]):
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    extra = length - tail
    if extra == 3:
        h ^= data[tail + 2] << 16
    if extra >= 2:
        h ^= data[tail + 1] << 8
    if extra >= 1:
        h = ((h ^ data[tail]) * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    return h ^ (h >> 15)


def kafka_partition(key: bytes, partitions: int) -> int:
    return (murmur2(key) & 0x7FFFFFFF) % partitions


__all__ = ["kafka_partition", "murmur2"]
