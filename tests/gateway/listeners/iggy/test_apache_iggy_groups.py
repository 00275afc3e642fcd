"""apache-iggy 0.9.0: consumer groups, by hand (create/get/list/join/leave/delete) and through the
high-level ``producer`` / ``consumer_group`` API with two members sharing a topic (§5.8)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from apache_iggy import (
    AutoCommit,
    AutoCommitWhen,
    IggyClient,
    Partitioning,
    PollingStrategy,
    ReceiveMessage,
    SendMessage,
)

from gateway.app import Running

from .conftest import Clients, eventually, get_me, run_iggy, with_topic

PARTITIONS = 3


async def _members(client: IggyClient, group: str) -> dict[int, list[int]]:
    """member id -> its partitions, as get_consumer_group reports them."""
    found = await client.get_consumer_group("s", "t", group)
    assert found is not None
    assert found.members_count == len(found.members)
    members = {m.id: m.partitions for m in found.members}
    assert all(len(m.partitions) == m.partitions_count for m in found.members)
    return members


async def test_consumer_group_lifecycle(gateway: Running) -> None:
    async def scenario(clients: Clients) -> None:
        first = await with_topic(clients, partitions=PARTITIONS)
        second = await clients.connect()
        await first.create_consumer_group("s", "t", "workers")
        with pytest.raises(RuntimeError, match="already exists"):
            await first.create_consumer_group("s", "t", "workers")
        await first.create_consumer_group("s", "t", "auditors")

        created = await first.get_consumer_group("s", "t", "workers")
        assert created is not None
        assert (created.name, created.partitions_count, created.members_count) == (
            "workers", PARTITIONS, 0,
        )  # fmt: skip
        assert created.members == []
        by_id = await first.get_consumer_group("s", "t", created.id)
        assert by_id is not None and by_id.name == "workers"
        assert await first.get_consumer_group("s", "t", "no-such-group") is None
        listed = {g.name: g for g in await first.get_consumer_groups("s", "t")}
        assert set(listed) == {"workers", "auditors"}
        assert (listed["workers"].id, listed["workers"].partitions_count) == (
            created.id, PARTITIONS,
        )  # fmt: skip

        one, two = (await get_me(first)).client_id, (await get_me(second)).client_id
        await first.join_consumer_group("s", "t", "workers")
        assert await _members(first, "workers") == {one: [0, 1, 2]}
        await second.join_consumer_group("s", "t", "workers")
        members = await _members(first, "workers")
        assert set(members) == {one, two}
        assert sorted(members[one] + members[two]) == [0, 1, 2]  # shared, not duplicated
        assert members[one] and members[two]
        listed = {g.name: g for g in await first.get_consumer_groups("s", "t")}
        assert (listed["workers"].members_count, listed["auditors"].members_count) == (2, 0)

        await first.leave_consumer_group("s", "t", "workers")
        assert await _members(second, "workers") == {two: [0, 1, 2]}
        await first.delete_consumer_group("s", "t", "workers")
        assert await first.get_consumer_group("s", "t", "workers") is None
        assert [g.name for g in await first.get_consumer_groups("s", "t")] == ["auditors"]
        with pytest.raises(RuntimeError):
            await first.join_consumer_group("s", "t", "workers")

    await run_iggy(gateway, scenario)


async def test_two_group_consumers_share_a_topic(gateway: Running) -> None:
    n = 60

    async def member(clients: Clients, got: list[ReceiveMessage], stop: asyncio.Event) -> None:
        client = await clients.connect()
        consumer = await client.consumer_group(
            "shared", "s", "t", polling_strategy=PollingStrategy.Next(), batch_length=10,
            auto_commit=AutoCommit.When(AutoCommitWhen.PollingMessages()),
            poll_interval=timedelta(milliseconds=20),
        )  # fmt: skip

        async def collect(message: ReceiveMessage) -> None:
            got.append(message)

        await consumer.consume_messages(collect, stop)

    async def scenario(clients: Clients) -> None:
        root = await clients.connect()
        producer = await root.producer(
            "s", "t", Partitioning.balanced(), topic_partitions_count=PARTITIONS
        )  # creates the stream and the topic
        topic = await root.get_topic("s", "t")
        assert topic is not None and topic.partitions_count == PARTITIONS

        a: list[ReceiveMessage] = []
        b: list[ReceiveMessage] = []
        stop = asyncio.Event()
        members = [asyncio.create_task(member(clients, got, stop)) for got in (a, b)]

        async def both_joined() -> bool:
            group = await root.get_consumer_group("s", "t", "shared")
            return group is not None and group.members_count == 2

        await eventually(both_joined)
        sent = [f"message-{i}".encode() for i in range(n)]
        for value in sent:  # one send each: balanced partitioning spreads them evenly
            await producer.send([SendMessage(value)])
        await producer.shutdown()

        async def all_arrived() -> bool:
            return len(a) + len(b) >= n

        try:
            await eventually(all_arrived, limit_s=15)
            await asyncio.sleep(0.2)  # time for a duplicate to show up, if there were one
        finally:
            stop.set()
            await asyncio.wait_for(asyncio.gather(*members), 10)

        got_a = [m.payload() for m in a]
        got_b = [m.payload() for m in b]
        assert len(got_a) + len(got_b) == n  # exactly once overall
        assert set(got_a) | set(got_b) == set(sent)
        assert set(got_a) & set(got_b) == set()
        parts_a = {m.partition_id() for m in a}
        parts_b = {m.partition_id() for m in b}
        assert parts_a.isdisjoint(parts_b) and parts_a | parts_b == {0, 1, 2}
        # Each member holds at least one partition, so at least one partition's worth.
        assert min(len(got_a), len(got_b)) >= n // PARTITIONS
        for got in (a, b):  # in order within each partition
            for p in {m.partition_id() for m in got}:
                offs = [m.offset() for m in got if m.partition_id() == p]
                assert offs == list(range(len(offs)))

    await run_iggy(gateway, scenario, limit_s=40)
