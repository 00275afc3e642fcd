"""Real clients across two gateways: a front streamgate whose backend is ``iggy://`` on a back
streamgate (embedded), as ``streamgate run --backend iggy://iggy:iggy@host:port`` runs it.

apache-iggy 0.9.0 talks to the front and to the back and sees the same streams, messages and
consumer offsets; confluent-kafka produces through the front and apache-iggy reads it from the
back, key as the ``streamgate.key`` header and timestamps kept (DESIGN.md §3)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio
from apache_iggy import Consumer as IggyConsumer
from apache_iggy import HeaderValue, PollingStrategy, ReceiveMessage, SendMessage
from confluent_kafka import Consumer, KafkaException, Producer

from gateway.app import Running
from gateway.model import DEFAULT_STREAM, Read, Topic
from tests.gateway.listeners.iggy.conftest import Clients, in_thread, poll, run_iggy
from tests.helpers.iggy_upstream import front_gateway, upstream_gateway

PAYLOADS = [b"chained %d " % i + bytes(range(i, i + 40)) for i in range(12)]


@asynccontextmanager
async def chain(tmp_path: Path) -> AsyncIterator[tuple[Running, Running]]:
    """(front, back)."""
    async with (
        upstream_gateway(tmp_path / "back") as back,
        front_gateway(tmp_path / "front", back.address("iggy")) as front,
    ):
        yield front, back


def _headers(message: ReceiveMessage) -> dict[str, bytes]:
    out = {}
    for key, value in (message.user_headers() or {}).items():
        assert isinstance(value, HeaderValue.Raw | HeaderValue.String), value
        raw = value.value
        out[key.value] = raw if isinstance(raw, bytes) else raw.encode()
    return out


async def test_apache_iggy_through_the_iggy_backend(tmp_path: Path) -> None:
    async def produce_and_consume(clients: Clients) -> list[list[tuple[int, bytes, Any]]]:
        client = await clients.connect()
        await client.create_stream("chain")
        await client.create_topic("chain", "events", 2)
        messages = [SendMessage(p, user_headers={"n": str(i)}) for i, p in enumerate(PAYLOADS)]
        await client.send_messages("chain", "events", 1, messages)
        first = await poll(client, "chain", "events", PollingStrategy.First(), partition=1)
        # Offsets through the front: consumer "c1" consumes 5, then Next goes on from there.
        reader = IggyConsumer.Single("c1")
        await poll(client, "chain", "events", PollingStrategy.Next(), partition=1, count=5,
                   consumer=reader, auto_commit=True)  # fmt: skip
        rest = await poll(client, "chain", "events", PollingStrategy.Next(), partition=1,
                          consumer=reader)  # fmt: skip
        return [
            [(m.offset(), m.payload(), _headers(m)) for m in polled] for polled in (first, rest)
        ]

    async def read_back(clients: Clients) -> list[list[tuple[int, bytes, Any]]]:
        client = await clients.connect()
        topic = await client.get_topic("chain", "events")
        assert topic is not None and topic.partitions_count == 2
        everything = await poll(client, "chain", "events", PollingStrategy.First(), partition=1)
        # The same consumer at the back resumes where the front left it.
        rest = await poll(client, "chain", "events", PollingStrategy.Next(), partition=1,
                          consumer=IggyConsumer.Single("c1"))  # fmt: skip
        return [
            [(m.offset(), m.payload(), _headers(m)) for m in polled]
            for polled in (everything, rest)
        ]

    with trio.fail_after(60):
        async with chain(tmp_path) as (front, back):
            first, rest = await run_iggy(front, produce_and_consume)
            everything, back_rest = await run_iggy(back, read_back)
            assert back.backend is not None
            stored = await back.backend.read(
                Read(topic=Topic("chain", "events"), partition=1, offset=0)
            )
    expected = [(i, p, {"n": str(i).encode()}) for i, p in enumerate(PAYLOADS)]
    assert first == expected
    assert rest == expected[5:]
    assert everything == expected
    assert back_rest == expected[5:]  # "c1" committed 5 through the front
    # The client's batch went through the front as it was: the back stored Iggy's wire form.
    assert [b.wire.format.name if b.wire else "decoded" for b in stored.batches] == ["iggy"]


async def test_kafka_through_the_front_iggy_at_the_back(tmp_path: Path) -> None:
    sent_at_ms = 1_700_000_000_123

    def produce(servers: str) -> None:
        p = Producer({"bootstrap.servers": servers, "linger.ms": 50})
        for i, payload in enumerate(PAYLOADS):
            p.produce("k2i", payload, key=b"key-%d" % i, headers=[("h", b"v%d" % i)],
                      timestamp=sent_at_ms + i)  # fmt: skip
        assert p.flush(20) == 0

    def consume(servers: str) -> list[tuple[bytes | None, bytes | None, int]]:
        c = Consumer({"bootstrap.servers": servers, "group.id": "k2i-readers",
                      "auto.offset.reset": "earliest"})  # fmt: skip
        got: list[tuple[bytes | None, bytes | None, int]] = []
        c.subscribe(["k2i"])
        try:
            while len(got) < len(PAYLOADS):
                msg = c.poll(10)
                assert msg is not None and msg.error() is None, msg and msg.error()
                got.append((msg.key(), msg.value(), msg.timestamp()[1]))
        finally:
            c.close()
        return got

    async def read_back(clients: Clients) -> list[tuple[bytes, dict[str, bytes], int]]:
        client = await clients.connect()
        polled = await poll(client, DEFAULT_STREAM, "k2i", PollingStrategy.Offset(0), count=1000)
        return [(m.payload(), _headers(m), m.origin_timestamp()) for m in polled]

    with trio.fail_after(90):
        async with chain(tmp_path) as (front, back):
            host, port = front.address("kafka")
            servers = f"{host}:{port}"
            await in_thread(lambda: produce(servers), limit_s=40)
            at_back = await run_iggy(back, read_back)
            through_front = await in_thread(lambda: consume(servers), limit_s=40)
    assert [p for p, _, _ in at_back] == PAYLOADS
    for i, (_, headers, origin_us) in enumerate(at_back):
        assert headers == {"h": b"v%d" % i, "streamgate.key": b"key-%d" % i}
        assert origin_us == (sent_at_ms + i) * 1000  # Kafka's CreateTime ms is Iggy's origin µs
    # Read back through the front, the key is a key again.
    assert through_front == [(b"key-%d" % i, p, sent_at_ms + i) for i, p in enumerate(PAYLOADS)]


async def test_an_idempotent_kafka_producer_is_refused_where_nothing_deduplicates(
    tmp_path: Path,
) -> None:
    """Nothing on the Iggy backend deduplicates by a Kafka producer id, so the front does not
    offer InitProducerId: librdkafka's idempotent producer stops with its own fatal error
    rather than being promised what nothing keeps; a plain producer goes on working."""

    def try_idempotent(servers: str) -> str:
        p = Producer({"bootstrap.servers": servers, "enable.idempotence": True,
                      "message.timeout.ms": 10_000})  # fmt: skip
        try:
            for _ in range(50):  # fatal once it learned the broker's versions
                p.produce("idem", b"x")
                p.flush(0.2)
        except KafkaException as exc:
            return str(exc)
        return "accepted"

    with trio.fail_after(60):
        async with chain(tmp_path) as (front, _):
            host, port = front.address("kafka")
            servers = f"{host}:{port}"
            refused = await in_thread(lambda: try_idempotent(servers), limit_s=40)
    assert "Idempotent producer not supported" in refused, refused
