"""Everything the store acknowledged is there again after close and reopen."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from gateway.backends.embedded import open_embedded
from gateway.backends.embedded.partition import SNAPSHOT
from gateway.model import (
    Append,
    CommitOffset,
    CreateStream,
    CreateTopic,
    DeleteTopic,
    FetchOffset,
    Header,
    HeaderKind,
    ListStreams,
    Message,
    MessageBatch,
    SequenceError,
    Topic,
    TopicConfig,
)

from .support import TOPIC, append, assert_intact, batch, create, partition_dir, read_all


async def test_topics_ids_messages_and_offsets_survive_reopen(tmp_path: Path) -> None:
    other = Topic("s", "u")
    rich = Message(value=b"v", key=b"", headers=(Header("h", b"1", HeaderKind.INT8),), id=9)
    with trio.fail_after(10):
        async with open_embedded(tmp_path, fsync="never") as b:
            await b.create_stream(CreateStream(stream="zero"))
            await b.create_stream(CreateStream(stream="s", id=7))
            await b.create_topic(
                CreateTopic(topic=TOPIC, partitions=2, id=3, config=TopicConfig(retention_ms=5))
            )
            await b.create_topic(CreateTopic(topic=other, partitions=1))
            await append(b, batch(10))
            await append(b, batch(5, start=10))
            await append(b, [rich], p=1)
            await b.commit_offset(
                CommitOffset(group="g", topic=TOPIC, partition=1, offset=1, metadata="meta")
            )
        async with open_embedded(tmp_path, fsync="never") as b:
            streams = {s.name: s for s in (await b.list_streams(ListStreams())).streams}
            assert (streams["zero"].id, streams["s"].id) == (0, 7)
            topics = {t.topic: t for t in streams["s"].topics}
            assert (topics[TOPIC].id, topics[other].id) == (3, 4)
            assert topics[TOPIC].config.retention_ms == 5
            assert topics[TOPIC].partitions[0].next_offset == 15
            assert_intact(await read_all(b))
            [got] = await read_all(b, p=1)
            assert (got.value, got.key, got.headers, got.id) == (b"v", b"", rich.headers, 9)
            fetched = await b.fetch_offset(FetchOffset(group="g", topic=TOPIC, partition=1))
            assert (fetched.offset, fetched.metadata) == (1, "meta")
            assert await append(b, batch(1, start=15)) == 15
            await b.delete_topic(DeleteTopic(topic=other))
        async with open_embedded(tmp_path, fsync="never") as b:
            assert [t.topic for t in (await b.list_streams(ListStreams())).streams[1].topics] == [
                TOPIC
            ]
            assert_intact(await read_all(b))
            assert not list((tmp_path / ".trash").iterdir())


def _idem(seq: int, n: int = 2, epoch: int = 0) -> Append:
    return Append(
        topic=TOPIC,
        partition=0,
        batch=MessageBatch(batch(n)),
        producer_id=1,
        producer_epoch=epoch,
        base_sequence=seq,
    )


@pytest.mark.parametrize("snapshot", ["kept", "lost"])
async def test_producer_state_survives_reopen(tmp_path: Path, snapshot: str) -> None:
    # Small segments: the state comes from a snapshot plus the headers after it, or (when the
    # snapshot is lost) from the headers of every segment.
    with trio.fail_after(10):
        async with open_embedded(tmp_path, fsync="never", segment_bytes=300) as b:
            await create(b)
            for k in range(10):
                await b.append(_idem(2 * k))
        if snapshot == "lost":
            (partition_dir(tmp_path) / SNAPSHOT).unlink()
        async with open_embedded(tmp_path, fsync="never", segment_bytes=300) as b:
            retry = await b.append(_idem(16))
            assert retry.duplicate and retry.base_offset == 16
            with pytest.raises(SequenceError):
                await b.append(_idem(30))
            assert (await b.append(_idem(20))).base_offset == 20
