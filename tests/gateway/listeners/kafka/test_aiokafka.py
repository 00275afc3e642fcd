"""aiokafka 0.14 (asyncio, hand-written structs) against the gateway's Kafka listener.

Each scenario is one ``asyncio.run`` in a worker thread (``in_thread``), while the gateway serves
in the test's trio loop.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer  # type: ignore[import-untyped]
from aiokafka.admin import (  # type: ignore[import-untyped]
    AIOKafkaAdminClient,
    NewPartitions,
    NewTopic,
)
from aiokafka.admin.config_resource import (  # type: ignore[import-untyped]
    ConfigResource,
    ConfigResourceType,
)
from aiokafka.coordinator.protocol import ConsumerProtocol  # type: ignore[import-untyped]
from aiokafka.structs import TopicPartition  # type: ignore[import-untyped]

from gateway.app import Running

from .conftest import bootstrap, in_thread

T = TypeVar("T")

TOPIC_ALREADY_EXISTS = 36
DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG = 1, 5  # DescribeConfigs config_source


async def _in_asyncio(main: Callable[[], Awaitable[T]], *, limit_s: float = 60) -> T:
    """Run ``main`` in a fresh asyncio loop in a worker thread, bounded on both sides: asyncio
    cancels it just before the trio bound fails the test, so the client is closed cleanly."""

    async def bounded() -> T:
        return await asyncio.wait_for(main(), limit_s - 5)

    return await in_thread(lambda: asyncio.run(bounded()), limit_s=limit_s)


async def _produce(
    servers: str, topic: str, values: list[bytes], codec: str, *, idempotent: bool
) -> list[int]:
    """Send keyed records with headers, flush, and return the offsets the broker assigned."""
    p = AIOKafkaProducer(bootstrap_servers=servers, request_timeout_ms=15000,
                         compression_type=None if codec == "none" else codec,
                         enable_idempotence=idempotent, linger_ms=5)  # fmt: skip
    await p.start()
    try:
        futures = [
            await p.send(topic, v, key=b"k%d" % i, headers=[("h", b"%d" % i), ("i", b"x" * i)])
            for i, v in enumerate(values)
        ]
        await p.flush()
        offsets = [(await f).offset for f in futures]
        tm = p._txn_manager
        assert (tm is not None) == idempotent
        if idempotent:  # the idempotent path really ran: a producer id, sequences used
            assert tm.producer_id >= 0
            assert tm.sequence_number(TopicPartition(topic, 0)) == len(values)
        return offsets
    finally:
        await p.stop()


async def _consume(servers: str, topic: str, group: str, n: int) -> list[Any]:
    """Join ``group``, read ``n`` records (from its committed offset or the earliest), commit."""
    c = AIOKafkaConsumer(topic, bootstrap_servers=servers, group_id=group,
                         auto_offset_reset="earliest", enable_auto_commit=False,
                         request_timeout_ms=20000)  # fmt: skip
    await c.start()
    got: list[Any] = []
    try:
        while len(got) < n:
            for records in (await c.getmany(timeout_ms=1000)).values():
                got.extend(records)
        await c.commit()
        assert await c.committed(TopicPartition(topic, 0)) == got[-1].offset + 1
        assert not any((await c.getmany(timeout_ms=300)).values())  # nothing beyond
    finally:
        await c.stop()
    return got


@pytest.mark.parametrize(
    ("codec", "idempotent"),
    [
        ("none", False),
        ("none", True),
        ("gzip", False),
        ("snappy", True),
        ("lz4", False),
        ("zstd", True),
    ],
)
async def test_produce_consume_commit_resume(
    gateway: Running, codec: str, idempotent: bool
) -> None:
    servers = bootstrap(gateway)
    topic, group = f"ak-{codec}", f"g-{uuid.uuid4().hex[:8]}"
    first = [b"value-%d-" % i + bytes(range(256)) * (i % 3) for i in range(200)]
    second = [b"more-%d" % i for i in range(50)]

    async def produce(values: list[bytes]) -> list[int]:
        return await _produce(servers, topic, values, codec, idempotent=idempotent)

    async def consume(n: int) -> list[Any]:
        return await _consume(servers, topic, group, n)

    offsets = await _in_asyncio(lambda: produce(first))
    assert offsets == list(range(len(first)))
    got = await _in_asyncio(lambda: consume(len(first)))
    assert [r.value for r in got] == first
    assert [r.offset for r in got] == list(range(len(first)))
    assert [r.key for r in got] == [b"k%d" % i for i in range(len(first))]
    assert list(got[7].headers) == [("h", b"7"), ("i", b"x" * 7)]
    assert list(got[0].headers) == [("h", b"0"), ("i", b"")]
    assert all(r.timestamp > 0 for r in got)

    offsets = await _in_asyncio(lambda: produce(second))
    assert offsets == list(range(len(first), len(first) + len(second)))
    resumed = await _in_asyncio(lambda: consume(len(second)))
    assert [r.value for r in resumed] == second  # nothing before the committed offset
    assert resumed[0].offset == len(first)


async def test_admin(gateway: Running) -> None:
    servers = bootstrap(gateway)

    async def work() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=servers, request_timeout_ms=15000)
        await admin.start()
        try:
            topic = NewTopic("adm", num_partitions=2, replication_factor=1,
                             topic_configs={"retention.ms": "3600000"})  # fmt: skip
            created = (await admin.create_topics([topic])).to_object()
            assert [(t["topic"], t["error_code"]) for t in created["topic_errors"]] == [("adm", 0)]
            again = (await admin.create_topics([topic])).to_object()
            assert [(t["topic"], t["error_code"]) for t in again["topic_errors"]] == [
                ("adm", TOPIC_ALREADY_EXISTS)
            ]
            (described,) = await admin.describe_topics(["adm"])
            assert len(described["partitions"]) == 2

            await admin.create_partitions({"adm": NewPartitions(5)})  # raises on an error code
            (described,) = await admin.describe_topics(["adm"])
            assert sorted(p["partition"] for p in described["partitions"]) == [0, 1, 2, 3, 4]

            (response,) = await admin.describe_configs(
                [ConfigResource(ConfigResourceType.TOPIC, "adm")]
            )
            (resource,) = response.to_object()["resources"]
            assert (resource["error_code"], resource["resource_name"]) == (0, "adm")
            entries = {e["config_names"]: e for e in resource["config_entries"]}
            assert entries["retention.ms"]["config_value"] == "3600000"
            assert entries["retention.ms"]["config_source"] == DYNAMIC_TOPIC_CONFIG
            assert entries["cleanup.policy"]["config_value"] == "delete"
            assert entries["cleanup.policy"]["config_source"] == DEFAULT_CONFIG

            deleted = (await admin.delete_topics(["adm"])).to_object()
            assert [(t["topic"], t["error_code"]) for t in deleted["topic_error_codes"]] == [
                ("adm", 0)
            ]
            assert "adm" not in await admin.list_topics()
        finally:
            await admin.close()

    await _in_asyncio(work)


async def test_groups_listed_and_described(gateway: Running) -> None:
    servers = bootstrap(gateway)

    async def work() -> None:
        await _produce(servers, "ak-grp", [b"x"] * 3, "none", idempotent=False)
        c = AIOKafkaConsumer("ak-grp", bootstrap_servers=servers, group_id="ak-described",
                             auto_offset_reset="earliest", enable_auto_commit=False)  # fmt: skip
        admin = AIOKafkaAdminClient(bootstrap_servers=servers, request_timeout_ms=15000)
        await c.start()
        await admin.start()
        try:
            got: list[Any] = []
            while len(got) < 3:
                for records in (await c.getmany(timeout_ms=1000)).values():
                    got.extend(records)
            await c.commit()

            listed = await admin.list_consumer_groups()
            assert ("ak-described", "consumer") in listed, listed
            (response,) = await admin.describe_consumer_groups(["ak-described"])
            (group,) = response.to_object()["groups"]
            assert group["error_code"] == 0
            assert (group["group"], group["state"]) == ("ak-described", "Stable")
            assert (group["protocol_type"], group["protocol"]) == ("consumer", "roundrobin")
            (member,) = group["members"]
            assignment = ConsumerProtocol.ASSIGNMENT.decode(member["member_assignment"])
            assert assignment.partitions() == [TopicPartition("ak-grp", 0)]
            metadata = ConsumerProtocol.METADATA.decode(member["member_metadata"])
            assert metadata.subscription == ["ak-grp"]

            offsets = await admin.list_consumer_group_offsets("ak-described")
            assert offsets[TopicPartition("ak-grp", 0)].offset == 3
        finally:
            await admin.close()
            await c.stop()

    await _in_asyncio(work)
