"""Renaming streams and topics (Iggy UpdateStream / UpdateTopic) and purging a whole stream."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from gateway.backends.embedded import EmbeddedBackend, open_embedded
from gateway.backends.embedded import files as files_module
from gateway.model import (
    CommitOffset,
    CreateStream,
    DescribeTopic,
    FetchOffset,
    InvalidRequest,
    ListStreams,
    OffsetOutOfRange,
    PurgeStream,
    PurgeTopic,
    Read,
    StreamExists,
    StreamInfo,
    Topic,
    TopicConfig,
    TopicExists,
    UnknownStream,
    UnknownTopic,
    UpdateStream,
    UpdateTopic,
)

from .support import TOPIC, append, assert_intact, batch, create, read_all

RENAMED = Topic("s", "ünï/cødé")  # escapes to another directory name than it would have


async def _commit(b: EmbeddedBackend, offset: int, topic: Topic = TOPIC, p: int = 0) -> None:
    await b.commit_offset(
        CommitOffset(group="g", topic=topic, partition=p, offset=offset, metadata=f"m{offset}")
    )


async def _fetch(b: EmbeddedBackend, topic: Topic = TOPIC, p: int = 0) -> tuple[int | None, str]:
    got = await b.fetch_offset(FetchOffset(group="g", topic=topic, partition=p))
    return got.offset, got.metadata


async def _rename(b: EmbeddedBackend, topic: Topic, new_name: str, **config: Any) -> None:
    await b.update_topic(UpdateTopic(topic=topic, config=TopicConfig(**config), new_name=new_name))


async def _streams(b: EmbeddedBackend) -> dict[str, StreamInfo]:
    return {s.name: s for s in (await b.list_streams(ListStreams())).streams}


def _dirs(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.is_dir())


async def _gone(b: EmbeddedBackend, topic: Topic, error: type[Exception] = UnknownTopic) -> None:
    with pytest.raises(error):
        await b.describe_topic(DescribeTopic(topic=topic))
    with pytest.raises(error):
        await b.read(Read(topic=topic, partition=0, offset=0))
    with pytest.raises(error):
        await _fetch(b, topic)


@pytest.mark.parametrize("fsync", ["never", "always"])
async def test_rename_topic_keeps_data_offsets_and_id(tmp_path: Path, fsync: str) -> None:
    with trio.fail_after(10):
        async with open_embedded(tmp_path, fsync=fsync) as b:
            await create(b, partitions=2)
            await append(b, batch(10))
            await append(b, batch(3), p=1)
            await _commit(b, 4)
            await _commit(b, 2, p=1)
            topic_id = (await b.describe_topic(DescribeTopic(topic=TOPIC))).info.id
            result = await b.update_topic(
                UpdateTopic(
                    topic=TOPIC, config=TopicConfig(retention_ms=60_000), new_name=RENAMED.name
                )
            )
            assert (result.info.topic, result.info.id) == (RENAMED, topic_id)
            assert result.info.config.retention_ms == 60_000  # applied with the rename
            assert_intact(await read_all(b, RENAMED))
            assert (await _fetch(b, RENAMED), await _fetch(b, RENAMED, p=1)) == (
                (4, "m4"),
                (2, "m2"),
            )
            await _gone(b, TOPIC)
            assert await append(b, batch(2, start=10), RENAMED) == 10  # the same log goes on
            await _commit(b, 12, RENAMED)

            await create(b)  # the old name is free again, for a new, empty topic
            assert await read_all(b) == []
            assert await _fetch(b) == (None, "")
            await append(b, batch(1))
        async with open_embedded(tmp_path, fsync=fsync) as b:
            topics = {t.topic: t for t in (await _streams(b))["s"].topics}
            assert set(topics) == {TOPIC, RENAMED}
            assert topics[RENAMED].id == topic_id
            assert topics[RENAMED].config.retention_ms == 60_000
            assert_intact(await read_all(b, RENAMED))
            assert [m.offset for m in await read_all(b, RENAMED)] == list(range(12))
            assert_intact(await read_all(b))
            assert len(await read_all(b)) == 1
            assert await _fetch(b, RENAMED) == (12, "m12")
            assert await _fetch(b, RENAMED, p=1) == (2, "m2")
            assert await _fetch(b) == (None, "")
            assert not list((tmp_path / ".trash").iterdir())


async def test_rename_stream_moves_its_topics_and_offsets(tmp_path: Path) -> None:
    other = Topic("s", "t2")
    with trio.fail_after(10):
        async with open_embedded(tmp_path, fsync="never") as b:
            await create(b)
            await create(b, other)
            await create(b, Topic("keep", "t"))
            await append(b, batch(5))
            await append(b, batch(2), other)
            await _commit(b, 3)
            await _commit(b, 1, other)
            await _commit(b, 0, Topic("keep", "t"))
            stream_id = (await _streams(b))["s"].id
            info = (await b.update_stream(UpdateStream(stream="s", new_name="../r"))).info
            assert (info.name, info.id) == ("../r", stream_id)
            assert {t.topic for t in info.topics} == {Topic("../r", "t"), Topic("../r", "t2")}
            await _gone(b, TOPIC, UnknownStream)
            assert_intact(await read_all(b, Topic("../r", "t")))
            assert await _fetch(b, Topic("../r", "t")) == (3, "m3")
            assert await _fetch(b, Topic("../r", "t2")) == (1, "m1")
            assert await _fetch(b, Topic("keep", "t")) == (0, "m0")  # other streams untouched

            await b.create_stream(CreateStream(stream="s"))  # the old name is free again
            await create(b)
            assert await read_all(b) == []
            assert await _fetch(b) == (None, "")
        async with open_embedded(tmp_path, fsync="never") as b:
            streams = await _streams(b)
            assert set(streams) == {"s", "../r", "keep"}
            assert streams["../r"].id == stream_id
            assert [t.topic for t in streams["s"].topics] == [TOPIC]
            assert len(await read_all(b, Topic("../r", "t"))) == 5
            assert await _fetch(b, Topic("../r", "t")) == (3, "m3")
            assert await _fetch(b, Topic("../r", "t2")) == (1, "m1")
            assert await _fetch(b, Topic("keep", "t")) == (0, "m0")
            assert await _fetch(b) == (None, "")
            # The rename moved nothing on disk; the new "s" got a directory of its own.
            assert _dirs(tmp_path) == [".trash", "keep", "s", "s~2"]


async def test_rename_back_and_forth(tmp_path: Path) -> None:
    with trio.fail_after(10):
        async with open_embedded(tmp_path, fsync="never") as b:
            await create(b)
            await append(b, batch(3))
            await _commit(b, 2)
            await _rename(b, TOPIC, "u")
            await _rename(b, Topic("s", "u"), "t")
            await b.update_stream(UpdateStream(stream="s", new_name="x"))
            await b.update_stream(UpdateStream(stream="x", new_name="s"))
            assert_intact(await read_all(b))
            assert await _fetch(b) == (2, "m2")
        async with open_embedded(tmp_path, fsync="never") as b:
            assert await _fetch(b) == (2, "m2")
            assert len(await read_all(b)) == 3


async def test_rename_errors_change_nothing(tmp_path: Path) -> None:
    with trio.fail_after(10):
        async with open_embedded(tmp_path, fsync="never") as b:
            await create(b)
            await create(b, Topic("s", "u"))
            await create(b, Topic("s2", "t"))
            await _commit(b, 5)
            with pytest.raises(TopicExists):
                await _rename(b, TOPIC, "u")
            with pytest.raises(UnknownTopic):
                await _rename(b, Topic("s", "nope"), "v")
            with pytest.raises(UnknownStream):
                await _rename(b, Topic("nope", "t"), "v")
            with pytest.raises(StreamExists):
                await b.update_stream(UpdateStream(stream="s", new_name="s2"))
            with pytest.raises(UnknownStream):
                await b.update_stream(UpdateStream(stream="nope", new_name="v"))
            for bad in ["", "a\x00b", "x" * 256]:
                with pytest.raises(InvalidRequest):
                    await _rename(b, TOPIC, bad)
                with pytest.raises(InvalidRequest):
                    await b.update_stream(UpdateStream(stream="s", new_name=bad))
            # The same name is no rename: config only.
            await _rename(b, TOPIC, "t", retention_bytes=1000)
            info = (await b.describe_topic(DescribeTopic(topic=TOPIC))).info
            assert info.config.retention_bytes == 1000
            await b.update_stream(UpdateStream(stream="s", new_name="s"))
            assert set(await _streams(b)) == {"s", "s2"}
            assert await _fetch(b) == (5, "m5")


async def test_failed_metadata_write_leaves_no_offsets_under_the_new_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(path: str, data: dict[str, Any]) -> None:
        raise OSError("disk full")

    with trio.fail_after(10):
        async with open_embedded(tmp_path, fsync="never") as b:
            await create(b)
            await _commit(b, 5)
            with monkeypatch.context() as m:
                m.setattr(files_module, "write_json", broken)
                with pytest.raises(OSError, match="disk full"):
                    await _rename(b, TOPIC, "u")
                with pytest.raises(OSError, match="disk full"):
                    await b.update_stream(UpdateStream(stream="s", new_name="r"))
            assert await _fetch(b) == (5, "m5")
            await create(b, Topic("s", "u"))
            assert await _fetch(b, Topic("s", "u")) == (None, "")  # no copy was left behind
            await b.create_stream(CreateStream(stream="r"))
            await create(b, Topic("r", "t"))
            assert await _fetch(b, Topic("r", "t")) == (None, "")


@pytest.mark.parametrize("crash", ["before", "after"])
async def test_crash_around_the_metadata_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, crash: str
) -> None:
    """A copy of the store taken just before or after topic.json changes opens consistently."""
    data, crashed = tmp_path / "data", tmp_path / "crashed"
    write_json = files_module.write_json
    synced: list[bool] = []

    def write_and_copy(path: str, meta: dict[str, Any]) -> None:
        synced.append(not b.store.offsets.commit.dirty)
        if crash == "after":
            write_json(path, meta)
        shutil.copytree(data, crashed)
        if crash == "before":
            write_json(path, meta)

    with trio.fail_after(10):
        async with open_embedded(data, fsync="never") as b:
            await create(b)
            await append(b, batch(2))
            await _commit(b, 2)
            monkeypatch.setattr(files_module, "write_json", write_and_copy)
            await _rename(b, TOPIC, "u")
            monkeypatch.undo()
        assert synced == [True]  # the copied offsets were on disk before topic.json named "u"
        async with open_embedded(crashed, fsync="never") as b:
            live, dead = (Topic("s", "u"), TOPIC) if crash == "after" else (TOPIC, Topic("s", "u"))
            assert await _fetch(b, live) == (2, "m2")
            assert len(await read_all(b, live)) == 2
            await _gone(b, dead)
            await create(b, dead)
            assert await _fetch(b, dead) == (None, "")  # the orphaned keys were forgotten


async def test_commit_during_the_rename_follows_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Commits take no lock: one made under the old name while topic.json is written moves."""
    entered, release = threading.Event(), threading.Event()
    write_json = files_module.write_json

    def slow(path: str, data: dict[str, Any]) -> None:
        entered.set()
        release.wait(10)
        write_json(path, data)

    with trio.fail_after(10):
        async with open_embedded(tmp_path, fsync="never") as b:
            await create(b)
            await _commit(b, 1)
            monkeypatch.setattr(files_module, "write_json", slow)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_rename, b, TOPIC, "u")
                await trio.to_thread.run_sync(entered.wait, 10)
                await _commit(b, 7)  # the catalog still has the old name
                release.set()
            monkeypatch.undo()
            assert await _fetch(b, Topic("s", "u")) == (7, "m7")
        async with open_embedded(tmp_path, fsync="never") as b:
            assert await _fetch(b, Topic("s", "u")) == (7, "m7")
            await create(b)
            assert await _fetch(b) == (None, "")


async def test_long_poll_on_a_renamed_topic(tmp_path: Path) -> None:
    """A waiting reader stays on the same log: an append under the new name wakes it."""
    with trio.fail_after(10):
        async with open_embedded(tmp_path, fsync="never") as b:
            await create(b)
            got: list[int] = []

            async def reader() -> None:
                r = await b.read(Read(topic=TOPIC, partition=0, offset=0, max_wait_ms=60_000))
                got.extend(m.offset for batch_ in r.batches for m in batch_.messages)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(reader)
                await trio.testing.wait_all_tasks_blocked()
                await _rename(b, TOPIC, "u")
                await trio.testing.wait_all_tasks_blocked()
                assert got == []
                await append(b, batch(2), Topic("s", "u"))
            assert got == [0, 1]


async def test_purge_stream(tmp_path: Path) -> None:
    other = Topic("s", "t2")
    kept = Topic("keep", "t")
    with trio.fail_after(10):
        async with open_embedded(tmp_path, fsync="always") as b:
            await create(b, partitions=2)
            await create(b, other)
            await create(b, kept)
            await append(b, batch(5))
            await append(b, batch(3), p=1)
            await append(b, batch(4), other)
            await append(b, batch(2), kept)
            await b.purge_stream(PurgeStream(stream="s"))
            parts = {
                (t.topic.name, p.partition): (p.log_start_offset, p.next_offset)
                for t in (await _streams(b))["s"].topics
                for p in t.partitions
            }
            assert parts == {("t", 0): (5, 5), ("t", 1): (3, 3), ("t2", 0): (4, 4)}
            with pytest.raises(OffsetOutOfRange):
                await b.read(Read(topic=TOPIC, partition=0, offset=0))
            assert await read_all(b, offset=5) == []
            assert await append(b, batch(1, start=5)) == 5
            assert_intact(await read_all(b, kept))  # another stream keeps its messages
            with pytest.raises(UnknownStream):
                await b.purge_stream(PurgeStream(stream="nope"))
            await b.create_stream(CreateStream(stream="empty"))
            await b.purge_stream(PurgeStream(stream="empty"))
            await b.purge_topic(PurgeTopic(topic=kept))
        async with open_embedded(tmp_path, fsync="always") as b:
            assert_intact(await read_all(b, offset=5), start=5)
            assert await read_all(b, other, offset=4) == []
            assert await read_all(b, TOPIC, p=1, offset=3) == []
            assert await read_all(b, kept, offset=2) == []
