"""Disk full (issue 18 item 5) on a real tmpfs: a refused write is a StorageError (each protocol
answers its storage error), nothing unwritten is acknowledged, no partial batch stays behind,
the store is reported not writable (one error log line per episode, metrics) and recovers by
itself once space returns."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
import structlog.testing
import trio
from prometheus_client import CollectorRegistry

from gateway.backends.embedded import open_embedded
from gateway.backends.embedded.verify import verify
from gateway.metrics import Metrics
from gateway.model import CommitOffset, StorageError, TopicConfig
from tests.helpers.tmpfs import fill, small_tmpfs

from .support import TOPIC, append, assert_intact, batch, create, logs, read_all


@pytest.mark.parametrize("segment_bytes", [64 << 20, 32 << 10])  # also rolls while full
@pytest.mark.parametrize("fsync", ["always", "never"])
async def test_disk_full_then_space_returns(tmp_path: Path, segment_bytes: int, fsync: str) -> None:
    with small_tmpfs(tmp_path / "disk", "2m") as disk:
        root = disk / "store"
        spare = fill(disk, "spare", leave=900 << 10)  # what the test frees later: ~1.1 MiB
        registry = CollectorRegistry()
        metrics = Metrics(registry, process=False)
        value = registry.get_sample_value
        with trio.fail_after(30), structlog.testing.capture_logs() as captured:
            async with open_embedded(root, fsync=fsync) as b:
                b.storage.listen(metrics.storage_event)
                await create(b, config=TopicConfig(segment_bytes=segment_bytes))
                acked = 0
                with pytest.raises(StorageError) as failed:
                    while True:
                        assert await append(b, batch(10, start=acked, size=1000)) == acked
                        acked += 10
                assert failed.value.kind == "no_space"
                assert acked > 0
                # The failed batch left nothing behind: the files end at the last whole batch.
                size = sum(p.stat().st_size for p in logs(root))
                info = b.store.partition(TOPIC, 0).info()
                assert size == info.size_bytes and info.next_offset == acked
                for _ in range(5):  # still full: refused again, logged once
                    with pytest.raises(StorageError):
                        await append(b, batch(10, start=acked, size=1000))
                with pytest.raises(StorageError):
                    await b.ping()  # -> /readyz 503
                assert not b.storage.writable
                assert value("streamgate_storage_writable") == 0
                assert value("streamgate_storage_errors_total", {"kind": "no_space"}) == 6
                os.unlink(spare)  # space returns: a readiness check's probe write sees it
                await b.ping()
                assert b.storage.writable
                assert await append(b, batch(10, start=acked, size=1000)) == acked
                acked += 10
                await b.commit_offset(
                    CommitOffset(group="g", topic=TOPIC, partition=0, offset=acked)
                )
                await b.ping()
                assert b.storage.writable
                assert value("streamgate_storage_writable") == 1
            async with open_embedded(root, fsync=fsync) as b:
                got = await read_all(b)
                assert len(got) == acked
                assert_intact(got)
        failures = [e for e in captured if e["event"] == "embedded.storage_write_failed"]
        assert len(failures) == 1 and failures[0]["log_level"] == "error"
        again = [e for e in captured if e["event"] == "embedded.storage_writable_again"]
        assert len(again) == 1 and again[0]["failed_writes"] == 6


async def test_a_partial_batch_that_cannot_be_cut_back_is_never_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Disk full mid-batch AND the cut back fails (EIO): the next append starts a new segment,
    readers never see the partial bytes, and sealing the old segment cuts them off."""
    with small_tmpfs(tmp_path / "disk", "1m") as disk:
        root = disk / "store"
        spare = fill(disk, "spare", leave=600 << 10)
        with trio.fail_after(30):
            async with open_embedded(root, fsync="never") as b:
                await create(b)
                acked = 0

                def no_cut(fd: int, size: int) -> None:
                    raise OSError(errno.EIO, "cannot truncate")

                monkeypatch.setattr(os, "ftruncate", no_cut)
                with pytest.raises(StorageError):
                    while True:
                        assert await append(b, batch(10, start=acked, size=3000)) == acked
                        acked += 10
                monkeypatch.undo()
                (log,) = logs(root)
                assert log.stat().st_size > b.store.partition(TOPIC, 0).info().size_bytes
                os.unlink(spare)
                assert await append(b, batch(10, start=acked)) == acked
                acked += 10
                assert len(logs(root)) == 2
                got = await read_all(b)
                assert len(got) == acked
                assert_intact(got)
            # Sealing the segment truncated it to its size (freeing blocks reserved past its
            # end), which cut the partial batch off once the disk took that.
            assert list(verify(str(root))) == []
            async with open_embedded(root, fsync="never") as b:
                got = await read_all(b)
                assert len(got) == acked
                assert_intact(got)
                assert b.storage.corrupt_batches == 0
            assert list(verify(str(root))) == []
