"""The access log of a real gateway (``access_log.path``), written while real clients use it:
confluent-kafka over SASL PLAIN, apache-iggy and rstream against an in-process gateway stopped
the way SIGTERM stops it (drain, then the last lines written); size rotation under a small
``max_bytes``; and ``streamgate run --workers 2`` on a real Tansu, one file per worker."""

from __future__ import annotations

import json
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import trio
from apache_iggy import IggyClient, Partitioning, PollingStrategy, SendMessage
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from prometheus_client import CollectorRegistry
from rstream import Consumer as RabbitConsumer

from gateway.app import Running, serve_gateway
from tests.conftest import gateway_config
from tests.gateway.listeners.iggy.conftest import Clients, poll, run_iggy
from tests.gateway.listeners.rabbitmq_stream.conftest import rstream_kwargs, run_client
from tests.gateway.listeners.rabbitmq_stream.rstream_support import Inbox, bodies, first, publish
from tests.gateway.test_access_log import KEYS
from tests.helpers.gateways import supervisor
from tests.helpers.tansu import Tansu, running_tansu

KAFKA_PASSWORD = "Kafka-Pw-7c1e"
IGGY_PASSWORD = "Iggy-Root-Pw-52aa"
LIMIT_S = 90.0


def read_lines(*paths: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for path in paths:
        for text in path.read_text().splitlines():
            line = json.loads(text)
            assert list(line) == KEYS, line
            out.append(line)
    return out


def access_files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("access"))


async def serve_until_drained(
    tmp_path: Path, work: Callable[[Running], Awaitable[None]], **overrides: object
) -> None:
    """An in-process gateway for ``work(running)``, then the SIGTERM path: ``shutdown()``
    (readiness fails, listeners drain) and wait until it has returned."""
    config = gateway_config(tmp_path / "data", **overrides)
    async with trio.open_nursery() as nursery:
        running: Running = await nursery.start(
            lambda task_status: serve_gateway(
                config, registry=CollectorRegistry(), task_status=task_status
            )
        )
        await work(running)
        running.shutdown()


def kafka_traffic(bootstrap: str) -> None:
    sasl: dict[str, str | int | float | bool] = {
        "bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "PLAIN", "sasl.username": "alice", "sasl.password": KAFKA_PASSWORD,
    }  # fmt: skip
    producer = Producer({**sasl, "linger.ms": 50})
    for i in range(10):
        producer.produce("orders", key=b"k%d" % i, value=b"order-%d" % i)
    assert producer.flush(20) == 0
    consumer = Consumer({**sasl, "group.id": "billing", "enable.auto.commit": False})
    consumer.assign([TopicPartition("orders", 0, 0)])
    got = 0
    try:
        while got < 10:
            msg = consumer.poll(10)
            assert msg is not None and msg.error() is None
            got += 1
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    admin = AdminClient(sasl)
    with pytest.raises(KafkaException, match="UNKNOWN_TOPIC"):
        admin.delete_topics(["no-such-topic"])["no-such-topic"].result(20)


async def iggy_traffic(clients: Clients) -> None:
    client: IggyClient = await clients.connect("iggy", IGGY_PASSWORD)
    await client.create_stream("shop")
    await client.create_topic("shop", "events", 2)
    sent = [SendMessage(f"event-{i}") for i in range(5)]
    await client.send_messages("shop", "events", Partitioning.partition_id(1), sent)
    got = await poll(client, "shop", "events", PollingStrategy.First(), partition=1)
    assert len(got) == 5
    with pytest.raises(RuntimeError):
        await poll(client, "shop", "nope", PollingStrategy.First(), partition=0)


async def rabbit_traffic(host: str, port: int) -> None:
    await publish(port, "ledger", bodies("l", 4), create=True)
    inbox = Inbox()
    async with RabbitConsumer(**rstream_kwargs(port, host)) as consumer:
        await consumer.subscribe("ledger", inbox, offset_specification=first())
        await inbox.until(4)


async def test_a_gateways_access_log_has_every_command_and_no_secret(tmp_path: Path) -> None:
    path = tmp_path / "access.jsonl"

    async def work(running: Running) -> None:
        host, port = running.address("kafka")
        with trio.fail_after(60):
            await trio.to_thread.run_sync(kafka_traffic, f"{host}:{port}", abandon_on_cancel=True)
        await run_iggy(running, iggy_traffic)
        await run_client(running, rabbit_traffic)

    with trio.fail_after(LIMIT_S):
        await serve_until_drained(
            tmp_path, work,
            **{"access_log.path": str(path), "listeners.kafka.sasl": True,
               "auth.users": f"alice:{KAFKA_PASSWORD}", "auth.root_password": IGGY_PASSWORD},
        )  # fmt: skip
    text = path.read_text()
    assert KAFKA_PASSWORD not in text and IGGY_PASSWORD not in text
    lines = read_lines(path)
    kafka = [g for g in lines if g["protocol"] == "kafka"]
    iggy = [g for g in lines if g["protocol"] == "iggy"]

    def by(rows: list[dict[str, Any]], command: str, **fields: Any) -> list[dict[str, Any]]:
        return [r for r in rows if r["command"] == command
                and all(r[k] == v for k, v in fields.items())]  # fmt: skip

    # Kafka: logged in as alice; every later line names her and the client's address.
    logins = by(kafka, "authenticate", outcome="ok", user="alice")
    assert logins and all(g["wire_command"] == "sasl_authenticate" for g in logins)
    appends = by(kafka, "append", topic="orders", wire_command="produce")
    assert sum(g["messages"] for g in appends) == 10
    assert all(g["outcome"] == "ok" and g["stream"] == "default" for g in appends)
    assert all(g["partition"] == 0 and g["bytes"] > 10 * len(b"order-0") for g in appends)
    reads = by(kafka, "read", topic="orders", wire_command="fetch", outcome="ok")
    assert sum(g["messages"] for g in reads) == 10
    assert by(kafka, "commit_offset", topic="orders", wire_command="offset_commit", outcome="ok")
    missing = by(kafka, "delete_topic", topic="no-such-topic")
    assert [(g["outcome"], g["error_type"]) for g in missing] == [("error", "not_found")]
    for g in kafka:
        if g["command"] != "authenticate" or g["outcome"] == "ok":
            assert g["user"] == "alice", g
        assert g["peer"].startswith("127.0.0.1:")
        assert g["duration_s"] >= g["backend_s"] >= 0
    # The consumer's idle fetches long-polled: waiting, kept out of both durations.
    waits = [g for g in by(kafka, "read") if g["waited_s"] and g["waited_s"] > 0.05]
    assert all(g["duration_s"] < g["waited_s"] for g in waits)
    # Iggy: root logged in by name; the append and the read of 5; the unknown topic's error
    # comes from the listener once the stream lookup succeeded.
    assert by(iggy, "authenticate", outcome="ok", user="iggy")
    sent = by(iggy, "append", stream="shop", topic="events", partition=1, outcome="ok")
    assert [g["messages"] for g in sent] == [5]
    polled = by(iggy, "read", stream="shop", topic="events", partition=1, outcome="ok")
    assert [g["messages"] for g in polled] == [5]
    refused = by(iggy, "poll_messages", outcome="error")
    assert [(g["error_type"], g["backend_s"], g["user"]) for g in refused] == [
        ("not_found", None, "iggy")
    ]
    assert by(iggy, "create_topic", stream="shop", topic="events", outcome="ok")
    # RabbitMQ Stream: four publishes, and the subscription's reads (no wire request waits on
    # them: their duration is their own) delivering them to the same client.
    rabbit = [g for g in lines if g["protocol"] == "rabbitmq_stream"]
    published = by(rabbit, "append", topic="ledger", wire_command="publish", outcome="ok")
    assert sum(g["messages"] for g in published) == 4
    delivered = by(rabbit, "read", topic="ledger", wire_command="deliver", outcome="ok")
    assert sum(g["messages"] for g in delivered) >= 4
    assert all(g["user"] == "guest" and g["peer"].startswith("127.0.0.1:") for g in delivered)
    assert all(g["duration_s"] == g["backend_s"] for g in delivered)


async def test_the_log_rotates_by_size_keeping_backups(tmp_path: Path) -> None:
    path = tmp_path / "access.jsonl"

    def produce_one_at_a_time(bootstrap: str) -> None:
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        for i in range(120):  # a Produce request (an append line) each
            producer.produce("rotated", value=b"m%d" % i)
            assert producer.flush(10) == 0

    async def work(running: Running) -> None:
        host, port = running.address("kafka")
        with trio.fail_after(60):
            await trio.to_thread.run_sync(
                produce_one_at_a_time, f"{host}:{port}", abandon_on_cancel=True
            )

    with trio.fail_after(LIMIT_S):
        await serve_until_drained(
            tmp_path, work,
            **{"access_log.path": str(path), "access_log.max_bytes": 4096,
               "access_log.backups": 2},
        )  # fmt: skip
    assert access_files(tmp_path) == ["access.jsonl", "access.jsonl.1", "access.jsonl.2"]
    kept = [tmp_path / name for name in ("access.jsonl.2", "access.jsonl.1", "access.jsonl")]
    assert all(p.stat().st_size <= 4096 for p in kept)
    assert sum(p.stat().st_size for p in kept) > 2 * 4096 * 0.8  # full files, whole lines
    lines = read_lines(*kept)
    appends = [g for g in lines if g["command"] == "append"]
    assert appends and all(g["messages"] == 1 and g["topic"] == "rotated" for g in appends)
    assert len(appends) < 120  # the oldest went with the dropped files


@pytest.fixture
async def tansu(tmp_path: Path) -> AsyncIterator[Tansu]:
    async with running_tansu(tmp_path) as started:
        yield started


def produce_over_many_connections(bootstrap: str, producers: int, each: int) -> None:
    for p in range(producers):  # a producer's own connections each: the kernel spreads them
        producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
        for i in range(each):
            producer.produce("spread", value=b"p%d-%d" % (p, i))
        assert producer.flush(20) == 0


async def test_each_worker_writes_its_own_file(tansu: Tansu, tmp_path: Path) -> None:
    producers, each = 8, 5
    with trio.fail_after(LIMIT_S):
        async with supervisor(tmp_path, tansu.url, 2, "--set", "access_log.path=access.jsonl") as (
            proc,
            addresses,
            pids,
        ):
            assert len(pids) == 2
            await trio.to_thread.run_sync(
                produce_over_many_connections, addresses["kafka"], producers, each
            )
            proc.send_signal(signal.SIGTERM)  # passed on: each worker drains and writes
            await proc.wait()
        assert proc.returncode == 0
    names = access_files(tmp_path)
    assert names == ["access.worker0.jsonl", "access.worker1.jsonl"]
    per_worker = [read_lines(tmp_path / name) for name in names]
    assert all(per_worker), "each worker served some of the connections"
    appends = [g for lines in per_worker for g in lines if g["command"] == "append"]
    assert sum(g["messages"] for g in appends) == producers * each
    assert all(g["topic"] == "spread" and g["outcome"] == "ok" for g in appends)
