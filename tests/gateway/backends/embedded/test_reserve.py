"""Blocks reserved ahead of a busy segment's appends (``files.reserve``): allocated past the end of
the log without changing its size, freed when the segment is sealed or closed, and nothing
changes for the log when the system cannot reserve."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio

from gateway.backends.embedded import files, open_embedded, segment
from gateway.model import TopicConfig

from .support import append, assert_intact, batch, create, logs, read_all

SEGMENT = 8 << 20
RECORD = 64 << 10  # 16 records a batch: 1 MiB
_SLACK = 64 << 10  # a file's blocks round its size up (and a file system may add a little)


def _allocated(path: Path) -> int:
    return os.stat(path).st_blocks * 512


def _can_reserve(tmp_path: Path) -> bool:
    fd = os.open(tmp_path / "probe", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        return files.reserve(fd, 0, 1 << 20)
    finally:
        os.close(fd)
        os.unlink(tmp_path / "probe")


async def _fill(b: object, batches: int, start: int = 0) -> None:
    for k in range(batches):
        await append(b, batch(16, start=start + 16 * k, size=RECORD))  # type: ignore[arg-type]


async def test_a_busy_segment_reserves_ahead_and_frees_it_when_sealed_or_closed(
    tmp_path: Path,
) -> None:
    assert _can_reserve(tmp_path), "this file system cannot fallocate(KEEP_SIZE)"
    root = tmp_path / "store"
    with trio.fail_after(30):
        async with open_embedded(root, fsync="never") as b:
            await create(b, config=TopicConfig(segment_bytes=SEGMENT))
            await _fill(b, 4)  # past RESERVE_FROM: the 4th batch reserved 3 MiB past itself
            (log,) = logs(root)
            size = log.stat().st_size
            assert 4 << 20 < size < SEGMENT
            # Reserved ahead, the size untouched: readers and recovery see only what was
            # written.
            assert _allocated(log) >= size + (2 << 20)
            assert _allocated(log) <= SEGMENT + _SLACK
            await _fill(b, 5, start=64)  # rolls past 8 MiB
            sealed, active = logs(root)
            assert sealed.stat().st_size <= SEGMENT
            assert _allocated(sealed) <= sealed.stat().st_size + _SLACK  # freed when sealed
            assert active.stat().st_size > 0
            assert_intact(await read_all(b))
        # Closed: the active segment's reserve is freed too.
        assert _allocated(active) <= active.stat().st_size + _SLACK
        async with open_embedded(root, fsync="never") as b:
            got = await read_all(b)
            assert len(got) == 16 * 9
            assert_intact(got)


async def test_a_segment_left_with_a_reserve_is_read_to_its_end_and_freed_when_sealed(
    tmp_path: Path,
) -> None:
    """What a crash leaves (blocks reserved past the end of the active log) changes nothing
    for recovery, which goes by the file's size, and goes when that segment is sealed."""
    assert _can_reserve(tmp_path), "this file system cannot fallocate(KEEP_SIZE)"
    root = tmp_path / "store"
    with trio.fail_after(30):
        async with open_embedded(root, fsync="never") as b:
            await create(b, config=TopicConfig(segment_bytes=SEGMENT))
            await _fill(b, 2)
        (log,) = logs(root)
        size = log.stat().st_size
        fd = os.open(log, os.O_RDWR)
        try:
            assert files.reserve(fd, size, 4 << 20)
        finally:
            os.close(fd)
        assert log.stat().st_size == size and _allocated(log) >= size + (4 << 20)
        async with open_embedded(root, fsync="never") as b:
            assert_intact(await read_all(b))
            await _fill(b, 7, start=32)  # rolls
            assert _allocated(log) <= log.stat().st_size + _SLACK
            assert_intact(await read_all(b))


async def test_appends_without_reserves_when_the_system_refuses_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[tuple[int, int]] = []

    def refuse(fd: int, offset: int, length: int) -> bool:
        asked.append((offset, length))
        return False

    monkeypatch.setattr(segment, "reserve", refuse)
    root = tmp_path / "store"
    with trio.fail_after(30):
        async with open_embedded(root, fsync="never") as b:
            await create(b, config=TopicConfig(segment_bytes=SEGMENT))
            await _fill(b, 12)  # two segments
            assert len(logs(root)) == 2
            assert_intact(await read_all(b))
    # Asked once a segment, once it held RESERVE_FROM; not again after a refusal.
    assert len(asked) == 2
    assert all(offset >= segment.RESERVE_FROM for offset, _ in asked)
