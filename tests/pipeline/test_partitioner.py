"""Keyed rows go where Kafka's default partitioner puts them: its own murmur2 test vectors."""

from __future__ import annotations

import pytest

from pipeline.partitioner import kafka_partition, murmur2

# Kafka's UtilsTest.testMurmur2 (signed 32-bit results)
VECTORS = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
]


@pytest.mark.parametrize(("data", "expected"), VECTORS)
def test_murmur2(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected & 0xFFFFFFFF


def test_kafka_partition() -> None:
    assert kafka_partition(b"abc", 7) == 479470107 % 7
    assert kafka_partition(b"21", 3) == (-973932308 & 0x7FFFFFFF) % 3
