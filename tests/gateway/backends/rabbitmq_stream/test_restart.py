"""RabbitMQ killed (SIGKILL) and started again while confluent-kafka produces through streamgate
on the RabbitMQ backend (issue 6): the producer sees retriable errors, the backend reconnects,
``/readyz`` goes false then true, and every message the gateway acknowledged is in the stream
afterwards, read with rstream from RabbitMQ itself.

The producer does not retry (``retries=0``), so each failure shows up in its delivery reports;
an acknowledged message is one whose delivery report has no error.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
import trio
from confluent_kafka import KafkaError
from confluent_kafka import Producer as KafkaProducer
from prometheus_client import CollectorRegistry
from rstream import amqp_decoder

from gateway.app import Running
from gateway.model import CreateTopic, Topic
from tests.gateway.test_admin_http import http_get
from tests.helpers.rabbitmq_server import require_rabbitmq, running_rabbitmq
from tests.helpers.rstream_direct import Read, read_until

from .conftest import Broker, in_asyncio, streamgate

pytestmark = pytest.mark.slow

TOPIC = "restarts"


class Produced:
    """What the producer thread saw, shared with the test."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.acked: list[bytes] = []
        self.errors: list[KafkaError] = []
        self.stop = threading.Event()

    def count(self) -> int:
        with self.lock:
            return len(self.acked)

    async def reached(self, count: int) -> bool:
        await trio.lowlevel.checkpoint()
        return self.count() >= count


def produce(servers: str, produced: Produced) -> None:
    producer = KafkaProducer({
        "bootstrap.servers": servers, "retries": 0, "linger.ms": 2,
        "message.timeout.ms": 3_000, "request.timeout.ms": 3_000,
        "topic.metadata.refresh.interval.ms": 500,
    })  # fmt: skip

    def delivered(err: Any, msg: Any) -> None:
        with produced.lock:
            if err is None:
                produced.acked.append(msg.value())
            else:
                produced.errors.append(err)

    i = 0
    while not produced.stop.is_set():
        try:
            producer.produce(TOPIC, b"m%06d" % i, on_delivery=delivered)
            i += 1
        except BufferError:
            producer.poll(0.1)
        producer.poll(0.005)
    assert producer.flush(30) == 0


async def bodies(where: dict[str, Any], wanted: set[bytes]) -> list[bytes]:
    """The bodies in the stream, from RabbitMQ itself, until every one ``wanted`` came."""
    seen: set[bytes] = set()

    def enough(got: list[Read]) -> bool:
        seen.add(got[-1][1].body)
        return wanted <= seen

    got = await read_until(where, TOPIC, enough, decoder=amqp_decoder, strict=False)
    return [message.body for _, message, _ in got]


def errors_of(registry: CollectorRegistry, protocol: str, error_type: str) -> float:
    """How many commands of ``protocol`` failed with ``error_type`` (the command histogram)."""
    return sum(
        sample.value
        for metric in registry.collect()
        for sample in metric.samples
        if sample.name == "streamgate_command_duration_seconds_count"
        and sample.labels.get("protocol") == protocol
        and sample.labels.get("error_type") == error_type
    )


async def ready(running: Running) -> bool:
    assert running.admin is not None
    with trio.fail_after(5):
        status, _ = await http_get(running.admin, "/readyz")
    return status == 200


async def until(check: Any, limit_s: float, what: str) -> None:
    with trio.move_on_after(limit_s):
        while not await check():  # noqa: ASYNC110 - HTTP, another thread: no event to await
            await trio.sleep(0.1)
        return
    raise AssertionError(f"not {what} within {limit_s} s")


async def test_kill_and_restart_rabbitmq_under_a_kafka_producer(tmp_path: Path) -> None:
    require_rabbitmq()
    produced = Produced()
    async with (
        running_rabbitmq(tmp_path / "rabbitmq") as server,
        streamgate(tmp_path, Broker(*server.stream_address, "/").url) as running,
    ):
        assert running.backend is not None
        await running.backend.create_topic(CreateTopic(topic=Topic("default", TOPIC), partitions=1))
        host, port = running.address("kafka")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.to_thread.run_sync, produce, f"{host}:{port}", produced)
            try:
                await until(lambda: produced.reached(100), 30, "producing")
                assert await ready(running)
                await server.kill()
                await until(lambda: _not(ready(running)), 10, "unready after the kill")
                before = produced.count()
                await trio.sleep(1)  # the producer keeps going into the outage
                await server.start()
                await until(lambda: ready(running), 60, "ready after the restart")
                await until(lambda: produced.reached(before + 100), 60, "producing after restart")
            finally:
                produced.stop.set()
        assert running.metrics is not None
        unavailable = errors_of(running.metrics.registry, "kafka", "backend_unavailable")
        await server.wait_stream_available(TOPIC)
        where = Broker(*server.stream_address, "/").rstream()
        wanted = set(produced.acked)
        stored = await in_asyncio(lambda: bodies(where, wanted))
    # The gateway answered with retriable errors (backend_unavailable is Kafka's
    # NOT_LEADER_OR_FOLLOWER): librdkafka kept those messages for another try until their
    # message.timeout.ms; none failed for good for another reason.
    assert unavailable > 0
    assert produced.errors, "the outage went unnoticed"
    assert all(e.retriable() or e.code() == KafkaError._MSG_TIMED_OUT for e in produced.errors), {
        e.name() for e in produced.errors
    }
    lost = sorted(wanted - set(stored))
    assert not lost, f"{len(lost)} of {len(wanted)} acknowledged messages lost: {lost[:5]}"
    assert len(set(stored)) == len(stored)  # nothing stored twice (the producer never retries)


async def _not(check: Any) -> bool:
    return not await check
