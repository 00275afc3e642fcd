"""RabbitMQ Stream and the other protocols on the same embedded data (DESIGN.md §3): a stream
published with rstream 1.1.1 is read completely with Rog, apache-iggy 0.9.0 and confluent-kafka,
and what Kafka and Iggy clients write is read with rstream; values, properties and times intact.

The mapping (gateway/translate/rabbitmq_stream/chunks.py): virtual host ``/`` is the canonical
stream ``default``, a RabbitMQ stream the topic of the same name (partition 0). The AMQP data body
is the value; application properties are typed headers (an AMQP int is a 4-byte little-endian
INT32 header, a long an INT64, a string a STRING: Kafka gets their bytes, Iggy their kinds);
properties.creation-time (ms) is the timestamp; a Kafka key is the ``x-routing-key`` message
annotation, an Iggy u64 id the message-id.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import trio
from apache_iggy import Consumer as IggyConsumer
from apache_iggy import HeaderKey, HeaderValue, IggyClient, PollingStrategy, SendMessage
from confluent_kafka import TIMESTAMP_CREATE_TIME
from confluent_kafka import Consumer as KafkaConsumer
from confluent_kafka import Producer as KafkaProducer
from rstream import (
    AMQPMessage,
    CompressionType,
    ConfirmationStatus,
    Consumer,
    ConsumerOffsetSpecification,
    MessageContext,
    OffsetType,
    Producer,
    Properties,
    amqp_decoder,
)

from gateway.app import Running
from gateway.model import DEFAULT_STREAM
from protocols.rog import Error, FetchOk, Ok
from tests.helpers.rog_client import RogClient

from .conftest import eventually, in_thread, rstream_kwargs, run_client

T = TypeVar("T")

T0_MS = 1_700_000_000_123  # creation times T0_MS + i


def amqp_message(i: int) -> AMQPMessage:
    return AMQPMessage(
        body=b"value %d \xe2\x82\xac " % i + bytes(range(256)),
        application_properties={"text": f"caf\u00e9 {i}", "n": i, "neg": -i - 1,
                                "big": (1 << 40) + i},
        properties=Properties(creation_time=T0_MS + i),
    )  # fmt: skip


def body_of(i: int) -> bytes:
    body = amqp_message(i).body
    assert isinstance(body, bytes)
    return body


COUNT = 12


async def publish_with_rstream(running: Running, stream: str) -> None:
    """Messages 0-5 one confirmed send each, 6-11 as one batch (one Publish frame)."""

    async def scenario(host: str, port: int) -> None:
        async with Producer(**rstream_kwargs(port, host)) as producer:
            await producer.create_stream(stream)
            for i in range(6):
                await producer.send_wait(stream, amqp_message(i))
            await producer.send_batch(stream, [amqp_message(i) for i in range(6, COUNT)])

    await run_client(running, scenario)


Received = tuple[int, AMQPMessage, int]  # offset, message, chunk timestamp


async def read_with_rstream(host: str, port: int, stream: str, count: int) -> list[Received]:
    got: list[Received] = []

    async def on_message(message: AMQPMessage, context: MessageContext) -> None:
        got.append((context.offset, message, context.timestamp))

    consumer = Consumer(**rstream_kwargs(port, host))
    await consumer.start()
    try:
        await consumer.subscribe(
            stream, on_message, decoder=amqp_decoder,
            offset_specification=ConsumerOffsetSpecification(OffsetType.FIRST, None),
        )  # fmt: skip
        await eventually(lambda: len(got) >= count)
    finally:
        await consumer.close()
    return got


async def iggy(running: Running, scenario: Callable[[IggyClient], Awaitable[T]]) -> T:
    """An apache-iggy scenario (asyncio) in a thread, logged in as root, bounded in time."""
    host, port = running.address("iggy")

    async def main() -> T:
        client = IggyClient(f"{host}:{port}")
        await client.connect()
        await client.login_user("iggy", "iggy")
        result = await asyncio.wait_for(scenario(client), 25)
        await client.ping()  # iggy.md §1.1: let the heartbeat settle before the runtime exits
        return result

    return await in_thread(lambda: asyncio.run(main()))


def kafka_servers(running: Running) -> str:
    host, port = running.address("kafka")
    return f"{host}:{port}"


def typed(headers: dict[Any, Any] | None) -> dict[str, tuple[str, object]]:
    """Iggy user headers as {name: (kind, value)}, so that the kinds are compared too."""
    out: dict[str, tuple[str, object]] = {}
    for key, value in (headers or {}).items():
        assert isinstance(key, HeaderKey.String), key
        out[key.value] = (type(value).__name__.rpartition("_")[2], value.value)
    return out


# --- rstream -> Rog, Iggy, Kafka --------------------------------------------------------------


async def test_rstream_publishes_rog_fetches_every_value(gateway: Running) -> None:
    await publish_with_rstream(gateway, "rs-rog")
    rog = RogClient(*gateway.address("rog"))
    with trio.fail_after(30):
        for i in range(COUNT):
            fetched = await rog.fetch("rs-rog", 0, "rog-group")
            assert isinstance(fetched, FetchOk), (i, fetched)
            assert fetched.data == body_of(i), i
            assert isinstance(await rog.ack("rs-rog", 0, "rog-group"), Ok)
        assert isinstance(await rog.fetch("rs-rog", 0, "rog-group"), Error)  # nothing more


async def test_rstream_publishes_iggy_polls_typed_headers_and_times(gateway: Running) -> None:
    await publish_with_rstream(gateway, "rs-iggy")

    async def poll(
        client: IggyClient,
    ) -> list[tuple[int, bytes, dict[str, tuple[str, object]], int]]:
        messages = await client.poll_messages(
            DEFAULT_STREAM, "rs-iggy", consumer=IggyConsumer.Single("reader"),
            polling_strategy=PollingStrategy.First(), count=100, auto_commit=False,
            partition_id=0,
        )  # fmt: skip
        return [(m.offset(), m.payload(), typed(m.user_headers()), m.origin_timestamp())
                for m in messages]  # fmt: skip

    got = await iggy(gateway, poll)
    assert [(o, p) for o, p, _, _ in got] == [(i, body_of(i)) for i in range(COUNT)]
    for i, (_, _, headers, origin_us) in enumerate(got):
        assert headers == {
            "text": ("String", f"caf\u00e9 {i}"),
            "n": ("Int32", i),
            "neg": ("Int32", -i - 1),
            "big": ("Int64", (1 << 40) + i),
        }, i
        assert origin_us == (T0_MS + i) * 1000, i


async def test_rstream_publishes_kafka_consumes_headers_and_create_time(gateway: Running) -> None:
    await publish_with_rstream(gateway, "rs-kafka")
    servers = kafka_servers(gateway)

    def consume() -> list[
        tuple[int, bytes | None, bytes | None, list[tuple[str, bytes]], tuple[int, int]]
    ]:
        got: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes]],
                        tuple[int, int]]] = []  # fmt: skip
        consumer = KafkaConsumer({"bootstrap.servers": servers, "group.id": "from-rstream",
                                  "auto.offset.reset": "earliest"})  # fmt: skip
        consumer.subscribe(["rs-kafka"])
        try:
            while len(got) < COUNT:
                msg = consumer.poll(10)
                assert msg is not None and msg.error() is None, msg and msg.error()
                raw: Any = msg.headers() or []  # confluent's stubs type it loosely
                headers = [(str(k), bytes(v or b"")) for k, v in raw]
                offset = msg.offset()
                assert offset is not None
                got.append((offset, msg.key(), msg.value(), headers, msg.timestamp()))
        finally:
            consumer.close()
        return got

    got = await in_thread(consume)
    assert [(o, k, v) for o, k, v, _, _ in got] == [(i, None, body_of(i)) for i in range(COUNT)]
    for i, (_, _, _, headers, timestamp) in enumerate(got):
        assert headers == [
            ("text", (f"caf\u00e9 {i}").encode()),
            ("n", struct.pack("<i", i)),
            ("neg", struct.pack("<i", -i - 1)),
            ("big", struct.pack("<q", (1 << 40) + i)),
        ], i
        assert timestamp == (TIMESTAMP_CREATE_TIME, T0_MS + i), i


async def test_rstream_gzip_sub_entries_read_by_kafka_and_iggy(gateway: Running) -> None:
    """Sub-entry batches are stored compressed as published; other protocols get their records."""

    async def scenario(host: str, port: int) -> None:
        confirmed = asyncio.Event()

        async def on_confirm(status: ConfirmationStatus) -> None:
            if status.is_confirmed:
                confirmed.set()

        async with Producer(**rstream_kwargs(port, host)) as producer:
            await producer.create_stream("rs-gzip")
            await producer.send_sub_entry(
                "rs-gzip", [amqp_message(i) for i in range(4)],
                compression_type=CompressionType.Gzip, on_publish_confirm=on_confirm,
            )  # fmt: skip
            await confirmed.wait()  # flushed by rstream's own timer

    await run_client(gateway, scenario)

    async def poll(client: IggyClient) -> list[tuple[int, bytes, int]]:
        messages = await client.poll_messages(
            DEFAULT_STREAM, "rs-gzip", consumer=IggyConsumer.Single("reader"),
            polling_strategy=PollingStrategy.First(), count=100, auto_commit=False,
            partition_id=0,
        )  # fmt: skip
        return [(m.offset(), m.payload(), m.origin_timestamp()) for m in messages]

    assert await iggy(gateway, poll) == [(i, body_of(i), (T0_MS + i) * 1000) for i in range(4)]
    servers = kafka_servers(gateway)

    def consume() -> list[bytes | None]:
        consumer = KafkaConsumer({"bootstrap.servers": servers, "group.id": "gz",
                                  "auto.offset.reset": "earliest"})  # fmt: skip
        consumer.subscribe(["rs-gzip"])
        values: list[bytes | None] = []
        try:
            while len(values) < 4:
                msg = consumer.poll(10)
                assert msg is not None and msg.error() is None, msg and msg.error()
                values.append(msg.value())
        finally:
            consumer.close()
        return values

    assert await in_thread(consume) == [body_of(i) for i in range(4)]


# --- Kafka, Iggy -> rstream ---------------------------------------------------------------------


def properties_of(message: AMQPMessage) -> Properties:
    props = message.properties
    assert isinstance(props, Properties), props
    return props


async def test_kafka_produces_rstream_consumes_key_headers_and_time(gateway: Running) -> None:
    servers = kafka_servers(gateway)
    values = [b"kafka %d " % i + bytes(range(256)) for i in range(COUNT)]

    def produce() -> None:
        producer = KafkaProducer({"bootstrap.servers": servers, "compression.type": "lz4"})
        for i, value in enumerate(values):
            producer.produce(
                "from-kafka", value, key=b"key-%d" % i,
                headers=[("h", b"v%d" % i), ("bin", bytes([0, 255, i]))], timestamp=T0_MS + i,
            )  # fmt: skip
        assert producer.flush(20) == 0

    await in_thread(produce)
    got = await run_client(gateway, lambda h, p: read_with_rstream(h, p, "from-kafka", COUNT))
    assert [(o, m.body) for o, m, _ in got] == list(enumerate(values))
    for i, (_, message, _) in enumerate(got):
        assert message.application_properties == {b"h": b"v%d" % i, b"bin": bytes([0, 255, i])}
        assert message.message_annotations == {b"x-routing-key": b"key-%d" % i}
        assert properties_of(message).creation_time == T0_MS + i


async def test_iggy_sends_rstream_consumes_typed_properties_and_ids(gateway: Running) -> None:
    payloads = [b"iggy %d " % i + bytes(range(256)) for i in range(COUNT)]

    async def send(client: IggyClient) -> list[int]:
        await client.create_stream(DEFAULT_STREAM)
        await client.create_topic(DEFAULT_STREAM, "from-iggy", 1)
        messages = [
            SendMessage(
                payload,
                user_headers={
                    HeaderKey.String("s"): HeaderValue.String(f"x{i}"),
                    HeaderKey.String("i32"): HeaderValue.Int32(-i),
                    HeaderKey.String("u64"): HeaderValue.UnsignedInt64((1 << 63) + i),
                    HeaderKey.String("yes"): HeaderValue.Bool(i % 2 == 0),
                    HeaderKey.String("f"): HeaderValue.Float64(i + 0.25),
                },
                id=1000 + i,
            )
            for i, payload in enumerate(payloads)
        ]
        await client.send_messages(DEFAULT_STREAM, "from-iggy", 0, messages)
        polled = await client.poll_messages(
            DEFAULT_STREAM, "from-iggy", consumer=IggyConsumer.Single("r"),
            polling_strategy=PollingStrategy.First(), count=100, auto_commit=False,
            partition_id=0,
        )  # fmt: skip
        return [m.origin_timestamp() for m in polled]

    origins = await iggy(gateway, send)
    assert len(origins) == COUNT
    got = await run_client(gateway, lambda h, p: read_with_rstream(h, p, "from-iggy", COUNT))
    assert [(o, m.body) for o, m, _ in got] == list(enumerate(payloads))
    for i, (_, message, _) in enumerate(got):
        assert message.application_properties == {
            b"s": b"x%d" % i, b"i32": -i, b"u64": (1 << 63) + i, b"yes": i % 2 == 0,
            b"f": i + 0.25,
        }, i  # fmt: skip
        props = properties_of(message)
        assert props.message_id == 1000 + i, props
        assert props.creation_time == origins[i] // 1000, (props, origins[i])
