"""confluent-kafka 2.16 (librdkafka 2.16) against the gateway's Kafka listener."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    ConfigResource,
    NewPartitions,
    NewTopic,
)

from gateway.app import Running

from .conftest import bootstrap, in_thread

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def _produce(servers: str, topic: str, values: list[bytes], codec: str, **extra: object) -> None:
    p = Producer({"bootstrap.servers": servers, "compression.type": codec, "linger.ms": 5,
                  **extra})  # fmt: skip
    errors: list[KafkaError] = []

    def report(err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            errors.append(err)

    for i, v in enumerate(values):
        p.produce(topic, v, key=b"k%d" % i, headers=[("h", b"%d" % i), ("n", None)],
                  on_delivery=report)  # fmt: skip
    assert p.flush(30) == 0, "messages left undelivered"
    assert not errors, errors


def _consume(servers: str, topic: str, group: str, n: int, *, commit: bool = True) -> list[Message]:
    c = Consumer({"bootstrap.servers": servers, "group.id": group,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})  # fmt: skip
    c.subscribe([topic])
    got: list[Message] = []
    try:
        while len(got) < n:
            msg = c.poll(10)
            assert msg is not None, f"timed out after {len(got)} of {n} messages"
            assert msg.error() is None, msg.error()
            got.append(msg)
        if commit:
            c.commit(asynchronous=False)
    finally:
        c.close()
    return got


def _create(servers: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": servers})
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions)])
    futures[topic].result(15)


@pytest.mark.parametrize("codec", CODECS)
async def test_produce_consume_commit_resume(gateway: Running, codec: str) -> None:
    servers = bootstrap(gateway)
    topic, group = f"t-{codec}", f"g-{uuid.uuid4().hex[:8]}"
    await in_thread(lambda: _create(servers, topic, 1))
    first = [b"value-%d-" % i + bytes(range(256)) * (i % 3) for i in range(200)]
    await in_thread(lambda: _produce(servers, topic, first, codec))
    got = await in_thread(lambda: _consume(servers, topic, group, len(first)))
    assert [m.value() for m in got] == first
    assert [m.offset() for m in got] == list(range(len(first)))
    assert got[7].key() == b"k7"
    assert got[7].headers() == [("h", b"7"), ("n", None)]
    assert all(m.timestamp()[1] > 0 for m in got)

    second = [b"more-%d" % i for i in range(50)]
    await in_thread(lambda: _produce(servers, topic, second, codec))
    resumed = await in_thread(lambda: _consume(servers, topic, group, len(second)))
    assert [m.value() for m in resumed] == second  # nothing before the committed offset
    assert resumed[0].offset() == len(first)


async def test_idempotent_producer(gateway: Running) -> None:
    servers = bootstrap(gateway)
    values = [b"idem-%d" % i for i in range(300)]
    await in_thread(
        lambda: _produce(servers, "idem", values, "none", **{"enable.idempotence": True})
    )
    got = await in_thread(lambda: _consume(servers, "idem", "g-idem", len(values)))
    assert [m.value() for m in got] == values


async def test_admin(gateway: Running) -> None:
    servers = bootstrap(gateway)

    def work() -> None:
        admin = AdminClient({"bootstrap.servers": servers})
        fs = admin.create_topics(
            [NewTopic("adm", num_partitions=2, config={"retention.ms": "3600000"})]
        )
        fs["adm"].result(15)
        again = admin.create_topics([NewTopic("adm", num_partitions=2)])
        with pytest.raises(Exception) as info:
            again["adm"].result(15)
        assert info.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS

        md = admin.list_topics(timeout=10)
        assert len(md.topics["adm"].partitions) == 2
        host, port = servers.split(":")
        brokers = [(str(b.host), int(b.port)) for b in md.brokers.values()]
        assert brokers == [(host, int(port))]

        admin.create_partitions([NewPartitions("adm", 5)])["adm"].result(15)
        assert len(admin.list_topics(timeout=10).topics["adm"].partitions) == 5

        res = ConfigResource(ConfigResource.Type.TOPIC, "adm")
        configs = admin.describe_configs([res])[res].result(15)
        assert configs["retention.ms"].value == "3600000"
        assert not configs["retention.ms"].is_default
        assert configs["cleanup.policy"].value == "delete"
        # what the embedded store applies (backend.* defaults), not Kafka's 7 days / 1 MiB / 1 GiB
        shown = {n: (configs[n].value, configs[n].is_default)
                 for n in ("retention.bytes", "max.message.bytes", "segment.bytes")}  # fmt: skip
        assert shown == {"retention.bytes": ("-1", True), "max.message.bytes": ("16777216", True),
                         "segment.bytes": ("67108864", True)}  # fmt: skip

        admin.delete_topics(["adm"])["adm"].result(15)
        assert "adm" not in admin.list_topics(timeout=10).topics

    await in_thread(work)


async def test_groups_listed_and_described(gateway: Running) -> None:
    servers = bootstrap(gateway)
    await in_thread(lambda: _produce(servers, "grp", [b"x"] * 3, "none"))

    def work() -> None:
        c = Consumer({"bootstrap.servers": servers, "group.id": "described",
                      "auto.offset.reset": "earliest"})  # fmt: skip
        c.subscribe(["grp"])
        try:
            msg = c.poll(15)
            assert msg is not None and msg.error() is None
            admin = AdminClient({"bootstrap.servers": servers})
            listed = admin.list_consumer_groups().result(15)
            assert "described" in {g.group_id for g in listed.valid}
            desc = admin.describe_consumer_groups(["described"])["described"].result(15)
            assert desc.state.name == "STABLE"
            assert len(desc.members) == 1
            assert desc.members[0].assignment.topic_partitions == [TopicPartition("grp", 0)]
        finally:
            c.close()

    await in_thread(work)
