"""The segment-file LRU (fd_cache.py): budget, recency, pins, EMFILE, threads, and a store of
many topics under a small budget; a topic creation that fails leaves no directory behind."""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from gateway.backends.embedded import batch_codec, open_embedded
from gateway.backends.embedded.batch_format import FORMAT_IDS, encode_messages, pack_header
from gateway.backends.embedded.fd_cache import FILES, FdCache, default_budget
from gateway.backends.embedded.segment import Segment
from gateway.model import BackendUnavailable, ListTopics, Message, Topic

from .support import append, assert_intact, batch, create, read_all


def _fill(seg: Segment, n: int) -> None:
    payload, first, last = encode_messages([Message(value=b"v%d" % i) for i in range(n)], 1)
    size = sum(map(len, payload))
    header = pack_header(
        base_offset=seg.next_offset, format_id=FORMAT_IDS[batch_codec.FORMAT], count=n,
        first_timestamp_us=first, max_timestamp_us=last, producer_id=-1, producer_epoch=-1,
        base_sequence=-1, payload=payload,
    )  # fmt: skip
    seg.append(header, payload, seg.next_offset, n, last, len(header) + size)


@pytest.fixture
def segments(tmp_path: Path) -> Iterator[tuple[FdCache, list[Segment]]]:
    cache = FdCache(budget=3)
    segs = [Segment.create(str(tmp_path), 1000 * i, cache) for i in range(8)]
    for seg in segs:
        _fill(seg, 3)
    yield cache, segs
    for seg in segs:
        seg.close()


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_budget_is_kept_and_evicted_segments_reopen(
    segments: tuple[FdCache, list[Segment]],
) -> None:
    cache, segs = segments
    assert len(cache) == 3
    assert [s for s in segs if s._fd >= 0] == segs[-3:]  # the most recently used
    for seg in segs:  # every one readable again, each reopen evicting another
        batches = seg.read(0, 1 << 20, 100, force=True)
        assert sum(h.records for h, _ in batches) == 3
        assert len(cache) == 3
    assert cache.evictions >= 8


def test_least_recently_used_goes_first(segments: tuple[FdCache, list[Segment]]) -> None:
    _, segs = segments
    a, b, c = segs[-3:]
    a.header_at(0)  # a is now the most recent; b the least
    segs[0].header_at(0)
    assert b._fd < 0
    assert a._fd >= 0 and c._fd >= 0 and segs[0]._fd >= 0


def test_pinned_segments_are_not_evicted(segments: tuple[FdCache, list[Segment]]) -> None:
    cache, segs = segments
    for seg in segs[:5]:
        cache.pin(seg)
        seg.header_at(0)
    assert all(seg._fd >= 0 for seg in segs[:5])  # over budget rather than close a used file
    assert len(cache) == 5
    for seg in segs[:5]:
        cache.unpin(seg)
    assert len(cache) == 3


def test_emfile_on_open_gives_back_one_and_retries(
    segments: tuple[FdCache, list[Segment]],
) -> None:
    cache, segs = segments
    cache.budget = 100
    calls = 0

    def opener() -> int:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise OSError(errno.EMFILE, "Too many open files")
        return os.open(segs[0].path + ".log", os.O_RDONLY)

    before = len(cache)
    segs[0].close()
    cache.get(segs[0], opener)
    assert calls == 2
    assert len(cache) == before  # one given back, one taken


def test_emfile_with_nothing_to_give_back_raises(tmp_path: Path) -> None:
    cache = FdCache(budget=4)

    class Item:
        _fd = -1
        _pins = 0

    def opener() -> int:
        raise OSError(errno.EMFILE, "Too many open files")

    with pytest.raises(OSError, match="Too many"):
        cache.get(Item(), opener)


def test_configure_and_default_budget() -> None:
    cache = FdCache(budget=10)
    cache.configure(0)
    assert cache.budget == default_budget() >= 8
    with pytest.raises(ValueError):
        cache.configure(-1)


def test_threads_reading_under_a_tiny_budget(tmp_path: Path) -> None:
    """Reads in threads race with evictions: none may read a closed or reused descriptor."""
    cache = FdCache(budget=2)
    segs = [Segment.create(str(tmp_path), 1000 * i, cache) for i in range(6)]
    for seg in segs:
        _fill(seg, 5)
    errors: list[BaseException] = []

    def reader(k: int) -> None:
        try:
            for i in range(300):
                seg = segs[(i * 7 + k) % len(segs)]
                got = seg.read(0, 1 << 20, 100, force=True)
                assert sum(h.records for h, _ in got) == 5
                assert got[0][0].base_offset == seg.base_offset
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=reader, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(cache) <= 2
    for seg in segs:
        seg.close()


async def test_many_topics_under_a_small_budget(tmp_path: Path) -> None:
    before = _open_fds()
    with trio.fail_after(60):
        async with open_embedded(tmp_path, fsync="interval:50", max_open_files=8) as b:
            topics = [Topic("s", f"t{i}") for i in range(60)]
            for t in topics:
                await create(b, t, partitions=2)
                await append(b, batch(3), topic=t, p=1)
            assert len(FILES) <= 8
            assert _open_fds() - before < 30  # not one per partition
            await trio.sleep(0.2)  # an interval fsync covering all of them
            for t in [*topics[::7], topics[-1]]:
                assert_intact(await read_all(b, topic=t, p=1))
        async with open_embedded(tmp_path, max_open_files=8) as b:  # recovery under the budget
            assert len(FILES) <= 8
            assert_intact(await read_all(b, topic=topics[0], p=1))
            assert_intact(await read_all(b, topic=topics[-1], p=1))
    FILES.configure(0)


async def test_failed_create_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_open = os.open
    opened = 0

    def failing_open(path: str, flags: int, mode: int = 0o777, **kw: Any) -> int:
        nonlocal opened  # (os.open is the os module's: rmtree calls it too, with dir_fd)
        if str(path).endswith(".log"):
            opened += 1
            if opened >= 3:  # from the third partition on (retries included: fd_cache)
                raise OSError(errno.EMFILE, "Too many open files")
        return real_open(path, flags, mode, **kw)

    with trio.fail_after(30):
        async with open_embedded(tmp_path, fsync="never") as b:
            monkeypatch.setattr(os, "open", failing_open)
            for _ in range(3):  # a retrying client
                opened = 0
                with pytest.raises(BackendUnavailable, match="Too many open files"):
                    await create(b, Topic("new-stream", "t"), partitions=5)
            assert not (tmp_path / "new-stream").exists()
            opened = 0
            await create(b, Topic("s", "kept"))
            for _ in range(2):
                opened = 0
                with pytest.raises(BackendUnavailable):
                    await create(b, Topic("s", "t"), partitions=5)
            assert sorted(p.name for p in (tmp_path / "s").iterdir()) == ["kept", "stream.json"]
            monkeypatch.undo()
            await create(b, Topic("s", "t"), partitions=5)
            assert (tmp_path / "s" / "t").is_dir()  # its own name, not t~2
            listed = await b.list_topics(ListTopics(stream="s"))
            assert sorted(t.topic.name for t in listed.topics) == ["kept", "t"]
