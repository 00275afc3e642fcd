"""The real clients of the bridge matrix, each reduced to one producer and one consumer.

A producer sends ``COUNT`` messages to partition 0 of a topic through its listener and returns
what it sent as the canonical model sees it (``Sent``, DESIGN.md §3); a consumer reads them back
from the first offset and returns what its client library showed (``Seen``), reduced to the same
terms: header values as bytes with the kind the client reported (None when the protocol has no
kinds), timestamps in milliseconds. ``expected.py`` says which ``Seen`` each ``Sent`` must give.

Clients: confluent-kafka 2.x (Kafka), rstream 1.1.1 (RabbitMQ Stream), apache-iggy 0.9.0 (Iggy,
current framing) and the project's Rog client (rog.md §7). Each runs in a worker thread, bounded.
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import trio
from apache_iggy import Consumer as IggyConsumer
from apache_iggy import HeaderKey, HeaderValue, IggyClient, PollingStrategy, SendMessage
from confluent_kafka import TIMESTAMP_CREATE_TIME
from confluent_kafka import Consumer as KafkaConsumer
from confluent_kafka import Producer as KafkaProducer
from rstream import (
    AMQPMessage,
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
from protocols.rog import FetchOk, Ok
from tests.helpers.rog_client import RogClient

T = TypeVar("T")
COUNT = 6
T0_MS = 1_700_000_000_123  # producers that set a create time use T0_MS + i
LIMIT_S = 40

HeaderView = tuple[str | None, bytes | int]  # (kind as the client names it, value)


@dataclass(frozen=True, slots=True)
class Sent:
    """One message as the canonical model holds it after its producer's listener took it."""

    value: bytes
    key: bytes | None = None
    headers: dict[str, tuple[str, bytes]] = field(default_factory=dict)  # name -> (kind, bytes)
    timestamp_ms: int | None = None  # None: stamped on arrival, within the producer's window
    id: int = 0
    window_ms: tuple[int, int] = (0, 0)  # when the producer ran (for arrival timestamps)


@dataclass(frozen=True, slots=True)
class Seen:
    """One message as a consumer's client library handed it over."""

    value: bytes
    key: bytes | None = None
    headers: dict[str, HeaderView] = field(default_factory=dict)
    timestamp_ms: int | None = None  # None: the protocol shows none
    id: int = 0


async def in_thread(fn: Callable[[], T]) -> T:
    with trio.fail_after(LIMIT_S):
        return await trio.to_thread.run_sync(fn, abandon_on_cancel=True)


async def in_asyncio(scenario: Callable[[], Awaitable[T]]) -> T:
    async def main() -> T:
        return await asyncio.wait_for(scenario(), LIMIT_S - 5)

    return await in_thread(lambda: asyncio.run(main()))


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def value_of(protocol: str, i: int) -> bytes:
    """Binary values, not UTF-8, different per message and per producer."""
    return b"%s %d \xff\x00" % (protocol.encode(), i) + bytes(range(0, 256, 7))


# --- Kafka (confluent-kafka) ---------------------------------------------------------------------


def _servers(running: Running) -> str:
    host, port = running.address("kafka")
    return f"{host}:{port}"


async def kafka_produce(running: Running, topic: str) -> list[Sent]:
    servers = _servers(running)
    sent = [
        Sent(value_of("kafka", i), b"key-%d" % i,
             {"h": ("raw", b"v%d" % i), "bin": ("raw", bytes([0, 255, i]))}, T0_MS + i)
        for i in range(COUNT)
    ]  # fmt: skip

    def produce() -> None:
        errors: list[Any] = []
        producer = KafkaProducer({"bootstrap.servers": servers, "compression.type": "lz4",
                                  "linger.ms": 5, "enable.idempotence": True})  # fmt: skip
        for s in sent:
            assert s.timestamp_ms is not None
            producer.produce(
                topic, s.value, key=s.key, partition=0, timestamp=s.timestamp_ms,
                headers=[(name, value) for name, (_, value) in s.headers.items()],
                on_delivery=lambda err, _msg: errors.append(err) if err else None,
            )  # fmt: skip
        assert producer.flush(30) == 0
        assert errors == []

    await in_thread(produce)
    return sent


async def kafka_consume(running: Running, topic: str, count: int) -> list[Seen]:
    servers = _servers(running)

    def consume() -> list[Seen]:
        seen: list[Seen] = []
        consumer = KafkaConsumer({"bootstrap.servers": servers, "group.id": f"matrix-{topic}",
                                  "auto.offset.reset": "earliest"})  # fmt: skip
        consumer.subscribe([topic])
        try:
            while len(seen) < count:
                msg = consumer.poll(10)
                assert msg is not None and msg.error() is None, msg and msg.error()
                assert msg.offset() == len(seen), (msg.offset(), len(seen))
                kind, ts = msg.timestamp()
                assert kind == TIMESTAMP_CREATE_TIME, kind
                raw: Any = msg.headers() or []
                headers = {str(k): (None, bytes(v or b"")) for k, v in raw}
                assert len(headers) == len(raw), raw  # no duplicate names were sent
                seen.append(Seen(msg.value() or b"", msg.key(), headers, ts))  # type: ignore[arg-type]
            extra = consumer.poll(0.5)
            assert extra is None or extra.error() is not None, "a message too many"
        finally:
            consumer.close()
        return seen

    return await in_thread(consume)


# --- RabbitMQ Stream (rstream) -------------------------------------------------------------------


def _rstream(running: Running) -> dict[str, Any]:
    host, port = running.address("rabbitmq_stream")
    return {"host": host, "port": port, "username": "guest", "password": "guest"}


async def rstream_produce(running: Running, topic: str) -> list[Sent]:
    kw = _rstream(running)
    sent = [
        Sent(value_of("rstream", i), None,
             {"text": ("string", f"caf\u00e9 {i}".encode()), "n": ("int32", struct.pack("<i", -i)),
              "big": ("int64", struct.pack("<q", (1 << 40) + i))}, T0_MS + i, 1000 + i)
        for i in range(COUNT)
    ]  # fmt: skip
    messages = [
        AMQPMessage(
            body=s.value,
            application_properties={"text": f"caf\u00e9 {i}", "n": -i, "big": (1 << 40) + i},
            properties=Properties(creation_time=T0_MS + i, message_id=1000 + i),
        )
        for i, s in enumerate(sent)
    ]

    async def publish() -> None:
        async with Producer(**kw) as producer:
            for message in messages[:2]:  # one Publish frame each, confirmed one at a time
                await producer.send_wait(topic, message)
            await producer.send_batch(topic, messages[2:])  # one frame, waits for the confirms

    await in_asyncio(publish)
    return sent


def _amqp_value(v: object) -> HeaderView:
    if isinstance(v, bytes):
        return (None, v)
    if isinstance(v, bool) or not isinstance(v, int):
        raise AssertionError(f"unexpected application property {v!r}")
    return ("int", v)


async def rstream_consume(running: Running, topic: str, count: int) -> list[Seen]:
    kw = _rstream(running)

    async def read() -> list[Seen]:
        got: list[tuple[int, AMQPMessage, int]] = []

        async def on_message(message: AMQPMessage, context: MessageContext) -> None:
            got.append((context.offset, message, context.timestamp))

        consumer = Consumer(**kw)
        await consumer.start()
        try:
            await consumer.subscribe(
                topic, on_message, decoder=amqp_decoder,
                offset_specification=ConsumerOffsetSpecification(OffsetType.FIRST, None),
            )  # fmt: skip
            deadline = time.monotonic() + 20
            while len(got) < count:
                assert time.monotonic() < deadline, f"{len(got)} of {count} delivered"
                await asyncio.sleep(0.02)
            await asyncio.sleep(0.3)  # nothing more may come
        finally:
            await consumer.close()
        assert [o for o, _, _ in got] == list(range(count)), [o for o, _, _ in got]
        seen = []
        for _, m, _chunk_ts in got:
            props = m.properties
            created = props.creation_time if isinstance(props, Properties) else None
            message_id = props.message_id if isinstance(props, Properties) else None
            annotations = m.message_annotations or {}
            key = annotations.get(b"x-routing-key")
            body = m.body
            assert isinstance(body, bytes), body
            headers = {
                k.decode(): _amqp_value(v) for k, v in (m.application_properties or {}).items()
            }
            if isinstance(key, str):
                key = key.encode()
            message_id = message_id if isinstance(message_id, int) else 0
            seen.append(Seen(body, key, headers, created, message_id))
        return seen

    return await in_asyncio(read)


# --- Iggy (apache-iggy) --------------------------------------------------------------------------


async def _iggy(running: Running, scenario: Callable[[IggyClient], Awaitable[T]]) -> T:
    host, port = running.address("iggy")

    async def main() -> T:
        client = IggyClient(f"{host}:{port}")
        await client.connect()
        await client.login_user("iggy", "iggy")
        result = await scenario(client)
        await client.ping()  # iggy.md §1.1: let the heartbeat settle before the runtime exits
        return result

    return await in_asyncio(main)


async def iggy_produce(running: Running, topic: str) -> list[Sent]:
    start = now_ms()
    sent = [
        Sent(value_of("iggy", i), None,
             {"s": ("string", b"x%d" % i), "i32": ("int32", struct.pack("<i", -i)),
              "raw": ("raw", bytes([0, 255, i]))}, None, 2000 + i)
        for i in range(COUNT)
    ]  # fmt: skip
    messages = [
        SendMessage(
            s.value,
            user_headers={
                HeaderKey.String("s"): HeaderValue.String(f"x{i}"),
                HeaderKey.String("i32"): HeaderValue.Int32(-i),
                HeaderKey.String("raw"): HeaderValue.Raw(bytes([0, 255, i])),
            },
            id=s.id,
        )
        for i, s in enumerate(sent)
    ]

    async def send(client: IggyClient) -> None:
        await client.send_messages(DEFAULT_STREAM, topic, 0, messages[:3])
        await client.send_messages(DEFAULT_STREAM, topic, 0, messages[3:])

    await _iggy(running, send)
    window = (start, now_ms())
    return [Sent(s.value, s.key, s.headers, None, s.id, window) for s in sent]


_IGGY_KINDS = {"Raw": "raw", "String": "string", "Int32": "int32", "Int64": "int64"}


def _iggy_header(value: object) -> HeaderView:
    kind = type(value).__name__.rpartition("_")[2]
    x = getattr(value, "value", None)
    if kind == "Raw" and isinstance(x, bytes):
        return ("raw", x)
    if kind == "String" and isinstance(x, str):
        return ("string", x.encode())
    if kind in ("Int32", "Int64") and isinstance(x, int):
        return (_IGGY_KINDS[kind], struct.pack("<i" if kind == "Int32" else "<q", x))
    raise AssertionError(f"unexpected Iggy header {value!r}")


async def iggy_consume(running: Running, topic: str, count: int) -> list[Seen]:
    async def poll(client: IggyClient) -> list[Seen]:
        messages = await client.poll_messages(
            DEFAULT_STREAM, topic, consumer=IggyConsumer.Single("matrix"),
            polling_strategy=PollingStrategy.First(), count=count + 5, auto_commit=False,
            partition_id=0,
        )  # fmt: skip
        assert [m.offset() for m in messages] == list(range(count))
        seen = []
        for m in messages:
            headers: dict[str, HeaderView] = {}
            for k, v in (m.user_headers() or {}).items():
                assert isinstance(k, HeaderKey.String), k
                headers[k.value] = _iggy_header(v)
            key_header = headers.pop("streamgate.key", None)
            key = key_header[1] if key_header is not None else None
            assert key is None or isinstance(key, bytes)
            seen.append(Seen(m.payload(), key, headers, m.origin_timestamp() // 1000, m.id()))
        return seen

    return await _iggy(running, poll)


# --- Rog (the project's client, rog.md §7) -------------------------------------------------------


async def rog_produce(running: Running, topic: str) -> list[Sent]:
    rog = RogClient(*running.address("rog"))
    start = now_ms()
    sent = [Sent(value_of("rog", i)) for i in range(COUNT)]
    with trio.fail_after(LIMIT_S):
        for s in sent:
            assert isinstance(await rog.publish(topic, 0, s.value), Ok)
    window = (start, now_ms())
    return [Sent(s.value, window_ms=window) for s in sent]


async def rog_consume(running: Running, topic: str, count: int) -> list[Seen]:
    rog = RogClient(*running.address("rog"))
    seen = []
    with trio.fail_after(LIMIT_S):
        for _ in range(count):
            fetched = await rog.fetch(topic, 0, "matrix")
            assert isinstance(fetched, FetchOk), fetched
            seen.append(Seen(fetched.data))
            assert isinstance(await rog.ack(topic, 0, "matrix"), Ok)
        assert not isinstance(await rog.fetch(topic, 0, "matrix"), FetchOk)  # nothing more
    return seen


Producer_ = Callable[[Running, str], Awaitable[list[Sent]]]
Consumer_ = Callable[[Running, str, int], Awaitable[list[Seen]]]
PRODUCERS: dict[str, Producer_] = {
    "kafka": kafka_produce, "rabbitmq_stream": rstream_produce, "iggy": iggy_produce,
    "rog": rog_produce,
}  # fmt: skip
CONSUMERS: dict[str, Consumer_] = {
    "kafka": kafka_consume, "rabbitmq_stream": rstream_consume, "iggy": iggy_consume,
    "rog": rog_consume,
}  # fmt: skip
