"""Issue 20's admin APIs through a gateway on the Kafka backend (Tansu): the canonical command
reaches the broker as its own Kafka request, checked with a client that talks to the broker
directly. (Tansu has no DeleteRecords: it closes the connection, so that one is not tried here;
its IncrementalAlterConfigs answers OK but its DescribeConfigs lists nothing to check against.)
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import trio
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from kafka.admin import KafkaAdminClient  # type: ignore[import-untyped]

from gateway.app import Running
from tests.gateway.listeners.test_connection import start
from tests.helpers.tansu import Tansu

from .test_end_to_end import in_thread, servers


@pytest.fixture
async def gateway(tmp_path: Path, tansu: Tansu, nursery: trio.Nursery) -> Running:
    return await start(nursery, tmp_path, **{"backend.url": tansu.url})


async def test_delete_groups_reaches_the_broker(gateway: Running, tansu: Tansu) -> None:
    through, topic, group = servers(gateway), "passthrough-groups", f"g-{uuid.uuid4().hex[:6]}"

    def committed_at_broker() -> dict[str, object]:
        kp = KafkaAdminClient(bootstrap_servers=tansu.bootstrap, request_timeout_ms=15000)
        try:
            return kp.list_group_offsets(group)[group]  # type: ignore[no-any-return]
        finally:
            kp.close()

    def run() -> None:
        admin = AdminClient({"bootstrap.servers": through})
        admin.create_topics([NewTopic(topic, num_partitions=1)])[topic].result(15)
        p = Producer({"bootstrap.servers": through})
        p.produce(topic, b"v", partition=0)
        assert p.flush(20) == 0
        # Tansu holds a new member's JoinGroup for half its session timeout: 6 s keeps it short.
        c = Consumer({"bootstrap.servers": through, "group.id": group,
                      "auto.offset.reset": "earliest", "enable.auto.commit": False,
                      "session.timeout.ms": 6000})  # fmt: skip
        c.subscribe([topic])
        msg = c.poll(30)
        assert msg is not None and msg.error() is None, msg
        c.commit(asynchronous=False)
        c.close()
        assert committed_at_broker(), "the commit did not reach the broker"
        admin.delete_consumer_groups([group], request_timeout=15)[group].result(20)
        assert committed_at_broker() == {}

    await in_thread(run, limit_s=90)
