"""Admin APIs of issue 20 with the real admin clients: IncrementalAlterConfigs and AlterConfigs
(every topic setting CreateTopics takes, DELETE back to the default, APPEND/SUBTRACT of
cleanup.policy), DescribeConfigs v3's config types, DescribeLogDirs, DeleteGroups, DeleteRecords,
and the one-broker answers of ElectLeaders, AlterReplicaLogDirs and the partition reassignment
APIs."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from kafka.admin import (  # type: ignore[import-untyped]
    ConfigResource as KpConfigResource,
)
from kafka.admin import (
    ConfigResourceType,
    KafkaAdminClient,
)
from kafka.admin import OffsetSpec as KpOffsetSpec
from kafka.errors import (  # type: ignore[import-untyped]
    ElectionNotNeededError,
    InvalidReplicationAssignmentError,
    LogDirNotFoundError,
    NoError,
    UnknownTopicOrPartitionError,
)
from kafka.structs import TopicPartition as KpTopicPartition  # type: ignore[import-untyped]
from kafka.structs import TopicPartitionReplica

from gateway.app import Running
from tests.conftest import gateway_config
from tests.helpers.iggy_upstream import serving, upstream_gateway

from .conftest import bootstrap, in_thread


def _configs(admin: AdminClient, topic: str) -> dict[str, tuple[str | None, bool]]:
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entries = admin.describe_configs([res])[res].result(15)
    return {n: (e.value, e.is_default) for n, e in entries.items()}


async def test_incremental_alter_configs_confluent(gateway: Running) -> None:
    servers, topic = bootstrap(gateway), "alter-confluent"

    def run() -> None:
        admin = AdminClient({"bootstrap.servers": servers})
        admin.create_topics([NewTopic(topic, num_partitions=1)])[topic].result(15)
        res = ConfigResource(
            ConfigResource.Type.TOPIC, topic,
            incremental_configs=[
                ConfigEntry("retention.ms", "3600000",
                            incremental_operation=AlterConfigOpType.SET),
                ConfigEntry("max.message.bytes", "2000",
                            incremental_operation=AlterConfigOpType.SET),
            ],
        )  # fmt: skip
        admin.incremental_alter_configs([res])[res].result(15)
        configs = _configs(admin, topic)
        assert configs["retention.ms"] == ("3600000", False)
        assert configs["max.message.bytes"] == ("2000", False)

        # The store honours it: a bigger record is refused.
        p = Producer({"bootstrap.servers": servers, "message.max.bytes": 1_000_000,
                      "retries": 0})  # fmt: skip
        errors: list[KafkaError | None] = []
        p.produce(topic, b"x" * 5000, on_delivery=lambda err, _m: errors.append(err))
        p.flush(15)
        assert errors and errors[0] is not None
        assert errors[0].code() == KafkaError.MSG_SIZE_TOO_LARGE, errors

        def alter(*entries: tuple[str, str | None, AlterConfigOpType]) -> None:
            res = ConfigResource(
                ConfigResource.Type.TOPIC, topic,
                incremental_configs=[ConfigEntry(n, v, incremental_operation=op)
                                     for n, v, op in entries],
            )  # fmt: skip
            admin.incremental_alter_configs([res])[res].result(15)

        # DELETE returns a setting to the default, as Kafka does: the store forgets the limit
        # (the record refused above now goes in). Of a setting the topic does not set: done.
        alter(("max.message.bytes", None, AlterConfigOpType.DELETE),
              ("retention.bytes", None, AlterConfigOpType.DELETE))  # fmt: skip
        assert _configs(admin, topic)["max.message.bytes"][1] is True  # a default again
        errors.clear()
        p.produce(topic, b"x" * 5000, on_delivery=lambda err, _m: errors.append(err))
        p.flush(15)
        assert errors == [None]

        # The other topic settings CreateTopics takes, by the same rule; list settings take
        # APPEND/SUBTRACT from the default (confluent's own test_incremental_alter_configs).
        alter(("cleanup.policy", "compact", AlterConfigOpType.APPEND),
              ("compression.type", "gzip", AlterConfigOpType.SET),
              ("file.delete.delay.ms", "12345", AlterConfigOpType.SET))  # fmt: skip
        configs = _configs(admin, topic)
        assert configs["cleanup.policy"] == ("delete,compact", False)
        assert configs["compression.type"] == ("gzip", False)
        assert configs["file.delete.delay.ms"] == ("12345", False)
        alter(("cleanup.policy", "delete", AlterConfigOpType.SUBTRACT),
              ("compression.type", None, AlterConfigOpType.DELETE),
              ("file.delete.delay.ms", None, AlterConfigOpType.DELETE))  # fmt: skip
        configs = _configs(admin, topic)
        assert configs["cleanup.policy"] == ("compact", False)
        assert configs["compression.type"] == ("producer", True)
        assert "file.delete.delay.ms" not in configs

        # Values Kafka refuses, and APPEND on a setting that is not a list: INVALID_CONFIG.
        for entry in (("cleanup.policy", "shred", AlterConfigOpType.SET),
                      ("compression.type", "brotli", AlterConfigOpType.SET),
                      ("retention.ms", "soon", AlterConfigOpType.SET),
                      ("retention.ms", "1", AlterConfigOpType.APPEND)):  # fmt: skip
            try:
                alter(entry)
            except KafkaException as exc:
                assert exc.args[0].code() == KafkaError.INVALID_CONFIG, (entry, exc)
            else:
                raise AssertionError(f"{entry} was accepted")

    await in_thread(run)


async def test_alter_configs_confluent(gateway: Running) -> None:
    """The non-incremental AlterConfigs of confluent's own test_basic_operations."""
    servers, topic = bootstrap(gateway), "alter-configs-confluent"

    def run() -> None:
        admin = AdminClient({"bootstrap.servers": servers})
        admin.create_topics(
            [NewTopic(topic, num_partitions=1, config={"max.message.bytes": "500000"})]
        )[topic].result(15)
        assert _configs(admin, topic)["max.message.bytes"] == ("500000", False)
        res = ConfigResource(ConfigResource.Type.TOPIC, topic,
                             set_config={"file.delete.delay.ms": "12345",
                                         "compression.type": "snappy"})  # fmt: skip
        with pytest.warns(DeprecationWarning):  # confluent deprecates it, Kafka still serves it
            admin.alter_configs([res])[res].result(15)
        configs = _configs(admin, topic)
        assert configs["file.delete.delay.ms"] == ("12345", False)
        assert configs["compression.type"] == ("snappy", False)
        # It replaces the topic's settings, as in Kafka: one it leaves out is the default again.
        value, is_default = configs["max.message.bytes"]
        assert is_default and value != "500000", configs["max.message.bytes"]

    await in_thread(run)


async def test_alter_configs_kafka_python(gateway: Running) -> None:
    servers, topic = bootstrap(gateway), "alter-kafka-python"

    def run() -> None:
        creator = AdminClient({"bootstrap.servers": servers})
        creator.create_topics([NewTopic(topic, num_partitions=2)])[topic].result(15)
        admin = KafkaAdminClient(bootstrap_servers=servers, request_timeout_ms=10000)
        try:
            for incremental, value in ((True, "7200000"), (False, "10800000")):
                res = KpConfigResource(ConfigResourceType.TOPIC, topic,
                                       configs={"retention.ms": value})  # fmt: skip
                out = admin.alter_configs([res], incremental=incremental)
                assert out == {"topic": {topic: "OK"}}
                got = admin.describe_configs([KpConfigResource(ConfigResourceType.TOPIC, topic)])
                entry = got["topic"][topic]["retention.ms"]
                assert (entry["value"], entry["config_source"]) == (value, "DYNAMIC_TOPIC_CONFIG")

            # DescribeConfigs v3 (kafka-python's maximum is v4): each entry's type as Kafka
            # types it (kafka-python's own suite reads retention.bytes' config_type).
            every = admin.describe_configs(
                [KpConfigResource(ConfigResourceType.TOPIC, topic)], config_filter="all"
            )["topic"][topic]
            types = {name: entry["config_type"] for name, entry in every.items()}
            assert types["retention.ms"] == types["retention.bytes"] == "LONG", types
            assert types["segment.bytes"] == types["max.message.bytes"] == "INT", types
            assert types["cleanup.policy"] == "LIST", types
            assert types["compression.type"] == types["message.timestamp.type"] == "STRING"
            assert every["retention.bytes"]["config_source"] == "DEFAULT_CONFIG"
            assert all(e["documentation"] is None for e in every.values())
        finally:
            admin.close()

    await in_thread(run)


async def test_describe_log_dirs_kafka_python(gateway: Running) -> None:
    servers, topic = bootstrap(gateway), f"log-dirs-{uuid.uuid4().hex[:6]}"

    def run() -> list[dict[str, Any]]:
        p = Producer({"bootstrap.servers": servers})
        for _ in range(20):
            p.produce(topic, b"v" * 100, partition=0)
        assert p.flush(15) == 0
        admin = KafkaAdminClient(bootstrap_servers=servers, request_timeout_ms=10000)
        try:
            return admin.describe_log_dirs()  # type: ignore[no-any-return]
        finally:
            admin.close()

    out = await in_thread(run)
    assert [b["broker"] for b in out] == [1]
    (log_dir,) = out[0]["log_dirs"]
    assert log_dir["error_code"] == 0
    (found,) = [t for t in log_dir["topics"] if t["name"] == topic]
    (part,) = found["partitions"]
    assert part["partition_index"] == 0
    assert part["partition_size"] >= 20 * 100  # 20 records of 100 bytes, and their framing


def _consume_and_commit(servers: str, topic: str, group: str) -> Consumer:
    """A member that read and committed, still in the group (the caller closes it)."""
    p = Producer({"bootstrap.servers": servers})
    for i in range(3):
        p.produce(topic, b"v%d" % i)
    assert p.flush(15) == 0
    c = Consumer({"bootstrap.servers": servers, "group.id": group,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})  # fmt: skip
    c.subscribe([topic])
    got = 0
    while got < 3:
        msg = c.poll(10)
        assert msg is not None and msg.error() is None, msg
        got += 1
    c.commit(asynchronous=False)
    return c


async def test_delete_groups(gateway: Running) -> None:
    servers, topic, group = bootstrap(gateway), "delete-groups", f"g-{uuid.uuid4().hex[:6]}"

    def run() -> None:
        member = _consume_and_commit(servers, topic, group)
        admin = AdminClient({"bootstrap.servers": servers})
        tp = TopicPartition(topic, 0)
        before = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group, [tp])])[
            group
        ].result(15)
        assert [p.offset for p in before.topic_partitions] == [3]
        try:
            admin.delete_consumer_groups([group], request_timeout=10)[group].result(15)
        except KafkaException as exc:
            assert exc.args[0].code() == KafkaError.NON_EMPTY_GROUP, exc
        else:
            raise AssertionError("a group with a member was deleted")
        member.close()
        admin.delete_consumer_groups([group], request_timeout=10)[group].result(15)

        # The committed offsets went with it; a second delete finds nothing (kafka-python).
        kp = KafkaAdminClient(bootstrap_servers=servers, request_timeout_ms=10000)
        try:
            assert kp.list_group_offsets(group) == {group: {}}
            assert kp.delete_groups([group]) == {group: "GroupIdNotFoundError"}
        finally:
            kp.close()

    await in_thread(run)


async def test_delete_records(gateway: Running) -> None:
    servers, topic = bootstrap(gateway), "delete-records"

    def run() -> None:
        p = Producer({"bootstrap.servers": servers, "linger.ms": 0})
        for i in range(10):
            p.produce(topic, b"v%d" % i, partition=0)
            p.flush(10)  # one batch each: the new start falls between batches and inside none
        assert p.flush(10) == 0
        kp = KafkaAdminClient(bootstrap_servers=servers, request_timeout_ms=10000)
        try:
            tp = KpTopicPartition(topic, 0)
            out = kp.delete_records({tp: 4})
            assert out[tp]["low_watermark"] == 4, out
            earliest = kp.list_partition_offsets({tp: KpOffsetSpec.EARLIEST})[tp]
            assert earliest.offset == 4
        finally:
            kp.close()

        # confluent: up to the high watermark (-1 = OFFSET_END)
        admin = AdminClient({"bootstrap.servers": servers})
        ctp = TopicPartition(topic, 0, 7)
        deleted = admin.delete_records([ctp], request_timeout=10)[ctp].result(15)
        assert deleted.low_watermark == 7

        # A consumer asking below the start is OUT_OF_RANGE, reset to the new earliest.
        c = Consumer({"bootstrap.servers": servers, "group.id": "dr",
                      "auto.offset.reset": "earliest", "enable.auto.commit": False})  # fmt: skip
        try:
            c.assign([TopicPartition(topic, 0, 2)])
            msg = c.poll(10)
            assert msg is not None and msg.error() is None, msg
            assert (msg.offset(), msg.value()) == (7, b"v7")
        finally:
            c.close()

    await in_thread(run)


async def test_list_groups_states(gateway: Running) -> None:
    servers, topic = bootstrap(gateway), "list-groups-states"
    stable, empty = f"s-{uuid.uuid4().hex[:6]}", f"e-{uuid.uuid4().hex[:6]}"

    def run() -> None:
        _consume_and_commit(servers, topic, empty).close()  # committed, then left: Empty
        member = _consume_and_commit(servers, topic, stable)
        admin = AdminClient({"bootstrap.servers": servers})
        try:
            every = admin.list_consumer_groups(request_timeout=10).result(15)
            states = {g.group_id: g.state for g in every.valid}
            assert states[stable] == ConsumerGroupState.STABLE, states
            assert states[empty] == ConsumerGroupState.EMPTY, states  # not UNKNOWN
            only = admin.list_consumer_groups(
                request_timeout=10, states={ConsumerGroupState.STABLE}
            ).result(15)
            names = {g.group_id for g in only.valid}
            assert stable in names and empty not in names, names
        finally:
            member.close()

    await in_thread(run)


async def test_single_node_replica_apis_kafka_python(gateway: Running) -> None:
    """ElectLeaders, AlterReplicaLogDirs, Alter/ListPartitionReassignments as a one-broker Kafka
    answers them (kafka-python's own test_elect_leaders, test_alter_replica_log_dirs,
    test_alter_partition_reassignments and test_list_partition_reassignments ask this)."""
    servers, topic = bootstrap(gateway), f"replicas-{uuid.uuid4().hex[:6]}"

    def run() -> None:
        creator = AdminClient({"bootstrap.servers": servers})
        creator.create_topics([NewTopic(topic, num_partitions=2)])[topic].result(15)
        admin = KafkaAdminClient(bootstrap_servers=servers, request_timeout_ms=10000)
        try:
            # ElectLeaders v1: nothing to elect on an existing partition; a missing one is unknown
            out = admin.elect_leaders(0, {topic: [0, 1], "no-such-topic": [0]}, raise_errors=False)
            got = {(r[0], p[0]): p[1] for r in out.replica_election_results for p in r[1]}
            assert got == {(topic, 0): ElectionNotNeededError.errno,
                           (topic, 1): ElectionNotNeededError.errno,
                           ("no-such-topic", 0): UnknownTopicOrPartitionError.errno}  # fmt: skip
            assert out.error_code == 0

            # AlterReplicaLogDirs: to the directory DescribeLogDirs reports is a no-op; any other
            # directory does not exist on this broker.
            here = admin.describe_log_dirs()[0]["log_dirs"][0]["log_dir"]
            tpr = TopicPartitionReplica(topic, 0, 1)
            assert admin.alter_replica_log_dirs({tpr: here}) == {tpr: NoError}
            assert admin.alter_replica_log_dirs({tpr: "/elsewhere"}) == {tpr: LogDirNotFoundError}

            # AlterPartitionReassignments (flexible v0): only this node can hold the replica.
            tp, tp1 = KpTopicPartition(topic, 0), KpTopicPartition(topic, 1)
            assert admin.alter_partition_reassignments({tp: [1], tp1: [1, 2]}) == {
                tp: None,
                tp1: InvalidReplicationAssignmentError,
            }
            # ListPartitionReassignments (flexible v0): none in progress.
            assert admin.list_partition_reassignments() == {}
            assert admin.list_partition_reassignments([tp]) == {}
        finally:
            admin.close()

    await in_thread(run)


async def test_alter_configs_on_the_iggy_backend(tmp_path: Path) -> None:
    """An Iggy server keeps only its own topic options and cannot go back to a default: a Kafka
    setting it would drop, or a DELETE, is INVALID_CONFIG with the reason, never an OK that keeps
    nothing; what it keeps (retention.ms as its message expiry) still changes."""
    async with upstream_gateway(tmp_path / "upstream") as upstream:
        host, port = upstream.address("iggy")
        config = gateway_config(tmp_path / "unused", **{
            "backend.url": f"iggy://iggy:iggy@{host}:{port}",
            "listeners.iggy.enabled": False, "listeners.rog.enabled": False,
            "listeners.rabbitmq_stream.enabled": False,
        })  # fmt: skip
        async with serving(config) as running:
            servers, topic = bootstrap(running), "alter-on-iggy"

            def run() -> None:
                admin = AdminClient({"bootstrap.servers": servers})
                admin.create_topics([NewTopic(topic, num_partitions=1)])[topic].result(15)

                def alter(name: str, value: str | None, op: AlterConfigOpType) -> None:
                    res = ConfigResource(
                        ConfigResource.Type.TOPIC, topic,
                        incremental_configs=[ConfigEntry(name, value, incremental_operation=op)],
                    )  # fmt: skip
                    admin.incremental_alter_configs([res])[res].result(15)

                alter("retention.ms", "3600000", AlterConfigOpType.SET)
                assert _configs(admin, topic)["retention.ms"] == ("3600000", False)
                for name, value, op, reason in (
                    ("cleanup.policy", "compact", AlterConfigOpType.SET, "cannot keep"),
                    ("retention.ms", None, AlterConfigOpType.DELETE, "cannot reset"),
                ):
                    try:
                        alter(name, value, op)
                    except KafkaException as exc:
                        error = exc.args[0]
                        assert error.code() == KafkaError.INVALID_CONFIG, exc
                        assert reason in error.str(), exc
                    else:
                        raise AssertionError(f"{name} {op} was acknowledged")
                assert "cleanup.policy" not in dict(
                    (n, v) for n, (v, default) in _configs(admin, topic).items() if not default
                )
                # The non-incremental AlterConfigs: naming every setting the topic has is a
                # change Iggy keeps; leaving one out would reset it, which Iggy cannot.
                attempts: list[tuple[dict[str, str], str | None]] = [
                    ({"retention.ms": "7200000"}, None),
                    ({"max.message.bytes": "1000"}, "cannot reset"),
                ]
                for settings, refusal in attempts:
                    res = ConfigResource(ConfigResource.Type.TOPIC, topic, set_config=settings)
                    try:
                        with pytest.warns(DeprecationWarning):
                            admin.alter_configs([res])[res].result(15)
                    except KafkaException as exc:
                        error = exc.args[0]
                        assert refusal is not None and refusal in error.str(), exc
                        assert error.code() == KafkaError.INVALID_CONFIG, exc
                    else:
                        assert refusal is None, f"{settings} was acknowledged"
                assert _configs(admin, topic)["retention.ms"] == ("7200000", False)

            await in_thread(run)  # bounded: 60 s
