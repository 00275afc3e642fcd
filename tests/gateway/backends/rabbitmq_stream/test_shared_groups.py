"""Many gateways, one RabbitMQ (issue 14): consumer groups shared by every gateway on it.

RabbitMQ has no group coordinator, so the gateways replicate their groups over the coordination
stream (``coordination.shared_groups``). Real ``streamgate run`` processes on a real RabbitMQ
3.10.8, real clients:
- one Kafka group's confluent-kafka consumers through three gateways share the partitions
  (disjoint, covering all) and every message is counted once across the rebalance the third one
  causes; DescribeGroups through any gateway shows the one group;
- a SIGKILLed gateway's member expires after its session timeout (the survivors' ticks move the
  log's clock), its partitions resume through the other gateway from the offsets committed
  through the dead one;
- RabbitMQ Stream single active consumer through two gateways has one active member;
- ``streamgate run --workers 2`` on RabbitMQ (no longer refused): one group's members through
  the shared port (the kernel picks a worker per connection) share the partitions;
- a Kafka idempotent producer's retry through the other gateway is stored once, SIGKILL
  included: the gateway grants the id, RabbitMQ deduplicates by it (publisher reference of the
  id and epoch, the sequence as publishing id).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from tests.helpers.gateways import running_gateways, supervisor
from tests.helpers.iggy_groups_across_gateways import one_group_across_two_gateways
from tests.helpers.kafka_group_members import (
    MESSAGES,
    Counted,
    committed,
    create_and_fill,
    describe,
    idempotent_retries_through_two_gateways,
    in_thread,
    member,
    members_move_off_a_killed_gateway,
    settled,
    until,
)
from tests.helpers.rstream_direct import read_until
from tests.helpers.sac_across_gateways import one_active_consumer_across_two_gateways

from .conftest import Broker, in_asyncio

LIMIT_S = 90.0


async def test_one_group_through_three_gateways_counts_every_message_once(
    broker: Broker, tmp_path: Path
) -> None:
    counted = Counted()
    names = ["via-a", "via-b", "via-c"]
    async with running_gateways(broker.url, tmp_path, 3) as (a, b, c):
        with trio.fail_after(LIMIT_S):
            await in_thread(lambda: create_and_fill(a.kafka, "orders"))
            async with trio.open_nursery() as nursery:
                for name, gateway in zip(names[:2], (a, b), strict=True):
                    nursery.start_soon(
                        in_thread,
                        lambda n=name, g=gateway: member(n, g.kafka, "orders", "g", counted),
                    )
                # The third joins once the first two are consuming: a rebalance mid-stream.
                await until(lambda: counted.total() >= 100, 30, "100 messages counted")
                nursery.start_soon(
                    in_thread, lambda: member("via-c", c.kafka, "orders", "g", counted)
                )
                await until(lambda: settled(counted, names), 45, f"3 members: {counted.assigned}")
                await until(lambda: counted.total() == MESSAGES, 30, "600 messages counted")
                # One group, seen the same through every gateway.
                seen = [await describe(g.kafka, "g") for g in (a, b, c)]
                counted.stop.set()
    for group in seen:
        assert (group.group_state, len(group.members)) == ("Stable", 3)
    assert {m.member_id for m in seen[0].members} == set(counted.member_ids.values())
    assert len(counted.times) == MESSAGES
    assert set(counted.times.values()) == {1}, "a message was counted twice"


async def test_a_killed_gateways_members_move_to_the_other_gateway(
    broker: Broker, tmp_path: Path
) -> None:
    """The survivor's replica expires a SIGKILLed gateway's member after its session timeout
    (its ticks move the log's clock)."""
    async with running_gateways(broker.url, tmp_path, 2) as (a, b):
        with trio.fail_after(LIMIT_S):
            await members_move_off_a_killed_gateway(a, b, lambda: committed(b.kafka, "orders", "g"))


# rstream 1.1.1 leaves the socket and StreamWriter of a connection whose server died open (its
# reader task ends without closing them): unraisable ResourceWarnings of the library's.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
async def test_one_active_consumer_across_two_gateways(broker: Broker, tmp_path: Path) -> None:
    await one_active_consumer_across_two_gateways(broker.url, tmp_path)


async def test_one_iggy_group_across_two_gateways(broker: Broker, tmp_path: Path) -> None:
    await one_group_across_two_gateways(broker.url, tmp_path)


async def test_an_idempotent_retry_through_the_other_gateway_is_stored_once(
    broker: Broker, tmp_path: Path
) -> None:
    async with running_gateways(broker.url, tmp_path, 2) as (a, b):
        with trio.fail_after(LIMIT_S):
            await idempotent_retries_through_two_gateways(a, b)
    # Everything the stream holds: reading goes on until nothing more comes (WAIT_S).
    got = await in_asyncio(
        lambda: read_until(broker.rstream(), "once", lambda got: len(got) > 9, strict=False)
    )
    values = [entry[-2:] for _, entry, _ in got]  # AMQP 1.0 entries: the data section last
    assert values == [b"s%d" % i for i in range(9)], values


async def test_workers_on_rabbitmq_share_one_group(broker: Broker, tmp_path: Path) -> None:
    counted = Counted()
    names = ["one", "two"]
    async with supervisor(tmp_path, broker.url, workers=2) as (_, addresses, pids):
        kafka = addresses["kafka"]
        with trio.fail_after(LIMIT_S):
            await in_thread(lambda: create_and_fill(kafka, "orders"))
            async with trio.open_nursery() as nursery:
                for name in names:
                    nursery.start_soon(
                        in_thread, lambda n=name: member(n, kafka, "orders", "g", counted)
                    )
                await until(lambda: settled(counted, names), 45, f"2 members: {counted.assigned}")
                await until(lambda: counted.total() == MESSAGES, 30, "600 messages counted")
                group = await describe(kafka, "g")
                counted.stop.set()
    assert len(pids) == 2
    assert (group.group_state, len(group.members)) == ("Stable", 2)
    assert len(counted.times) == MESSAGES
    assert set(counted.times.values()) == {1}, "a message was counted twice"
