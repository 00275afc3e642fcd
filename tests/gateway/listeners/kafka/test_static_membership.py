"""KIP-345 static membership with confluent-kafka: a consumer restarted with the same
``group.instance.id`` gets its old assignment back, and the group neither grows nor rebalances."""

from __future__ import annotations

import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from gateway.app import Running

from .conftest import bootstrap, in_thread


def _member(servers: str, group: str, instance: str, topic: str) -> Consumer:
    c = Consumer({"bootstrap.servers": servers, "group.id": group,
                  "group.instance.id": instance, "session.timeout.ms": 60000,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})  # fmt: skip
    c.subscribe([topic])
    return c


def _wait_assigned(*consumers: Consumer) -> list[list[TopicPartition]]:
    for _ in range(200):
        for c in consumers:
            c.poll(0.1)
        got = [c.assignment() for c in consumers]
        if all(got):
            return got
    raise AssertionError(f"not every member got partitions: {got}")


async def test_restarted_static_member_keeps_its_assignment(gateway: Running) -> None:
    servers, topic, group = bootstrap(gateway), "static-members", f"g-{uuid.uuid4().hex[:6]}"

    def run() -> None:
        admin = AdminClient({"bootstrap.servers": servers})
        admin.create_topics([NewTopic(topic, num_partitions=2)])[topic].result(15)
        p = Producer({"bootstrap.servers": servers})
        for i in range(4):
            p.produce(topic, b"v%d" % i, partition=i % 2)
        assert p.flush(15) == 0

        a, b = _member(servers, group, "host-a", topic), _member(servers, group, "host-b", topic)
        before_a, before_b = _wait_assigned(a, b)
        a.close()  # a static member sends no LeaveGroup (KIP-345): its place is kept

        a2 = _member(servers, group, "host-a", topic)
        (after_a,) = _wait_assigned(a2)
        assert [tp.partition for tp in after_a] == [tp.partition for tp in before_a]
        described = admin.describe_consumer_groups([group])[group].result(15)
        assert str(described.state).endswith("STABLE"), described.state
        instances = sorted(m.group_instance_id for m in described.members)
        assert instances == ["host-a", "host-b"]  # two members, not a third
        assert [tp.partition for tp in b.assignment()] == [tp.partition for tp in before_b]
        a2.close()
        b.close()

    await in_thread(run, limit_s=90)
