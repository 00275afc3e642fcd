"""Kafka transactions with aiokafka's and kafka-python's transactional producers and
read_committed consumers on the embedded store (confluent-kafka's flows: test_transactions.py),
and kcat reading with ``isolation.level=read_committed``."""

from __future__ import annotations

import asyncio
import subprocess
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer  # type: ignore[import-untyped]
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer  # type: ignore[import-untyped]
from kafka.structs import OffsetAndMetadata  # type: ignore[import-untyped]
from kafka.structs import TopicPartition as KpTopicPartition

from gateway.app import Running
from tests.helpers.kafka_roundtrip import kcat_path

from .conftest import bootstrap, in_thread


def _create(servers: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": servers})
    for f in admin.create_topics([NewTopic(topic, num_partitions=1)]).values():
        f.result(10)


async def test_aiokafka_transactional_producer_and_consumer(gateway: Running) -> None:
    servers = bootstrap(gateway)

    async def flow() -> tuple[list[bytes], list[bytes]]:
        producer = AIOKafkaProducer(bootstrap_servers=servers, transactional_id="tid-aio")
        await producer.start()
        try:
            async with producer.transaction():
                for i in range(3):
                    await producer.send_and_wait("tx-aio", b"c-%d" % i)
            await producer.begin_transaction()
            await producer.send_and_wait("tx-aio", b"aborted")
            await producer.abort_transaction()
            async with producer.transaction():
                await producer.send_and_wait("tx-aio", b"c-3")
        finally:
            await producer.stop()
        seen = {}
        for isolation in ("read_committed", "read_uncommitted"):
            consumer = AIOKafkaConsumer(
                "tx-aio", bootstrap_servers=servers, auto_offset_reset="earliest",
                isolation_level=isolation, enable_auto_commit=False,
            )  # fmt: skip
            await consumer.start()
            got: list[bytes] = []
            try:
                while True:
                    batch = await consumer.getmany(timeout_ms=1500)
                    if not batch:
                        break
                    got += [m.value for msgs in batch.values() for m in msgs]
            finally:
                await consumer.stop()
            seen[isolation] = got
        return seen["read_committed"], seen["read_uncommitted"]

    def run() -> tuple[list[bytes], list[bytes]]:
        _create(servers, "tx-aio")
        return asyncio.run(asyncio.wait_for(flow(), 60))

    committed, everything = await in_thread(run, limit_s=90)
    assert committed == [b"c-0", b"c-1", b"c-2", b"c-3"]
    assert everything == [b"c-0", b"c-1", b"c-2", b"aborted", b"c-3"]


async def test_kafka_python_transactional_producer(gateway: Running) -> None:
    servers = bootstrap(gateway)

    def run() -> list[bytes]:
        _create(servers, "tx-kp")
        producer = KafkaProducer(bootstrap_servers=servers, transactional_id="tid-kp",
                                 max_block_ms=20000)  # fmt: skip
        try:
            producer.init_transactions()
            producer.begin_transaction()
            producer.send("tx-kp", b"c-0")
            producer.send("tx-kp", b"c-1")
            producer.commit_transaction()
            producer.begin_transaction()
            producer.send("tx-kp", b"aborted")
            producer.flush(10)
            producer.abort_transaction()
        finally:
            producer.close(timeout=5)
        consumer = KafkaConsumer(
            "tx-kp", bootstrap_servers=servers, auto_offset_reset="earliest",
            isolation_level="read_committed", consumer_timeout_ms=3000,
            enable_auto_commit=False,
        )  # fmt: skip
        try:
            return [m.value for m in consumer]
        finally:
            consumer.close()

    assert await in_thread(run) == [b"c-0", b"c-1"]


async def test_kcat_read_committed(gateway: Running) -> None:
    kcat = kcat_path()
    servers = bootstrap(gateway)

    def run() -> tuple[list[str], list[str]]:
        _create(servers, "tx-kcat")
        tx = Producer({"bootstrap.servers": servers, "transactional.id": "tid-kcat"})
        tx.init_transactions(15)
        tx.begin_transaction()
        tx.produce("tx-kcat", b"kept")
        tx.commit_transaction(15)
        tx.begin_transaction()
        tx.produce("tx-kcat", b"dropped")
        tx.flush(10)
        tx.abort_transaction(15)
        out = {}
        for isolation in ("read_committed", "read_uncommitted"):
            done = subprocess.run(
                [kcat, "-b", servers, "-C", "-t", "tx-kcat", "-o", "beginning", "-e", "-q",
                 "-X", f"isolation.level={isolation}"],
                capture_output=True, timeout=30, check=True,
            )  # fmt: skip
            out[isolation] = done.stdout.decode().split()
        return out["read_committed"], out["read_uncommitted"]

    committed, everything = await in_thread(run)
    assert committed == ["kept"]
    assert everything == ["kept", "dropped"]


async def test_committed_leader_epochs_come_back(gateway: Running) -> None:
    """KIP-320's committed leader epoch, as kafka-python's own transactional-offsets test reads
    it back: through TxnOffsetCommit (kafka-python) and OffsetCommit (confluent-kafka)."""
    servers = bootstrap(gateway)

    def run() -> tuple[dict[Any, Any], int | None]:
        _create(servers, "tx-epochs")
        producer = KafkaProducer(bootstrap_servers=servers, transactional_id="tid-epochs",
                                 max_block_ms=20000)  # fmt: skip
        try:
            producer.init_transactions()
            producer.begin_transaction()
            producer.send("tx-epochs", partition=0, value=b"m").get(timeout=10)
            producer.send_offsets_to_transaction(
                {KpTopicPartition("tx-epochs", 0): OffsetAndMetadata(0, "meta", 0)}, "g-epochs"
            )
            producer.commit_transaction()
        finally:
            producer.close(timeout=5)
        admin = KafkaAdminClient(bootstrap_servers=servers)
        try:
            listed = admin.list_group_offsets("g-epochs")
        finally:
            admin.close()
        consumer = Consumer({"bootstrap.servers": servers, "group.id": "g-epochs-c"})
        try:
            consumer.commit(
                offsets=[TopicPartition("tx-epochs", 0, 1, leader_epoch=0)], asynchronous=False
            )
            (got,) = consumer.committed([TopicPartition("tx-epochs", 0)], timeout=10)
        finally:
            consumer.close()
        return listed, got.leader_epoch

    listed, epoch = await in_thread(run)
    assert listed == {
        "g-epochs": {KpTopicPartition("tx-epochs", 0): OffsetAndMetadata(0, "meta", 0)}
    }
    assert epoch == 0
