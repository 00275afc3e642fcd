"""Partitions per topic (issue 18): ``limits.max_partitions_per_topic`` holds for every listener
(the router checks CreateTopic and CreatePartitions), Kafka answers it INVALID_PARTITIONS with
the setting named, and an Iggy listener keeps Iggy's own 1000 (TooManyPartitions, iggy.md §8)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic  # type: ignore[attr-defined]
from prometheus_client import CollectorRegistry

from gateway.app import Running
from gateway.backends.embedded import open_embedded
from gateway.metrics import Metrics
from gateway.model import CreatePartitions, CreateTopic, InvalidPartitions, Topic
from gateway.router import RequestContext, Router
from protocols.iggy import CreatePartitions as IggyCreatePartitions
from protocols.iggy import CreateStream, Status
from protocols.iggy import CreateTopic as IggyCreateTopic
from tests.conftest import gateway_config, start_gateway
from tests.helpers.iggy_wire import IggyWire

CAP = 50


async def _gateway(tmp_path: Path, nursery: trio.Nursery, **overrides: object) -> Running:
    config = gateway_config(tmp_path / "data", **overrides)
    running = await start_gateway(nursery, config)
    return running


async def test_the_router_caps_every_protocol(tmp_path: Path) -> None:
    with trio.fail_after(20):
        async with open_embedded(tmp_path, fsync="never") as backend:
            metrics = Metrics(CollectorRegistry(), backend=backend.name)
            router = Router(backend, metrics, max_partitions_per_topic=CAP)
            ctx = RequestContext("rog", "create_log")
            topic = Topic("s", "t")
            with pytest.raises(InvalidPartitions, match=r"limits\.max_partitions_per_topic"):
                await router.execute(CreateTopic(topic=topic, partitions=CAP + 1), ctx)
            assert not (tmp_path / "s").exists()  # refused before any file work
            await router.execute(CreateTopic(topic=topic, partitions=CAP), ctx)
            with pytest.raises(InvalidPartitions, match=f"at most {CAP} per topic"):
                await router.execute(CreatePartitions(topic=topic, total=CAP + 1), ctx)


def _kafka_errors(bootstrap: str) -> tuple[KafkaError, KafkaError]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    big = admin.create_topics([NewTopic("big", num_partitions=CAP + 1, replication_factor=1)])
    try:
        big["big"].result(timeout=15)
        raise AssertionError("a topic over the cap was created")
    except KafkaException as exc:
        created: KafkaError = exc.args[0]
    checked = admin.create_topics(
        [NewTopic("big", num_partitions=CAP + 1, replication_factor=1)], validate_only=True
    )
    try:
        checked["big"].result(timeout=15)
        raise AssertionError("a topic over the cap was validated")
    except KafkaException as exc:
        assert exc.args[0].code() == KafkaError.INVALID_PARTITIONS
    ok = admin.create_topics([NewTopic("ok", num_partitions=CAP, replication_factor=1)])
    ok["ok"].result(timeout=15)
    grow = admin.create_partitions([NewPartitions("ok", CAP + 1)])
    try:
        grow["ok"].result(timeout=15)
        raise AssertionError("a topic grew over the cap")
    except KafkaException as exc:
        grown: KafkaError = exc.args[0]
    return created, grown


async def test_kafka_answers_invalid_partitions(tmp_path: Path, nursery: trio.Nursery) -> None:
    running = await _gateway(tmp_path, nursery, **{"limits.max_partitions_per_topic": CAP})
    host, port = running.address("kafka")
    with trio.fail_after(40):
        created, grown = await trio.to_thread.run_sync(_kafka_errors, f"{host}:{port}")
    for error in (created, grown):
        assert error.code() == KafkaError.INVALID_PARTITIONS, error
        assert "limits.max_partitions_per_topic" in error.str()


async def test_iggy_keeps_its_own_limit(tmp_path: Path, nursery: trio.Nursery) -> None:
    running = await _gateway(tmp_path, nursery, **{"limits.max_partitions_per_topic": 5000})
    wire = await IggyWire.logged_in(running)
    try:
        await wire.ok(CreateStream(name="s"))
        over = await wire.call(IggyCreateTopic(stream_id="s", name="t", partitions_count=1001))
        assert over.status == Status.TOO_MANY_PARTITIONS
        await wire.ok(IggyCreateTopic(stream_id="s", name="t", partitions_count=999))
        grow = IggyCreatePartitions(stream_id="s", topic_id="t", partitions_count=2)
        assert (await wire.call(grow)).status == Status.TOO_MANY_PARTITIONS
    finally:
        await wire.aclose()
    assert not (tmp_path / "data" / "s" / "t" / "999").exists()
