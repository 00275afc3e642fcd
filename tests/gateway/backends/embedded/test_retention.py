"""Retention by time and by size deletes whole sealed segments; the clock is injected."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing

from gateway.backends.embedded import EmbeddedBackend, open_embedded
from gateway.model import DescribeTopic, OffsetOutOfRange, PartitionInfo, Read, TopicConfig

from .support import TOPIC, append, assert_intact, batch, create, logs, read_all

SEGMENT = 600  # three batches of 5 x 20 B per segment


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0  # seconds

    def __call__(self) -> float:
        return self.now


async def _partition(b: EmbeddedBackend) -> PartitionInfo:
    return (await b.describe_topic(DescribeTopic(topic=TOPIC))).info.partitions[0]


async def test_retention_by_time(tmp_path: Path) -> None:
    clock = Clock()
    with trio.fail_after(10):
        async with open_embedded(
            tmp_path, fsync="never", segment_bytes=SEGMENT, retention_ms=60_000, clock=clock
        ) as b:
            await create(b)
            for k in range(12):  # one batch a second, stamped by the clock
                await append(b, batch(5, start=5 * k))
                clock.now += 1
            assert b.enforce_retention() == 0
            clock.now += 60 - 12 + 5.5  # batches 0..5 (offsets < 30) are now older than 60 s
            assert b.enforce_retention() == 2  # segments [0, 15) and [15, 30)
            p = await _partition(b)
            assert (p.log_start_offset, p.next_offset) == (30, 60)
            assert int(logs(tmp_path)[0].stem) == 30
            with pytest.raises(OffsetOutOfRange) as exc:
                await b.read(Read(topic=TOPIC, partition=0, offset=29))
            assert (exc.value.log_start, exc.value.log_end) == (30, 60)
            assert_intact(await read_all(b, offset=30), start=30)
            clock.now += 3600
            b.enforce_retention()
            assert len(logs(tmp_path)) == 1  # the active segment is never deleted
            assert (await _partition(b)).log_start_offset == 45
        async with open_embedded(tmp_path, fsync="never", segment_bytes=SEGMENT) as b:
            p = await _partition(b)
            assert (p.log_start_offset, p.next_offset) == (45, 60)
            assert await append(b, batch(1, start=60)) == 60


async def test_retention_by_size(tmp_path: Path) -> None:
    with trio.fail_after(10):
        async with open_embedded(tmp_path, fsync="never", segment_bytes=SEGMENT) as b:
            await create(b, config=TopicConfig(retention_bytes=1500))
            for k in range(20):
                await append(b, batch(5, start=5 * k))
            before = await _partition(b)
            assert b.enforce_retention() > 0
            after = await _partition(b)
            # Kafka's rule: drop the oldest segment while the rest alone still reach the limit.
            oldest = logs(tmp_path)[0].stat().st_size
            assert after.size_bytes - oldest < 1500 <= after.size_bytes
            assert after.log_start_offset > before.log_start_offset
            assert after.size_bytes == sum(f.stat().st_size for f in logs(tmp_path))
            assert_intact(
                await read_all(b, offset=after.log_start_offset), start=after.log_start_offset
            )


async def test_topic_config_overrides_backend_default(tmp_path: Path) -> None:
    clock = Clock()
    with trio.fail_after(10):
        async with open_embedded(
            tmp_path, fsync="never", segment_bytes=SEGMENT, retention_ms=1000, clock=clock
        ) as b:
            await create(b, config=TopicConfig(retention_ms=-1))  # -1: keep forever
            for k in range(9):
                await append(b, batch(5, start=5 * k))
            clock.now += 10**6
            assert b.enforce_retention() == 0


async def test_retention_runs_in_the_background(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    clock = Clock()
    async with open_embedded(
        tmp_path,
        fsync="never",
        segment_bytes=SEGMENT,
        retention_ms=1000,
        retention_check_interval_s=30,
        clock=clock,
    ) as b:
        await create(b)
        for k in range(9):
            await append(b, batch(5, start=5 * k))
        clock.now += 100
        assert (await _partition(b)).log_start_offset == 0
        with trio.fail_after(60):
            await trio.sleep(31)  # virtual time: one retention pass
        assert (await _partition(b)).log_start_offset == 30
