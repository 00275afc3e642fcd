"""Iggy consumer groups across two real gateways on one backend (issue 14): apache-iggy 0.9.0
``consumer_group`` members, one through each gateway, of a group created through the first.
Both see the group, hold disjoint partitions covering the topic, and consume 600 messages
(produced by confluent-kafka through the first gateway) exactly once between them; when the
member through the second gateway leaves (or its gateway is SIGKILLed by pid: ``kill``), the
first takes its partitions over and goes on from the offsets the second committed: 60 more,
again exactly once. Run on Tansu, on RabbitMQ and on the chained Iggy backend by their test
modules.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path

from apache_iggy import (
    AutoCommit,
    AutoCommitWhen,
    IggyClient,
    PollingStrategy,
    ReceiveMessage,
    TcpConfig,
)
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from gateway.listeners.iggy.groups_shared import SESSION_TIMEOUT_MS
from tests.helpers.gateways import Gateway, running_gateways
from tests.helpers.kafka_group_members import hold_port
from tests.helpers.rstream_direct import in_asyncio

PARTITIONS = 6
FIRST, MORE = 600, 60
LIMIT_S = 120.0
STREAM, TOPIC, GROUP = "default", "orders", "shared"


def create_topic(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)]).values():
        future.result(20)


def fill(bootstrap: str, start: int, n: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(start, start + n):
        producer.produce(TOPIC, value=b"m%d" % i, key=b"key-%d" % i)
    assert producer.flush(30) == 0


def iggy_address(gateway: Gateway) -> str:
    return f"127.0.0.1:{gateway.port('iggy')}"


async def connect(address: str) -> IggyClient:
    client = IggyClient(TcpConfig(server_address=address))
    await client.connect()
    await client.login_user("iggy", "iggy")
    return client


async def eventually_true(check: Callable[[], Awaitable[bool]], limit_s: float, what: str) -> None:
    deadline = time.monotonic() + limit_s
    while not await check():
        assert time.monotonic() < deadline, f"not reached in {limit_s} s: {what}"
        await asyncio.sleep(0.1)


async def hold_when_free(address: str) -> None:
    """``hold_port`` once the killed process let go of the port."""
    deadline = time.monotonic() + 10
    while True:
        try:
            hold_port(address)
            return
        except OSError:
            assert time.monotonic() < deadline, f"{address} still bound"
            await asyncio.sleep(0.05)


async def members_of(client: IggyClient) -> dict[int, list[int]]:
    group = await client.get_consumer_group(STREAM, TOPIC, GROUP)
    assert group is not None
    return {m.id: sorted(m.partitions) for m in group.members}


async def one_group_across_two_gateways(url: str, tmp_path: Path, *, kill: bool = False) -> None:
    async with running_gateways(url, tmp_path, 2) as (a, b):

        async def scenario() -> None:
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, create_topic, a.kafka)
            root_a, root_b = await connect(iggy_address(a)), await connect(iggy_address(b))
            await root_a.create_consumer_group(STREAM, TOPIC, GROUP)
            # Created through a, there through b; its name taken through b too.
            seen = await root_b.get_consumer_group(STREAM, TOPIC, GROUP)
            assert seen is not None and seen.partitions_count == PARTITIONS
            try:
                await root_b.create_consumer_group(STREAM, TOPIC, GROUP)
                raise AssertionError("a second create of the name was accepted")
            except RuntimeError as exc:
                assert "already exists" in str(exc), exc

            got: dict[str, list[ReceiveMessage]] = {"a": [], "b": []}
            stops = {"a": asyncio.Event(), "b": asyncio.Event()}
            clients = {"a": await connect(iggy_address(a)), "b": await connect(iggy_address(b))}

            async def member(who: str) -> None:
                consumer = await clients[who].consumer_group(
                    GROUP, STREAM, TOPIC, polling_strategy=PollingStrategy.Next(),
                    batch_length=50, create_consumer_group_if_not_exists=False,
                    auto_commit=AutoCommit.When(AutoCommitWhen.PollingMessages()),
                    poll_interval=timedelta(milliseconds=20),
                )  # fmt: skip

                async def collect(message: ReceiveMessage) -> None:
                    got[who].append(message)

                await consumer.consume_messages(collect, stops[who])

            tasks = {who: asyncio.create_task(member(who)) for who in ("a", "b")}

            async def spread() -> bool:  # seen alike through both gateways
                members = [await members_of(root_b), await members_of(root_a)]
                parts = sorted(p for ps in members[0].values() for p in ps)
                return (
                    members[0] == members[1] and len(members[0]) == 2
                    and all(members[0].values()) and parts == list(range(PARTITIONS))
                )  # fmt: skip

            await eventually_true(spread, 40, "two members, each with partitions")

            await loop.run_in_executor(None, fill, a.kafka, 0, FIRST)

            async def counted(n: int) -> bool:
                return len(got["a"]) + len(got["b"]) >= n

            await eventually_true(lambda: counted(FIRST), 40, f"{FIRST} messages consumed")
            await asyncio.sleep(1)  # time for a duplicate to show up, if there were one
            values = Counter(m.payload() for who in got for m in got[who])
            assert values == Counter(b"m%d" % i for i in range(FIRST)), "not exactly once"
            parts = {who: {m.partition_id() for m in got[who]} for who in got}
            assert got["a"] and got["b"] and parts["a"].isdisjoint(parts["b"]), parts

            # b leaves: a takes every partition over, from the offsets b committed.
            stops["b"].set()
            if kill:
                # A crash: b's member stops heartbeating; its client is left talking to a held,
                # never-accepting port, so it cannot reach another process there.
                os.kill(b.process.pid, signal.SIGKILL)
                await hold_when_free(iggy_address(b))
                tasks["b"].cancel()
            else:
                await asyncio.wait_for(tasks["b"], 10)
                await clients["b"].leave_consumer_group(STREAM, TOPIC, GROUP)

            async def a_holds_all() -> bool:
                members = await members_of(root_a)
                return list(members.values()) == [list(range(PARTITIONS))]

            await eventually_true(a_holds_all, SESSION_TIMEOUT_MS / 1000 + 20, "a holds all")
            await loop.run_in_executor(None, fill, a.kafka, FIRST, MORE)
            await eventually_true(lambda: counted(FIRST + MORE), 40, "the rest consumed by a")
            await asyncio.sleep(1)
            stops["a"].set()
            await asyncio.wait_for(tasks["a"], 10)
            values = Counter(m.payload() for who in got for m in got[who])
            assert values == Counter(b"m%d" % i for i in range(FIRST + MORE)), "not exactly once"

        await in_asyncio(scenario, limit_s=LIMIT_S)


__all__ = ["LIMIT_S", "one_group_across_two_gateways"]
