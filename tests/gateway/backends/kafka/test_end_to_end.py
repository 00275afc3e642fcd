"""streamgate in front of a real Kafka-compatible broker (Tansu, kafka.md §5): what real clients
write through the gateway is in the broker for clients that talk to it directly, and the
reverse. Values, keys, headers and timestamps as DESIGN.md §3 says."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
import trio
from confluent_kafka import TIMESTAMP_CREATE_TIME, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from gateway.app import Running
from gateway.translate.kafka.messages import CARRIED_KINDS
from tests.gateway.listeners.rabbitmq_stream.conftest import run_client
from tests.gateway.listeners.rabbitmq_stream.test_bridge import (
    COUNT,
    T0_MS,
    body_of,
    publish_with_rstream,
    read_with_rstream,
)
from tests.gateway.listeners.test_connection import start
from tests.helpers.tansu import Tansu

from .conftest import direct

N = 20
T0 = 1_700_000_000_000
Record = tuple[int, bytes | None, bytes | None, list[tuple[str, bytes]], tuple[int, int]]


@pytest.fixture
async def gateway(tmp_path: Path, tansu: Tansu, nursery: trio.Nursery) -> Running:
    """A gateway whose one backend is the Tansu of this test."""
    return await start(nursery, tmp_path, **{"backend.url": tansu.url})


def servers(running: Running) -> str:
    host, port = running.address("kafka")
    return f"{host}:{port}"


async def in_thread(fn: Any, limit_s: float = 60) -> Any:
    with trio.fail_after(limit_s):
        return await trio.to_thread.run_sync(fn, abandon_on_cancel=True)


def produce(bootstrap: str, topic: str) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "compression.type": "lz4", "linger.ms": 5})
    for i in range(N):
        p.produce(
            topic, b"value %d " % i + bytes(range(256)), key=b"key-%d" % i, partition=0,
            headers=[("h", b"v%d" % i), ("bin", bytes([0, 255, i]))], timestamp=T0 + i,
        )  # fmt: skip
    assert p.flush(20) == 0


def consume(bootstrap: str, topic: str, count: int, group: str | None = None) -> list[Record]:
    """``count`` records of partition 0: as a group member (subscribe) or by assignment. The
    broker runs the group, and Tansu holds a new member's JoinGroup for half its session
    timeout: 6 s (Kafka's minimum) keeps that to 3 s."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group or f"g-{uuid.uuid4().hex}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "session.timeout.ms": 6000})  # fmt: skip
    if group is None:
        c.assign([TopicPartition(topic, 0, 0)])
    else:
        c.subscribe([topic])
    got: list[Record] = []
    try:
        while len(got) < count:
            msg = c.poll(10)
            assert msg is not None and msg.error() is None, msg and msg.error()
            raw: Any = msg.headers() or []  # confluent's stubs type it loosely
            offset = msg.offset()
            assert offset is not None
            headers = [(str(k), bytes(v or b"")) for k, v in raw]
            got.append((offset, msg.key(), msg.value(), headers, msg.timestamp()))
        if group is not None:
            c.commit(asynchronous=False)
    finally:
        c.close()
    return got


def expected() -> list[Record]:
    return [
        (i, b"key-%d" % i, b"value %d " % i + bytes(range(256)),
         [("h", b"v%d" % i), ("bin", bytes([0, 255, i]))], (TIMESTAMP_CREATE_TIME, T0 + i))
        for i in range(N)
    ]  # fmt: skip


async def test_produced_through_the_gateway_read_from_the_broker(
    gateway: Running, tansu: Tansu
) -> None:
    await in_thread(lambda: produce(servers(gateway), "through"))
    assert await in_thread(lambda: consume(tansu.bootstrap, "through", N)) == expected()


async def test_produced_to_the_broker_read_through_the_gateway(
    gateway: Running, tansu: Tansu
) -> None:
    def create() -> None:
        admin = AdminClient({"bootstrap.servers": tansu.bootstrap})
        futures = admin.create_topics([NewTopic("direct", num_partitions=1, replication_factor=1)])
        for future in futures.values():
            future.result(10)

    await in_thread(create)
    await in_thread(lambda: produce(tansu.bootstrap, "direct"))
    got = await in_thread(lambda: consume(servers(gateway), "direct", N, group="via-gateway"))
    assert got == expected()
    # The gateway's group committed where the broker keeps offsets (native offsets).
    answer = await direct(
        tansu,
        9,
        5,
        {"group_id": "via-gateway", "topics": [{"name": "direct", "partition_indexes": [0]}]},
    )
    assert answer.topics[0].partitions[0].committed_offset == N


async def test_rstream_through_the_gateway_both_ways(gateway: Running, tansu: Tansu) -> None:
    """AMQP bodies, typed application properties and creation times: into the broker as Kafka
    records (typed kinds in ``streamgate.header-kinds``) and back to rstream intact."""
    await publish_with_rstream(gateway, "from-rstream")
    got = await in_thread(lambda: consume(tansu.bootstrap, "from-rstream", COUNT))
    assert [(o, v) for o, _, v, _, _ in got] == [(i, body_of(i)) for i in range(COUNT)]
    for i, (_, _, _, headers, timestamp) in enumerate(got):
        assert [name for name, _ in headers] == ["text", "n", "neg", "big", CARRIED_KINDS], i
        assert headers[0] == ("text", f"caf\u00e9 {i}".encode()), i
        assert timestamp == (TIMESTAMP_CREATE_TIME, T0_MS + i), i
    back = await run_client(gateway, lambda h, p: read_with_rstream(h, p, "from-rstream", COUNT))
    assert [(o, m.body) for o, m, _ in back] == [(i, body_of(i)) for i in range(COUNT)]
    for i, (_, message, _) in enumerate(back):
        assert message.application_properties == {
            b"text": f"caf\u00e9 {i}".encode(),
            b"n": i,
            b"neg": -i - 1,
            b"big": (1 << 40) + i,
        }, i
