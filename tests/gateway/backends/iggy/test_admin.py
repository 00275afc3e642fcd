"""Streams and topics through the Iggy backend beyond the conformance suite: renames, settings,
stream purges and what describe says about partitions."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from gateway.model import (
    Append,
    CreateStream,
    CreateTopic,
    DescribeTopic,
    Message,
    MessageBatch,
    PurgeStream,
    Read,
    StreamExists,
    Topic,
    TopicConfig,
    UnknownStream,
    UnknownTopic,
    UpdateStream,
    UpdateTopic,
)
from tests.helpers.iggy_upstream import chained_iggy_backend


async def test_renames_settings_and_purges(tmp_path: Path) -> None:
    config = TopicConfig(retention_ms=3_600_000, retention_bytes=1 << 20, compression="gzip")
    with trio.fail_after(20):
        async with chained_iggy_backend(tmp_path / "upstream") as backend:
            created = await backend.create_stream(CreateStream(stream="a"))
            with pytest.raises(StreamExists):
                await backend.create_stream(CreateStream(stream="a"))
            topic = Topic("a", "t")
            info = (
                await backend.create_topic(CreateTopic(topic=topic, partitions=2, config=config))
            ).info
            assert (info.config.retention_ms, info.config.retention_bytes) == (3_600_000, 1 << 20)
            assert info.config.compression == "gzip"
            batch = MessageBatch([Message(value=b"x" * 10) for _ in range(4)])
            await backend.append(Append(topic=topic, partition=1, batch=batch))
            [p0, p1] = (await backend.describe_topic(DescribeTopic(topic=topic))).info.partitions
            assert (p0.log_start_offset, p0.next_offset) == (0, 0)
            assert (p1.log_start_offset, p1.next_offset) == (0, 4) and p1.size_bytes > 0

            renamed = await backend.update_stream(UpdateStream(stream="a", new_name="b"))
            assert (renamed.info.name, renamed.info.id) == ("b", created.info.id)
            assert [t.topic for t in renamed.info.topics] == [Topic("b", "t")]
            with pytest.raises(UnknownStream):
                await backend.describe_topic(DescribeTopic(topic=topic))

            topic = Topic("b", "t")
            update = UpdateTopic(topic=topic, config=TopicConfig(retention_ms=60_000), new_name="u")
            updated = (await backend.update_topic(update)).info
            assert updated.topic == Topic("b", "u") and updated.id == info.id
            # UpdateTopic changes what it names (canonical and Iggy alike): the rest stays.
            assert (updated.config.retention_ms, updated.config.retention_bytes) == (
                60_000,
                1 << 20,
            )
            assert updated.config.compression == "gzip"
            with pytest.raises(UnknownTopic):
                await backend.describe_topic(DescribeTopic(topic=topic))

            topic = Topic("b", "u")
            await backend.purge_stream(PurgeStream(stream="b"))
            [_, p1] = (await backend.describe_topic(DescribeTopic(topic=topic))).info.partitions
            assert (p1.log_start_offset, p1.next_offset) == (4, 4)
            result = await backend.read(Read(topic=topic, partition=1, offset=4))
            assert result.batches == () and result.high_watermark == 4
