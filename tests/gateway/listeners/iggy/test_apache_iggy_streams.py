"""apache-iggy 0.9.0: streams, topics (with their options) and partitions (iggy.md §5.3-§5.5)."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from apache_iggy import (
    Durability,
    IggyClient,
    IggyExpiry,
    MaxTopicSize,
    PollingStrategy,
    SendMessage,
)

from gateway.app import Running

from .conftest import Clients, poll, run_iggy, texts, with_stream, with_topic

HOUR = timedelta(hours=1)


async def _topic_messages(client: IggyClient, stream: str, topic: str) -> list[int]:
    """Per-partition message counts as get_topic reports them."""
    found = await client.get_topic(stream, topic)
    assert found is not None
    return [p.messages_count for p in found.partitions]


async def test_stream_lifecycle(gateway: Running) -> None:
    async def scenario(clients: Clients) -> None:
        client = await clients.connect()
        before_us = time.time_ns() // 1000
        await client.create_stream("orders")
        with pytest.raises(RuntimeError, match="already exists"):
            await client.create_stream("orders")
        by_name = await client.get_stream("orders")
        assert by_name is not None
        assert (by_name.name, by_name.topics_count, by_name.messages_count, by_name.size) == (
            "orders", 0, 0, 0,
        )  # fmt: skip
        assert before_us <= by_name.created_at <= time.time_ns() // 1000
        by_id = await client.get_stream(by_name.id)
        assert by_id is not None
        assert (by_id.name, by_id.created_at) == ("orders", by_name.created_at)
        assert await client.get_stream("no-such-stream") is None
        assert await client.get_stream(by_name.id + 100) is None

        await client.create_stream("audit")
        listed = {s.name: s for s in await client.get_streams()}
        assert set(listed) == {"orders", "audit"}
        assert listed["orders"].id == by_name.id != listed["audit"].id

        await client.update_stream("orders", "orders-v2")
        assert await client.get_stream("orders") is None
        renamed = await client.get_stream("orders-v2")
        assert renamed is not None and (renamed.id, renamed.name) == (by_name.id, "orders-v2")

        await client.create_topic("orders-v2", "placed", 2)
        await client.create_topic("orders-v2", "shipped", 1)
        await client.send_messages("orders-v2", "placed", 1, texts(3))
        await client.send_messages("orders-v2", "shipped", 0, texts(2))
        full = await client.get_stream(by_name.id)
        assert full is not None
        assert (full.topics_count, full.messages_count) == (2, 5)
        assert full.size > 0
        assert sorted((t.name, t.partitions_count) for t in full.topics) == [
            ("placed", 2), ("shipped", 1),
        ]  # fmt: skip

        await client.purge_stream("orders-v2")
        purged = await client.get_stream("orders-v2")
        assert purged is not None and (purged.topics_count, purged.messages_count) == (2, 0)
        assert await poll(client, "orders-v2", "placed", PollingStrategy.First(), partition=1) == []
        await client.send_messages("orders-v2", "placed", 1, texts(1, "after"))
        assert await _topic_messages(client, "orders-v2", "placed") == [0, 1]

        await client.delete_stream("orders-v2")
        assert await client.get_stream("orders-v2") is None
        assert [s.name for s in await client.get_streams()] == ["audit"]
        with pytest.raises(RuntimeError):
            await client.delete_stream("orders-v2")

    await run_iggy(gateway, scenario)


async def test_topic_options_round_trip(gateway: Running) -> None:
    async def scenario(clients: Clients) -> None:
        client = await with_stream(clients)
        await client.create_topic(
            "s", "tuned", 3, compression_algorithm="gzip",
            message_expiry=IggyExpiry.ExpireDuration(HOUR),
            max_topic_size=MaxTopicSize.Custom(10_000_000), segment_size=1_000_000,
            durability=Durability.PERSISTED,
        )  # fmt: skip
        await client.create_topic("s", "plain", 1)
        with pytest.raises(RuntimeError, match="already exists"):
            await client.create_topic("s", "plain", 2)

        tuned = await client.get_topic("s", "tuned")
        assert tuned is not None
        assert (tuned.name, tuned.partitions_count, tuned.compression_algorithm) == (
            "tuned", 3, "gzip",
        )  # fmt: skip
        assert isinstance(tuned.message_expiry, IggyExpiry.ExpireDuration)
        assert tuned.message_expiry.duration == HOUR
        assert isinstance(tuned.max_topic_size, MaxTopicSize.Custom)
        assert tuned.max_topic_size.bytes == 10_000_000
        assert tuned.options.to_scalar_dict()["durability"] == "persisted"
        assert [p.id for p in tuned.partitions] == [0, 1, 2]
        assert all(p.messages_count == 0 for p in tuned.partitions)
        by_id = await client.get_topic("s", tuned.id)
        assert by_id is not None and (by_id.name, by_id.created_at) == ("tuned", tuned.created_at)
        assert await client.get_topic("s", "no-such-topic") is None

        plain = await client.get_topic("s", "plain")
        assert plain is not None
        assert (plain.partitions_count, plain.compression_algorithm) == (1, "none")
        assert isinstance(plain.message_expiry, IggyExpiry.NeverExpire)  # the server default

        listed = {t.name: t for t in await client.get_topics("s")}
        assert set(listed) == {"tuned", "plain"}
        t = listed["tuned"]
        assert (t.id, t.partitions_count, t.compression_algorithm) == (tuned.id, 3, "gzip")
        assert isinstance(t.max_topic_size, MaxTopicSize.Custom) and t.max_topic_size.bytes == (
            10_000_000
        )

    await run_iggy(gateway, scenario)


async def test_update_purge_and_delete_topic(gateway: Running) -> None:
    async def scenario(clients: Clients) -> None:
        client = await with_stream(clients)
        await client.create_topic(
            "s", "events", 2, message_expiry=IggyExpiry.ExpireDuration(HOUR),
            max_topic_size=MaxTopicSize.Custom(5_000_000), segment_size=1_000_000,
        )  # fmt: skip
        await client.update_topic(
            "s", "events", "events-v2", message_expiry=IggyExpiry.ExpireDuration(2 * HOUR)
        )
        assert await client.get_topic("s", "events") is None
        updated = await client.get_topic("s", "events-v2")
        assert updated is not None
        assert isinstance(updated.message_expiry, IggyExpiry.ExpireDuration)
        assert updated.message_expiry.duration == 2 * HOUR
        # A patch (the .pyi): what the update did not send keeps its value.
        assert isinstance(updated.max_topic_size, MaxTopicSize.Custom)
        assert updated.max_topic_size.bytes == 5_000_000
        assert updated.partitions_count == 2

        await client.send_messages("s", "events-v2", 0, texts(3))
        await client.send_messages("s", "events-v2", 1, texts(2))
        assert await _topic_messages(client, "s", "events-v2") == [3, 2]
        await client.purge_topic("s", "events-v2")
        assert await _topic_messages(client, "s", "events-v2") == [0, 0]
        for partition in (0, 1):
            first = PollingStrategy.First()
            assert await poll(client, "s", "events-v2", first, partition=partition) == []
        await client.send_messages("s", "events-v2", 0, [SendMessage(b"fresh")])
        again = await poll(client, "s", "events-v2", PollingStrategy.First())
        assert [m.payload() for m in again] == [b"fresh"]

        await client.create_topic("s", "other", 1)
        await client.delete_topic("s", "events-v2")
        assert await client.get_topic("s", "events-v2") is None
        assert [t.name for t in await client.get_topics("s")] == ["other"]
        with pytest.raises(RuntimeError):
            await client.delete_topic("s", "events-v2")

    await run_iggy(gateway, scenario)


async def test_create_and_delete_partitions(gateway: Running) -> None:
    async def scenario(clients: Clients) -> None:
        client = await with_topic(clients, partitions=3)
        await client.create_partitions("s", "t", 2)
        grown = await client.get_topic("s", "t")
        assert grown is not None
        assert grown.partitions_count == 5
        assert [p.id for p in grown.partitions] == [0, 1, 2, 3, 4]
        confirmed = await client.send_messages("s", "t", 4, texts(2))
        assert [(c.partition_id, c.base_offset) for c in confirmed.confirmations] == [(4, 0)]
        got = await poll(client, "s", "t", PollingStrategy.First(), partition=4)
        assert [m.payload() for m in got] == [b"m0", b"m1"]

        await client.delete_partitions("s", "t", 3)
        shrunk = await client.get_topic("s", "t")
        assert shrunk is not None
        assert shrunk.partitions_count == 2
        assert [p.id for p in shrunk.partitions] == [0, 1]
        stream = await client.get_stream("s")
        assert stream is not None and stream.topics[0].partitions_count == 2
        with pytest.raises(RuntimeError):
            await client.send_messages("s", "t", 4, texts(1))

    await run_iggy(gateway, scenario)
