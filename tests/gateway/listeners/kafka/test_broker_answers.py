"""Answers real clients act on (issue 20): ListOffsets by max timestamp (KIP-734), a
transactional producer's FindCoordinator on a backend without transactions, the broker's
listener configs (their sources, types and read-only flags), a configured node id."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio
from confluent_kafka import (
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    ConfigResource,
    NewTopic,
    OffsetSpec,
)
from kafka import KafkaProducer  # type: ignore[import-untyped]
from kafka.admin import ConfigResource as KpConfigResource  # type: ignore[import-untyped]
from kafka.admin import ConfigResourceType, KafkaAdminClient
from kafka.admin import OffsetSpec as KpOffsetSpec
from kafka.errors import TransactionalIdAuthorizationFailedError  # type: ignore[import-untyped]
from kafka.structs import TopicPartition as KpTopicPartition  # type: ignore[import-untyped]

from gateway.app import Running
from tests.conftest import gateway_config, start_gateway
from tests.helpers.iggy_upstream import front_gateway, upstream_gateway

from .conftest import bootstrap, in_thread

# Out of order on purpose: the largest timestamp is neither the first nor the last record.
_TIMESTAMPS_MS = [1_700_000_001_000, 1_700_000_009_000, 1_700_000_005_000, 1_700_000_002_000]


def _produce_at(servers: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": servers})
    admin.create_topics([NewTopic(topic, num_partitions=1)])[topic].result(15)
    p = Producer({"bootstrap.servers": servers, "linger.ms": 0})
    for i, ts in enumerate(_TIMESTAMPS_MS):
        p.produce(topic, b"v%d" % i, timestamp=ts)
        p.flush(10)  # one batch per record: the max is not just a batch's last record
    assert p.flush(10) == 0


async def test_list_offsets_max_timestamp_confluent(gateway: Running) -> None:
    servers, topic = bootstrap(gateway), "max-ts-confluent"
    await in_thread(lambda: _produce_at(servers, topic))

    def lookup() -> tuple[int, int]:
        admin = AdminClient({"bootstrap.servers": servers})
        tp = TopicPartition(topic, 0)
        spec = OffsetSpec.max_timestamp()  # type: ignore[no-untyped-call]
        got = admin.list_offsets({tp: spec}, request_timeout=10)[tp]
        info = got.result(15)
        return info.offset, info.timestamp

    assert await in_thread(lookup) == (1, _TIMESTAMPS_MS[1])


async def test_list_offsets_max_timestamp_kafka_python(gateway: Running) -> None:
    servers, topic = bootstrap(gateway), "max-ts-kafka-python"
    await in_thread(lambda: _produce_at(servers, topic))

    def lookup() -> tuple[int, int]:
        admin = KafkaAdminClient(bootstrap_servers=servers, request_timeout_ms=10000)
        try:
            tp = KpTopicPartition(topic, 0)
            got = admin.list_partition_offsets({tp: KpOffsetSpec.MAX_TIMESTAMP})[tp]
            return got.offset, got.timestamp
        finally:
            admin.close()

    assert await in_thread(lookup) == (1, _TIMESTAMPS_MS[1])


@pytest.fixture
async def iggy_backed(tmp_path: Path) -> AsyncIterator[Running]:
    """A gateway on the Iggy backend: a backend without transactions (README)."""
    async with (
        upstream_gateway(tmp_path / "upstream") as upstream,
        front_gateway(tmp_path / "front", upstream.address("iggy")) as front,
    ):
        yield front


async def test_transactional_producer_fails_fast_confluent(iggy_backed: Running) -> None:
    servers = bootstrap(iggy_backed)

    def init() -> KafkaError:
        p = Producer({"bootstrap.servers": servers, "transactional.id": "tx-1"})
        with pytest.raises(KafkaException) as info:
            p.init_transactions(20)
        err: KafkaError = info.value.args[0]
        return err

    err = await in_thread(init)
    # Fatal at once, and saying why, instead of COORDINATOR_NOT_AVAILABLE retried until the
    # timeout: the transaction APIs are not in ApiVersions, which librdkafka checks first.
    assert err.code() == KafkaError._UNSUPPORTED_FEATURE, err
    assert "Transactions not supported" in err.str(), err
    assert err.fatal(), err


async def test_transactional_producer_fails_fast_kafka_python(iggy_backed: Running) -> None:
    servers = bootstrap(iggy_backed)

    def init() -> None:
        p = KafkaProducer(bootstrap_servers=servers, transactional_id="tx-2", max_block_ms=20000)
        try:
            with pytest.raises(TransactionalIdAuthorizationFailedError):
                p.init_transactions()
        finally:
            p.close(timeout=5)

    await in_thread(init)


async def test_broker_configs_name_the_listeners(gateway: Running) -> None:
    servers = bootstrap(gateway)
    host, port = gateway.address("kafka")

    def describe() -> dict[str, str | None]:
        admin = AdminClient({"bootstrap.servers": servers})
        res = ConfigResource(ConfigResource.Type.BROKER, "1")
        entries = admin.describe_configs([res])[res].result(15)
        return {name: e.value for name, e in entries.items()}

    configs = await in_thread(describe)
    assert configs["listeners"] == f"PLAINTEXT://{host}:{port}"
    assert configs["advertised.listeners"] == f"PLAINTEXT://{host}:{port}"
    assert configs["listener.security.protocol.map"] == "PLAINTEXT:PLAINTEXT"
    assert configs["broker.id"] == configs["node.id"] == "1"


async def test_broker_configs_sources_and_types_kafka_python(gateway: Running) -> None:
    """As a Kafka broker without ``advertised.listeners`` in its properties answers (kafka-python's
    own test_describe_configs_broker_resource_returns_configs): the advertised listeners are a
    default, broker.id and node.id are read-only, and DescribeConfigs v3 types every entry."""
    servers = bootstrap(gateway)

    def describe() -> dict[str, dict[str, object]]:
        admin = KafkaAdminClient(bootstrap_servers=servers, request_timeout_ms=10000)
        try:
            res = KpConfigResource(ConfigResourceType.BROKER, 1)
            out = admin.describe_configs([res], config_filter="all")
            return out["broker"]["1"]  # type: ignore[no-any-return]
        finally:
            admin.close()

    configs = await in_thread(describe)
    assert configs["advertised.listeners"]["config_source"] == "DEFAULT_CONFIG"
    assert configs["listeners"]["config_source"] == "STATIC_BROKER_CONFIG"
    for name in ("broker.id", "node.id"):
        assert configs[name]["read_only"] is True, name
        assert configs[name]["config_type"] == "INT", name
    assert configs["listeners"]["read_only"] is False
    assert configs["auto.create.topics.enable"]["config_type"] == "BOOLEAN"
    assert configs["advertised.listeners"]["config_type"] == "STRING"


@pytest.fixture
async def node7(tmp_path: Path, nursery: trio.Nursery) -> AsyncIterator[Running]:
    config = gateway_config(tmp_path / "data", **{"listeners.kafka.node_id": 7})
    running = await start_gateway(nursery, config)
    yield running


async def test_node_id_is_configurable(node7: Running) -> None:
    servers = bootstrap(node7)

    def cluster() -> tuple[list[int], int, str | None]:
        admin = AdminClient({"bootstrap.servers": servers})
        md = admin.list_topics(timeout=10)
        res = ConfigResource(ConfigResource.Type.BROKER, "7")
        entries = admin.describe_configs([res])[res].result(15)
        return sorted(md.brokers), md.controller_id, entries["broker.id"].value

    assert await in_thread(cluster) == ([7], 7, "7")
