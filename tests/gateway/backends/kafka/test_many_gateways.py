"""Many gateways, one Kafka broker (issue 14): sidecars and replicas in front of a real Tansu.

Each gateway is a real ``streamgate run`` process; the clients are confluent-kafka (librdkafka)
and raw Kafka frames. The broker is the group coordinator and the deduplicator, so:
- one group's consumers through different gateways share the partitions (disjoint, covering all)
  and every message is counted once: a member counts a message only when the broker took its
  commit, and the broker refuses a commit from a stale generation, whichever gateway sent it;
- a SIGKILLed gateway's members leave when the broker's session timeout passes, and their
  partitions resume through the other gateway from the offsets committed through the dead one;
- an idempotent producer's retry through another gateway is stored once, SIGKILL included.

Tansu holds a new member's JoinGroup for half its session timeout, so the consumers use 6 s
(Kafka's group.min.session.timeout.ms).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
from kafka import KafkaConsumer  # type: ignore[import-untyped]

from protocols.kafka import iter_batches
from tests.helpers.gateways import Gateway, running_gateways
from tests.helpers.kafka_group_members import (
    MESSAGES,
    PARTITIONS,
    SESSION_MS,
    Counted,
    create_and_fill,
    describe,
    idempotent_retries_through_two_gateways,
    in_thread,
    kafka_call,
    member,
    members_move_off_a_killed_gateway,
    settled,
    until,
)
from tests.helpers.tansu import Tansu

from .conftest import direct, fetch_direct

LIMIT_S = 90.0  # a whole test: three rebalances at Tansu's pace, a session timeout, clients


@pytest.fixture
async def three(tansu: Tansu, tmp_path: Path) -> Any:
    async with running_gateways(tansu.url, tmp_path, 3) as gateways:
        yield gateways


async def test_one_group_through_three_gateways_counts_every_message_once(
    tansu: Tansu, three: list[Gateway]
) -> None:
    a, b, c = three
    counted = Counted()
    names = ["via-a", "via-b", "via-c"]
    with trio.fail_after(LIMIT_S):
        await in_thread(lambda: create_and_fill(a.kafka, "orders"))
        async with trio.open_nursery() as nursery:
            for name, gateway in zip(names[:2], (a, b), strict=True):
                nursery.start_soon(
                    in_thread, lambda n=name, g=gateway: member(n, g.kafka, "orders", "g", counted)
                )
            # The third joins once the first two are consuming: a rebalance mid-stream.
            await until(lambda: counted.total() >= 100, 30, "100 messages counted")
            nursery.start_soon(in_thread, lambda: member("via-c", c.kafka, "orders", "g", counted))
            await until(lambda: settled(counted, names), 45, f"3 members: {counted.assigned}")
            await until(lambda: counted.total() == MESSAGES, 30, "600 messages counted")
            # One group at the broker, seen the same through any gateway and directly.
            for where in (a.kafka, c.kafka, tansu.bootstrap):
                group = await describe(where, "g")
                assert (group.group_state, len(group.members)) == ("Stable", 3), where
            counted.stop.set()
    assert sorted(counted.times) == sorted(
        (p, o) for p in range(PARTITIONS) for o in range(_sizes(counted)[p])
    )
    assert set(counted.times.values()) == {1}, "a message was counted twice"


def _sizes(counted: Counted) -> dict[int, int]:
    sizes = dict.fromkeys(range(PARTITIONS), 0)
    for p, o in counted.times:
        sizes[p] = max(sizes[p], o + 1)
    assert sum(sizes.values()) == MESSAGES, sizes
    return sizes


async def committed(tansu: Tansu, topic: str, group: str) -> dict[int, int]:
    """The group's committed offsets, asked of the broker itself."""
    answer = await direct(
        tansu, 9, 5,
        {"group_id": group, "topics": [{"name": topic, "partition_indexes": list(range(6))}]},
    )  # fmt: skip
    return {p.partition_index: p.committed_offset for p in answer.topics[0].partitions}


async def test_a_killed_gateways_members_move_to_the_other_gateway(
    tansu: Tansu, tmp_path: Path
) -> None:
    """The broker drops a SIGKILLed gateway's member after its session timeout."""
    async with running_gateways(tansu.url, tmp_path, 2) as (a, b):
        with trio.fail_after(LIMIT_S):
            await members_move_off_a_killed_gateway(a, b, lambda: committed(tansu, "orders", "g"))


# --- an idempotent producer's retries through two gateways ---------------------------------------


async def test_an_idempotent_retry_through_the_other_gateway_is_stored_once(
    tansu: Tansu, tmp_path: Path
) -> None:
    async with running_gateways(tansu.url, tmp_path, 2) as (a, b):
        with trio.fail_after(LIMIT_S):
            pid, epoch = await idempotent_retries_through_two_gateways(a, b)
            stored = await fetch_direct(tansu, "once")
    offsets = []
    for header, _ in iter_batches(stored):
        assert (header.producer_id, header.producer_epoch) == (pid, epoch)
        offsets.append((header.base_offset, header.base_sequence, header.records_count))
    assert offsets == [(0, 0, 3), (3, 3, 3), (6, 6, 3)], offsets


async def test_the_broker_sees_the_gateways_members(tansu: Tansu, tmp_path: Path) -> None:
    """DescribeGroups straight at the broker names the member that joined through a gateway by
    the member id the client was given: the broker, not the gateway, holds the group. ListGroups
    through the gateway is the broker's (Tansu lists a group once it has committed offsets)."""
    counted = Counted()
    async with running_gateways(tansu.url, tmp_path, 1) as (a,):
        with trio.fail_after(LIMIT_S):
            await in_thread(lambda: create_and_fill(a.kafka, "seen"))
            async with trio.open_nursery() as nursery:
                nursery.start_soon(
                    in_thread, lambda: member("via-a", a.kafka, "seen", "watched", counted)
                )
                await until(lambda: settled(counted, ["via-a"]), 30, "a member")
                group = await describe(tansu.bootstrap, "watched")
                await until(lambda: counted.total() == MESSAGES, 30, "600 messages counted")
                listed = await direct(tansu, 16, 4, {"states_filter": []})
                through = await kafka_call(a.kafka, 16, 2, {})
                counted.stop.set()
    assert group.group_state == "Stable"
    assert [m.member_id for m in group.members] == [counted.member_ids["via-a"]]
    assert "watched" in {g.group_id for g in listed.groups}
    assert "watched" in {g.group_id for g in through.groups}


# --- other clients, other versions: one group --------------------------------------------------


def kafka_python_member(bootstrap: str, counted: Counted) -> None:
    """kafka-python 3.0 (its own JoinGroup/SyncGroup versions) as a member through one gateway."""
    consumer = KafkaConsumer(
        "mixed", bootstrap_servers=bootstrap, group_id="mixed", auto_offset_reset="earliest",
        enable_auto_commit=False, session_timeout_ms=SESSION_MS, heartbeat_interval_ms=500,
        client_id="kafka-python",
    )  # fmt: skip
    try:
        while not counted.stop.is_set():
            polled = consumer.poll(timeout_ms=200)
            with counted.lock:
                counted.assigned["kafka-python"] = {tp.partition for tp in consumer.assignment()}
            for records in polled.values():
                for record in records:
                    with counted.lock:
                        counted.delivered.add((record.partition, record.offset))
    finally:
        consumer.close(autocommit=False)


async def test_kafka_python_and_librdkafka_members_through_two_gateways_are_one_group(
    tansu: Tansu, tmp_path: Path
) -> None:
    """kafka-python through gateway a and confluent-kafka through gateway b join one broker
    group: each holds half the partitions, and between them every message is delivered."""
    counted = Counted()
    async with running_gateways(tansu.url, tmp_path, 2) as (a, b):
        with trio.fail_after(LIMIT_S):
            await in_thread(lambda: create_and_fill(a.kafka, "mixed"))
            async with trio.open_nursery() as nursery:
                nursery.start_soon(in_thread, lambda: kafka_python_member(a.kafka, counted))
                nursery.start_soon(
                    in_thread, lambda: member("librdkafka", b.kafka, "mixed", "mixed", counted)
                )
                await until(
                    lambda: settled(counted, ["kafka-python", "librdkafka"]), 45, "2 members"
                )
                with counted.lock:
                    held = {name: set(parts) for name, parts in counted.assigned.items()}
                await until(lambda: len(counted.delivered) == MESSAGES, 30, "600 delivered")
                group = await describe(tansu.bootstrap, "mixed")
                counted.stop.set()
    assert (group.group_state, len(group.members)) == ("Stable", 2)
    assert len(held["kafka-python"]) == len(held["librdkafka"]) == 3  # settled: disjoint, all
