"""Bridges through streamgate on the RabbitMQ backend, proven on the broker itself: rstream
publishing to the gateway (the fast path: entries reach RabbitMQ as rstream encoded them),
confluent-kafka producing through the gateway and rstream reading RabbitMQ directly, and the
reverse (rstream writing RabbitMQ directly, confluent-kafka consuming through the gateway, which
adopts the stream it did not make). Values, keys, headers and timestamps as DESIGN.md §3 says.
"""

from __future__ import annotations

import asyncio
import struct
from typing import Any

import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME
from confluent_kafka import Consumer as KafkaConsumer
from confluent_kafka import Producer as KafkaProducer
from rstream import (
    AMQPMessage,
    CompressionType,
    ConfirmationStatus,
    Producer,
    Properties,
    RawMessage,
    amqp_decoder,
)

from gateway.app import Running

from .conftest import Broker, in_asyncio, in_thread, publish_direct, read_direct

pytestmark = pytest.mark.slow

T0_MS = 1_700_000_000_123
COUNT = 8


def amqp_message(i: int) -> AMQPMessage:
    return AMQPMessage(
        body=b"value %d " % i + bytes(range(256)),
        application_properties={"text": f"caf\u00e9 {i}", "n": i, "big": (1 << 40) + i},
        properties=Properties(creation_time=T0_MS + i, message_id=f"id-{i}"),
    )


def gateway_rstream(running: Running) -> dict[str, Any]:
    host, port = running.address("rabbitmq_stream")
    return {"host": host, "port": port, "username": "guest", "password": "guest"}


def kafka_servers(running: Running) -> str:
    host, port = running.address("kafka")
    return f"{host}:{port}"


async def test_rstream_through_the_gateway_reaches_rabbitmq_unchanged(
    broker: Broker, gateway_on: Running
) -> None:
    """The fast path: what rstream published through the gateway is, entry for entry, what it
    would have stored on RabbitMQ itself (AMQP messages, raw entries, a gzip sub-entry batch)."""
    amqp = [amqp_message(i) for i in range(COUNT)]
    raw = [RawMessage(b"raw-%d" % i) for i in range(COUNT)]
    squeezed = [amqp_message(100 + i) for i in range(4)]

    async def publish() -> None:
        confirmed = asyncio.Event()

        async def on_confirm(status: ConfirmationStatus) -> None:
            if status.is_confirmed:
                confirmed.set()

        async with Producer(**gateway_rstream(gateway_on)) as producer:
            await producer.create_stream("fast")
            for message in amqp[:4]:
                await producer.send_wait("fast", message)
            await producer.send_batch("fast", [*amqp[4:], *raw])
            await producer.send_sub_entry("fast", squeezed, compression_type=CompressionType.Gzip,
                                          on_publish_confirm=on_confirm)  # fmt: skip
            await asyncio.wait_for(confirmed.wait(), 15)

    await in_asyncio(publish)
    total = 2 * COUNT + len(squeezed)
    got = await in_asyncio(lambda: read_direct(broker.rstream(), "fast", total))
    sent = [bytes(m) for m in (*amqp, *raw, *squeezed)]
    assert [entry for _, entry, _ in got] == sent
    offsets = [offset for offset, _, _ in got]
    assert offsets == sorted(offsets)  # the publisher's sequence (tracking chunks) takes offsets


async def test_kafka_through_the_gateway_rstream_reads_rabbitmq(
    broker: Broker, gateway_on: Running
) -> None:
    servers = kafka_servers(gateway_on)
    values = [b"kafka %d " % i + bytes(range(256)) for i in range(COUNT)]

    def produce() -> list[int]:
        offsets: list[int] = []
        producer = KafkaProducer({"bootstrap.servers": servers, "compression.type": "lz4",
                                  "linger.ms": 5})  # fmt: skip

        def delivered(err: Any, msg: Any) -> None:
            assert err is None, err
            offsets.append(msg.offset())

        for i, value in enumerate(values):
            producer.produce(
                "from-kafka", value, key=b"key-%d" % i, on_delivery=delivered,
                headers=[("h", b"v%d" % i), ("bin", bytes([0, 255, i]))], timestamp=T0_MS + i,
            )  # fmt: skip
        assert producer.flush(30) == 0
        return offsets

    offsets = await in_thread(produce)
    got = await in_asyncio(
        lambda: read_direct(broker.rstream(), "from-kafka", COUNT, decoder=amqp_decoder)
    )
    assert [(o, m.body) for o, m, _ in got] == list(zip(sorted(offsets), values, strict=True))
    for i, (_, message, _) in enumerate(got):
        assert message.application_properties == {b"h": b"v%d" % i, b"bin": bytes([0, 255, i])}
        assert message.message_annotations == {b"x-routing-key": b"key-%d" % i}
        assert message.properties.creation_time == T0_MS + i


async def test_rstream_writes_rabbitmq_kafka_consumes_through_the_gateway(
    broker: Broker, gateway_on: Running
) -> None:
    """A stream the gateway never made (rstream, straight to RabbitMQ) is a topic to Kafka."""
    sent = [amqp_message(i) for i in range(COUNT)]
    await in_asyncio(lambda: publish_direct(broker.rstream(), "from-rstream", sent))
    servers = kafka_servers(gateway_on)

    def consume() -> list[tuple[int, bytes | None, list[tuple[str, bytes]], tuple[int, int]]]:
        got: list[tuple[int, bytes | None, list[tuple[str, bytes]], tuple[int, int]]] = []
        consumer = KafkaConsumer({"bootstrap.servers": servers, "group.id": "from-rstream",
                                  "auto.offset.reset": "earliest"})  # fmt: skip
        consumer.subscribe(["from-rstream"])
        try:
            while len(got) < COUNT:
                msg = consumer.poll(10)
                assert msg is not None and msg.error() is None, msg and msg.error()
                raw: Any = msg.headers() or []
                offset = msg.offset()
                assert offset is not None
                got.append((offset, msg.value(), [(str(k), bytes(v or b"")) for k, v in raw],
                            msg.timestamp()))  # fmt: skip
        finally:
            consumer.close()
        return got

    got = await in_thread(consume)
    assert [(o, v) for o, v, _, _ in got] == [(i, amqp_message(i).body) for i in range(COUNT)]
    for i, (_, _, headers, timestamp) in enumerate(got):
        assert headers == [
            ("streamgate.amqp.message_id", b"id-%d" % i),
            ("text", f"caf\u00e9 {i}".encode()),
            ("n", struct.pack("<i", i)),
            ("big", struct.pack("<q", (1 << 40) + i)),
        ], i
        assert timestamp == (TIMESTAMP_CREATE_TIME, T0_MS + i), i
