"""Real clients of each protocol producing without pause until told to stop, each in a thread
of its own, recording exactly what the gateway acknowledged: confluent-kafka (delivery reports,
acks=all), rstream 1.1.1 (publish confirms) and apache-iggy 0.9.0 (a send's reply).

They are for tests that do something to a gateway while traffic flows (SIGTERM, a crash): a
producer stops at its first failure, since the gateway going away is the point, and what it
records is only what was acknowledged. Every call that could wait on a gateway that no longer
answers is bounded.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

from apache_iggy import IggyClient, Partitioning, SendMessage, TcpConfig, TcpReconnectionConfig
from confluent_kafka import KafkaError, Message, Producer
from rstream import Producer as RabbitProducer
from rstream import RawMessage

__all__ = ["Acked", "iggy_producer", "kafka_producer", "rabbitmq_stream_producer"]

CALL_S = 5.0  # any one send, connect or close of the asyncio clients
KAFKA_WINDOW = 50  # produced and not yet reported, at most (the producer keeps a few in flight)
IGGY_BATCH = 10


@dataclass
class Acked:
    """What one producer was told was stored, and why it stopped. ``offsets`` only where the
    acknowledgement names them (Kafka: partition 0's offset of each value)."""

    values: list[bytes] = field(default_factory=list)
    offsets: dict[bytes, int] = field(default_factory=dict)
    failure: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, value: bytes, offset: int | None = None) -> None:
        with self.lock:
            self.values.append(value)
            if offset is not None:
                self.offsets[value] = offset

    @property
    def count(self) -> int:
        with self.lock:
            return len(self.values)


def kafka_producer(
    bootstrap: str,
    topic: str,
    stop: threading.Event,
    acked: Acked,
    *,
    prefix: bytes = b"k",
    config: Mapping[str, str | int] | None = None,
) -> None:
    """Produce ``k0``, ``k1``... (``prefix``) to partition 0 with acks=all until ``stop``; a
    failed delivery ends it. Undelivered messages time out after 3 s, so the final flush ends.
    ``config`` adds to (or overrides) the producer's settings: SASL, timeouts."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 2,
            "message.timeout.ms": 3000,
            "reconnect.backoff.ms": 100,
            "reconnect.backoff.max.ms": 500,
            **(config or {}),
        }
    )
    pending = 0
    failed = threading.Event()

    def delivered(error: KafkaError | None, message: Message) -> None:
        nonlocal pending
        pending -= 1
        if error is not None:
            acked.failure = acked.failure or str(error)
            failed.set()
            return
        offset = message.offset()
        assert offset is not None and message.partition() == 0
        acked.add(message.value() or b"", offset)

    sent = 0
    while not stop.is_set() and not failed.is_set():
        if pending >= KAFKA_WINDOW:
            producer.poll(0.01)  # serves delivery reports; returns at the first one
            continue
        producer.produce(topic, value=prefix + b"%d" % sent, partition=0, on_delivery=delivered)
        pending += 1
        sent += 1
        producer.poll(0)
    producer.flush(10)


def rabbitmq_stream_producer(
    host: str, port: int, stream: str, stop: threading.Event, acked: Acked
) -> None:
    """Publish ``r0``, ``r1``... to ``stream`` one confirmed message at a time until ``stop``."""

    async def run() -> None:
        producer = RabbitProducer(host, port, username="guest", password="guest")
        await asyncio.wait_for(producer.start(), CALL_S)
        try:
            await asyncio.wait_for(producer.create_stream(stream, exists_ok=True), CALL_S)
            sent = 0
            while not stop.is_set():
                value = b"r%d" % sent
                await asyncio.wait_for(producer.send_wait(stream, RawMessage(value)), CALL_S)
                acked.add(value)
                sent += 1
        except Exception as exc:  # the gateway went away: what was confirmed is recorded
            acked.failure = f"{type(exc).__name__}: {exc}"
        finally:
            try:
                await asyncio.wait_for(producer.close(), CALL_S)
            except Exception as exc:
                acked.failure = acked.failure or f"close: {type(exc).__name__}: {exc}"

    asyncio.run(run())


def iggy_producer(
    address: str, stream: str, topic: str, stop: threading.Event, acked: Acked
) -> None:
    """Send batches of ``IGGY_BATCH`` (``i0``, ``i1``...) to partition 0 of ``stream``/``topic``
    (created here) until ``stop``; the client does not reconnect, so a closed connection fails
    the next send at once."""

    async def run() -> None:
        no_retry = TcpReconnectionConfig(enabled=False)
        client = IggyClient(TcpConfig(server_address=address, reconnection=no_retry))
        await asyncio.wait_for(client.connect(), CALL_S)
        await asyncio.wait_for(client.login_user("iggy", "iggy"), CALL_S)
        await asyncio.wait_for(client.create_stream(stream), CALL_S)
        await asyncio.wait_for(client.create_topic(stream, topic, 1), CALL_S)
        sent = 0
        try:
            while not stop.is_set():
                values = [b"i%d" % (sent + j) for j in range(IGGY_BATCH)]
                messages = [SendMessage(v) for v in values]
                await asyncio.wait_for(
                    client.send_messages(stream, topic, Partitioning.partition_id(0), messages),
                    CALL_S,
                )
                for value in values:
                    acked.add(value)
                sent += IGGY_BATCH
        except Exception as exc:  # the gateway went away: what was answered is recorded
            acked.failure = f"{type(exc).__name__}: {exc}"

    asyncio.run(run())
