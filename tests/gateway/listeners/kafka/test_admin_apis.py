"""Admin APIs of issue 20 with the real admin clients: IncrementalAlterConfigs and AlterConfigs
(settings the store honours), DescribeLogDirs, DeleteGroups, DeleteRecords."""

from __future__ import annotations

import uuid
from typing import Any

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
from kafka.structs import TopicPartition as KpTopicPartition  # type: ignore[import-untyped]

from gateway.app import Running

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

        # DELETE of a setting the topic does not set is done; of one it sets, refused (the
        # canonical UpdateTopic cannot unset), not answered with a success that changes nothing.
        for name, code in (("retention.bytes", None), ("max.message.bytes", "INVALID_CONFIG")):
            res = ConfigResource(
                ConfigResource.Type.TOPIC, topic,
                incremental_configs=[ConfigEntry(name, None,
                                                 incremental_operation=AlterConfigOpType.DELETE)],
            )  # fmt: skip
            try:
                admin.incremental_alter_configs([res])[res].result(15)
            except KafkaException as exc:
                assert exc.args[0].name() == code, exc
            else:
                assert code is None, name

        # A name the store does not honour is refused, not silently kept.
        res = ConfigResource(
            ConfigResource.Type.TOPIC, topic,
            incremental_configs=[ConfigEntry("cleanup.policy", "compact",
                                             incremental_operation=AlterConfigOpType.SET)],
        )  # fmt: skip
        try:
            admin.incremental_alter_configs([res])[res].result(15)
        except KafkaException as exc:
            assert exc.args[0].code() == KafkaError.INVALID_CONFIG, exc
        else:
            raise AssertionError("cleanup.policy=compact was accepted")

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
