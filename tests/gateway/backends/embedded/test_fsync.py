"""fsync policies: ``always`` fsyncs before an append returns, sharing one fsync between
concurrent appends (group commit); ``interval`` fsyncs in the background."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
import trio
import trio.testing

from gateway.backends.embedded import FsyncPolicy, open_embedded
from gateway.model import CommitOffset, InvalidRequest

from .support import TOPIC, append, batch, create, logs


def test_policy_parse() -> None:
    assert FsyncPolicy.parse("always").mode == "always"
    assert FsyncPolicy.parse("never").mode == "never"
    assert FsyncPolicy.parse("interval:250") == FsyncPolicy("interval", 0.25)
    for bad in ("sometimes", "interval:", "interval:0", "interval:x", "interval:-5"):
        with pytest.raises(InvalidRequest):
            FsyncPolicy.parse(bad)


class FsyncSpy:
    """Replaces os.fsync; records the inode of every fsynced file."""

    def __init__(self, on_call: Callable[[], None] | None = None) -> None:
        self.inodes: list[int] = []
        self.on_call = on_call
        self.gate: threading.Event | None = None  # when set up, fsyncs wait until it opens
        self._real = os.fsync

    def __call__(self, fd: int) -> None:
        if self.gate is not None:
            self.gate.wait(timeout=10)  # in the worker thread
        self._real(fd)
        self.inodes.append(os.fstat(fd).st_ino)
        if self.on_call is not None:
            self.on_call()

    def count(self, path: Path) -> int:
        return self.inodes.count(path.stat().st_ino)


async def test_always_fsyncs_before_the_append_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = FsyncSpy()
    monkeypatch.setattr(os, "fsync", spy)
    with trio.fail_after(10):
        async with open_embedded(tmp_path, fsync="always") as b:
            await create(b)
            log = logs(tmp_path)[0]
            before = spy.count(log)
            await append(b, batch(3))
            assert spy.count(log) == before + 1
            offsets = tmp_path / "consumer-offsets.log"
            await b.commit_offset(CommitOffset(group="g", topic=TOPIC, partition=0, offset=1))
            assert spy.count(offsets) == 1


async def test_group_commit_shares_fsyncs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spy = FsyncSpy()
    monkeypatch.setattr(os, "fsync", spy)
    with trio.fail_after(10):
        async with open_embedded(tmp_path, fsync="always") as b:
            await create(b)
            log = logs(tmp_path)[0]
            before = spy.count(log)
            spy.gate = gate = threading.Event()
            try:
                async with trio.open_nursery() as nursery:
                    for k in range(20):
                        nursery.start_soon(append, b, batch(1, start=k))
                    # The first append's fsync is held while the other 19 write and queue up.
                    await trio.testing.wait_all_tasks_blocked()
                    assert spy.count(log) == before
                    gate.set()
            finally:
                gate.set()
            # One fsync for the first append, one more covering the 19 that queued behind it.
            assert spy.count(log) - before == 2


async def test_interval_fsyncs_in_the_background(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = trio.lowlevel.current_trio_token()
    synced = trio.Event()
    spy = FsyncSpy(on_call=lambda: token.run_sync_soon(synced.set))
    monkeypatch.setattr(os, "fsync", spy)
    with trio.fail_after(10):
        async with open_embedded(tmp_path, fsync="interval:20") as b:
            await create(b)
            log = logs(tmp_path)[0]
            spy.inodes.clear()
            synced = trio.Event()
            await append(b, batch(3))
            assert spy.count(log) == 0  # not before returning
            while spy.count(log) == 0:
                await synced.wait()
                synced = trio.Event()


async def test_never_fsyncs_only_on_close(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spy = FsyncSpy()
    monkeypatch.setattr(os, "fsync", spy)
    with trio.fail_after(10):
        async with open_embedded(tmp_path, fsync="never") as b:
            await create(b)
            log = logs(tmp_path)[0]
            before = spy.count(log)
            for k in range(5):
                await append(b, batch(1, start=k))
            assert spy.count(log) == before
        assert spy.count(log) == before + 1  # close flushes whatever the policy
