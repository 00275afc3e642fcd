"""The consumer offset store: replay, torn tail, compaction, cleanup of deleted topics."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from gateway.backends.embedded import EmbeddedBackend, open_embedded
from gateway.backends.embedded import offsets as offsets_module
from gateway.model import (
    CommitOffset,
    CreatePartitions,
    DeletePartitions,
    DeleteStream,
    FetchOffset,
    InvalidRequest,
    Topic,
)

from .support import TOPIC, create, entries_under

FILE = offsets_module.FILE_NAME


def _commit(group: str, offset: int, p: int = 0, topic: Topic = TOPIC) -> CommitOffset:
    return CommitOffset(group=group, topic=topic, partition=p, offset=offset, metadata=f"m{offset}")


async def _fetch(b: EmbeddedBackend, group: str, p: int = 0, topic: Topic = TOPIC) -> int | None:
    return (await b.fetch_offset(FetchOffset(group=group, topic=topic, partition=p))).offset


async def test_torn_tail_of_the_offsets_file(tmp_path: Path) -> None:
    with trio.fail_after(10):
        async with open_embedded(tmp_path, fsync="never") as b:
            await create(b, partitions=2)
            await b.commit_offset(_commit("a", 5))
            await b.commit_offset(_commit("b", 6, p=1))
            await b.commit_offset(_commit("a", 7))
        path = tmp_path / FILE
        data = path.read_bytes()
        path.write_bytes(data[:-3])  # the last commit ("a" -> 7) was torn
        async with open_embedded(tmp_path, fsync="never") as b:
            assert path.stat().st_size < len(data) - 3  # cut back to the last whole record
            assert (await _fetch(b, "a"), await _fetch(b, "b", p=1)) == (5, 6)
            await b.commit_offset(_commit("a", 8))
        async with open_embedded(tmp_path, fsync="never") as b:
            assert (await _fetch(b, "a"), await _fetch(b, "b", p=1)) == (8, 6)


async def test_compaction_keeps_the_live_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(offsets_module, "_COMPACT_MIN_BYTES", 4096)
    with trio.fail_after(10):
        async with open_embedded(tmp_path, fsync="never") as b:
            await create(b, partitions=3)
            for k in range(1000):
                await b.commit_offset(_commit(f"g{k % 4}", k, p=k % 3))
            size = (tmp_path / FILE).stat().st_size
            assert size < 8192  # 1000 commits of ~40 bytes were compacted to 12 live ones
        async with open_embedded(tmp_path, fsync="never") as b:
            for k in range(988, 1000):
                assert await _fetch(b, f"g{k % 4}", p=k % 3) == k
        assert not [p for p in entries_under(tmp_path) if p.suffix == ".tmp"]


async def test_deleted_stream_and_partitions_forget_offsets(tmp_path: Path) -> None:
    other = Topic("s2", "t")
    with trio.fail_after(10):
        async with open_embedded(tmp_path, fsync="never") as b:
            await create(b, partitions=3)
            await create(b, topic=other)
            for p in range(3):
                await b.commit_offset(_commit("g", 10 + p, p=p))
            await b.commit_offset(_commit("g", 1, topic=other))
            await b.delete_partitions(DeletePartitions(topic=TOPIC, total=1))
            await b.delete_stream(DeleteStream(stream="s2"))
            with pytest.raises(InvalidRequest):
                await b.commit_offset(_commit("g", -1))
        async with open_embedded(tmp_path, fsync="never") as b:
            await create(b, topic=other)
            assert await _fetch(b, "g", topic=other) is None
            assert await _fetch(b, "g") == 10
            await b.create_partitions(CreatePartitions(topic=TOPIC, total=3))
            assert await _fetch(b, "g", p=1) is None  # not the offset of the deleted partition 1


async def test_leader_epochs_are_kept_beside_the_offsets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kafka's committed_leader_epoch (KIP-320) comes back as committed: -1 (none) and a
    real epoch, across a reopen and a compaction, in a file mixing both record kinds."""
    monkeypatch.setattr(offsets_module, "_COMPACT_MIN_BYTES", 4096)

    async def fetched(b: EmbeddedBackend, group: str) -> tuple[int | None, str, int]:
        r = await b.fetch_offset(FetchOffset(group=group, topic=TOPIC, partition=0))
        return r.offset, r.metadata, r.leader_epoch

    with trio.fail_after(10):
        async with open_embedded(tmp_path, fsync="never") as b:
            await create(b)
            await b.commit_offset(_commit("none", 3))
            await b.commit_offset(
                CommitOffset(group="epoch", topic=TOPIC, partition=0, offset=4, metadata="x",
                             leader_epoch=7)
            )  # fmt: skip
            assert await fetched(b, "none") == (3, "m3", -1)
            assert await fetched(b, "epoch") == (4, "x", 7)
        async with open_embedded(tmp_path, fsync="never") as b:
            assert await fetched(b, "none") == (3, "m3", -1)
            assert await fetched(b, "epoch") == (4, "x", 7)
            for k in range(300):  # past the compaction threshold: rewritten with both kinds
                await b.commit_offset(_commit("churn", k))
        async with open_embedded(tmp_path, fsync="never") as b:
            assert await fetched(b, "epoch") == (4, "x", 7)
            assert await fetched(b, "none") == (3, "m3", -1)
