"""Crash recovery: a torn or corrupt tail is truncated to the last whole batch, nothing earlier
is lost, and appends go on at the right offset; a damaged batch in the middle loses only itself.
Also with a real SIGKILLed writer."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import structlog.testing
import trio

from gateway.backends.embedded import open_embedded
from gateway.backends.embedded.batch_format import HEADER_SIZE
from gateway.model import DescribeTopic

from .support import (
    TOPIC,
    append,
    append_bytes,
    assert_intact,
    batch,
    create,
    logs,
    read_all,
    truncate,
)

REPO = Path(__file__).resolve().parents[4]


async def _pristine(root: Path, batches: int = 4) -> list[int]:
    """A store with ``batches`` batches of 5; returns where each batch starts in the log."""
    starts = []
    async with open_embedded(root, fsync="never") as b:
        await create(b)
        for k in range(batches):
            info = (await b.describe_topic(DescribeTopic(topic=TOPIC))).info
            starts.append(info.partitions[0].size_bytes)
            await append(b, batch(5, start=5 * k))
    return starts


async def _reopen_and_check(root: Path, survivors: int, truncated_to: int) -> None:
    async with open_embedded(root, fsync="never") as b:
        assert logs(root)[0].stat().st_size == truncated_to
        got = await read_all(b)
        assert len(got) == survivors
        assert_intact(got)
        assert await append(b, batch(2, start=survivors)) == survivors
        assert_intact(await read_all(b))


async def test_torn_tail_is_truncated_at_every_position(tmp_path: Path) -> None:
    pristine = tmp_path / "pristine"
    with trio.fail_after(30):
        starts = await _pristine(pristine)
        last, end = starts[-1], logs(pristine)[0].stat().st_size
        # Every cut inside the header (offset, length, CRC and fields) and a spread of the rest.
        cuts = [*range(last + 1, last + HEADER_SIZE + 2), *range(last + HEADER_SIZE + 2, end, 7)]
        for cut in cuts:
            root = tmp_path / f"cut{cut}"
            shutil.copytree(pristine, root)
            truncate(logs(root)[0], cut)
            await _reopen_and_check(root, survivors=15, truncated_to=last)
            shutil.rmtree(root)


@pytest.mark.parametrize("where", [0, 7, 9, 13, 17, 21, 30, 50, HEADER_SIZE + 3, -1])
async def test_corrupt_byte_in_last_batch_is_truncated(tmp_path: Path, where: int) -> None:
    root = tmp_path / "store"
    with trio.fail_after(10):
        starts = await _pristine(root)
        log = logs(root)[0]
        data = bytearray(log.read_bytes())
        pos = starts[-1] + where if where >= 0 else len(data) + where
        data[pos] ^= 0x01
        log.write_bytes(bytes(data))
        with structlog.testing.capture_logs() as captured:
            await _reopen_and_check(root, survivors=15, truncated_to=starts[-1])
        assert any(e["event"] == "embedded.torn_tail_truncated" for e in captured)


async def test_corruption_in_the_middle_loses_only_the_damaged_batch(tmp_path: Path) -> None:
    # More cases (the metric, a sealed segment, a real Kafka consumer): test_corruption.py.
    root = tmp_path / "store"
    with trio.fail_after(10):
        starts = await _pristine(root)
        log = logs(root)[0]
        data = bytearray(log.read_bytes())
        data[starts[1] + 40] ^= 0xFF
        log.write_bytes(bytes(data))
        size = len(data) - (starts[2] - starts[1])  # the damaged batch's bytes are cut out
        async with open_embedded(root, fsync="never") as b:
            assert logs(root)[0].stat().st_size == size
            got = await read_all(b)
            assert [m.offset for m in got] == [*range(5), *range(10, 20)]
            assert_intact(got[:5])
            assert_intact(got[5:], start=10)
            assert await append(b, batch(2, start=20)) == 20  # no offset given out twice


async def test_garbage_after_the_last_batch_is_truncated(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with trio.fail_after(10):
        await _pristine(root)
        log = logs(root)[0]
        size = log.stat().st_size
        append_bytes(log, b"\x00" * 100)  # a preallocated or half-written tail
        await _reopen_and_check(root, survivors=20, truncated_to=size)


@pytest.mark.slow
async def test_killed_writer_loses_no_acknowledged_append(tmp_path: Path) -> None:
    root = tmp_path / "store"
    args = [sys.executable, "-m", "tests.gateway.backends.embedded.crash_appender", str(root)]
    proc = await trio.lowlevel.open_process(args, stdout=subprocess.PIPE, cwd=REPO)
    assert proc.stdout is not None
    acked = -1
    try:
        with trio.fail_after(30):
            pending = b""
            acks = 0
            while acks < 200:
                chunk = await proc.stdout.receive_some()
                assert chunk, "the appender exited before it was killed"
                *lines, pending = (pending + chunk).split(b"\n")
                for line in lines:
                    acked = int(line)
                    acks += 1
            os.kill(proc.pid, signal.SIGKILL)
            await proc.wait()
    finally:
        if proc.returncode is None:
            proc.kill()
            with trio.CancelScope(shield=True):
                await proc.wait()
    assert proc.returncode == -signal.SIGKILL
    with trio.fail_after(10):
        async with open_embedded(root, fsync="never") as b:
            got = await read_all(b)
            assert len(got) > acked  # every acknowledged message, maybe a few more
            assert_intact(got)
            assert await append(b, batch(1, start=len(got))) == len(got)
