"""A gateway killed (SIGKILL) in the middle of a Kafka transaction, against real ``streamgate
run`` processes on one embedded data directory: the restarted store still holds the open
transaction's records back from read_committed readers, the coordinator aborts it once its
timeout has passed (its state was durable), nothing of it is ever delivered as committed, and
the same transactional id goes on with a new producer."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from tests.helpers.gateways import running_gateway
from tests.helpers.kafka_transactions import read_isolated
from tests.helpers.processes import free_ports

pytestmark = pytest.mark.slow

TIMEOUT_MS = 3000  # the transaction's own timeout: the restarted coordinator aborts after it


def _before_the_kill(servers: str) -> Producer:
    admin = AdminClient({"bootstrap.servers": servers})
    for f in admin.create_topics([NewTopic("tx-restart", num_partitions=1)]).values():
        f.result(10)
    producer = Producer({
        "bootstrap.servers": servers, "transactional.id": "tid-restart",
        "transaction.timeout.ms": TIMEOUT_MS, "message.timeout.ms": TIMEOUT_MS,
    })  # fmt: skip
    producer.init_transactions(15)
    producer.begin_transaction()
    producer.produce("tx-restart", b"committed")
    producer.commit_transaction(15)
    producer.begin_transaction()
    producer.produce("tx-restart", b"open-1")
    producer.produce("tx-restart", b"open-2")
    assert producer.flush(15) == 0  # stored, in a transaction that never ends
    return producer


def _after_the_restart(servers: str) -> tuple[list[bytes], list[bytes], list[bytes]]:
    plain = Producer({"bootstrap.servers": servers})
    plain.produce("tx-restart", b"after")
    assert plain.flush(10) == 0
    # Held back until the coordinator aborts the open transaction (its timeout), then this:
    committed = read_isolated(servers, "tx-restart", "read_committed", expect=2)
    everything = read_isolated(servers, "tx-restart", "read_uncommitted", expect=4)
    producer = Producer({"bootstrap.servers": servers, "transactional.id": "tid-restart"})
    producer.init_transactions(15)
    producer.begin_transaction()
    producer.produce("tx-restart", b"new")
    producer.commit_transaction(15)
    return committed, everything, read_isolated(servers, "tx-restart", "read_committed", expect=3)


async def test_open_transaction_across_a_crash_is_aborted_after_its_timeout(
    tmp_path: Path,
) -> None:
    [port] = free_ports(1)
    same_port = ("--kafka-port", str(port))
    with trio.fail_after(120):
        async with running_gateway("embedded:./data", tmp_path, "one", *same_port) as gw:
            producer = await trio.to_thread.run_sync(_before_the_kill, gw.kafka)
            await gw.kill()
        producer.purge()  # its client side only: the gateway is gone
        async with running_gateway("embedded:./data", tmp_path, "two", *same_port) as gw:
            committed, everything, later = await trio.to_thread.run_sync(
                _after_the_restart, gw.kafka
            )
            log = gw.log_path.read_text(errors="replace")
    assert committed == [b"committed", b"after"], log
    assert everything == [b"committed", b"open-1", b"open-2", b"after"]
    assert later == [b"committed", b"after", b"new"]
    assert "transaction.timed_out" in log
