"""Kafka transactions (KIP-98) on the embedded store with confluent-kafka's transactional
producer and read_committed / read_uncommitted consumers: commit, abort, abort then retry,
send_offsets_to_transaction, an open transaction holding read_committed readers at the last
stable offset, and fencing by a second producer with the same transactional id."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from gateway.app import Running
from tests.helpers.kafka_transactions import (
    create_topic,
    eos_step,
    fenced,
    read_isolated,
    txn_producer,
)

from .conftest import bootstrap, in_thread


async def test_commit_abort_and_isolation(gateway: Running) -> None:
    servers = bootstrap(gateway)

    def run() -> tuple[list[bytes], list[bytes]]:
        create_topic(servers, "tx-a")
        producer = txn_producer(servers, "tid-a")
        producer.begin_transaction()
        for i in range(5):
            producer.produce("tx-a", b"c1-%d" % i)
        producer.commit_transaction(15)
        producer.begin_transaction()
        for i in range(3):
            producer.produce("tx-a", b"ab-%d" % i)
        producer.flush(15)  # stored, then aborted: read_uncommitted readers see them
        producer.abort_transaction(15)
        producer.begin_transaction()  # abort then retry: the same producer goes on
        for i in range(4):
            producer.produce("tx-a", b"c2-%d" % i)
        producer.commit_transaction(15)
        committed = read_isolated(servers, "tx-a", "read_committed", expect=9)
        everything = read_isolated(servers, "tx-a", "read_uncommitted", expect=12)
        return committed, everything

    committed, everything = await in_thread(run)
    c1 = [b"c1-%d" % i for i in range(5)]
    c2 = [b"c2-%d" % i for i in range(4)]
    ab = [b"ab-%d" % i for i in range(3)]
    assert committed == c1 + c2
    assert everything == c1 + ab + c2  # markers are never handed to the application


async def test_open_transaction_holds_read_committed_at_the_stable_offset(
    gateway: Running,
) -> None:
    servers = bootstrap(gateway)

    def run() -> tuple[list[bytes], list[bytes], list[bytes]]:
        create_topic(servers, "tx-open")
        plain = Producer({"bootstrap.servers": servers})
        plain.produce("tx-open", b"before")
        plain.flush(10)
        producer = txn_producer(servers, "tid-open")
        producer.begin_transaction()
        producer.produce("tx-open", b"inside")
        producer.flush(10)
        plain.produce("tx-open", b"after")  # behind the open transaction: held back too
        plain.flush(10)
        while_open = read_isolated(servers, "tx-open", "read_committed", expect=1)
        uncommitted = read_isolated(servers, "tx-open", "read_uncommitted", expect=3)
        producer.commit_transaction(15)
        after_commit = read_isolated(servers, "tx-open", "read_committed", expect=3)
        return while_open, uncommitted, after_commit

    while_open, uncommitted, after_commit = await in_thread(run)
    assert while_open == [b"before"]
    assert uncommitted == [b"before", b"inside", b"after"]
    assert after_commit == [b"before", b"inside", b"after"]


async def test_send_offsets_to_transaction(gateway: Running) -> None:
    """Consume-transform-produce: the input group's offsets commit with the output, and an
    aborted transaction's offsets are dropped."""
    before, after_abort, after_commit, out = await in_thread(lambda: eos_step(bootstrap(gateway)))
    assert before < 0  # nothing committed yet (librdkafka: OFFSET_INVALID)
    assert after_abort == before
    assert after_commit == 6
    assert out == [b"out-%d" % i for i in range(6)]


async def test_a_second_producer_fences_the_first(gateway: Running) -> None:
    servers = bootstrap(gateway)

    def run() -> tuple[str, list[bytes]]:
        error = fenced(servers, "tx-fence")
        return error, read_isolated(servers, "tx-fence", "read_committed", expect=1)

    error, committed = await in_thread(run)
    assert "FENCED" in error and "fatal=True" in error, error
    assert committed == [b"fresh"]


@pytest.mark.parametrize("partitions", [3])
async def test_transaction_over_many_partitions(gateway: Running, partitions: int) -> None:
    servers = bootstrap(gateway)

    def run() -> list[bytes]:
        create_topic(servers, "tx-many", partitions)
        producer = txn_producer(servers, "tid-many")
        producer.begin_transaction()
        for i in range(30):
            producer.produce("tx-many", b"m-%02d" % i, partition=i % partitions)
        producer.commit_transaction(15)
        producer.begin_transaction()
        for i in range(30):
            producer.produce("tx-many", b"x-%02d" % i, partition=i % partitions)
        producer.abort_transaction(15)
        return read_isolated(servers, "tx-many", "read_committed", expect=30)

    got = await in_thread(run)
    assert sorted(got) == [b"m-%02d" % i for i in range(30)]
