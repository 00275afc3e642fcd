"""Iggy and the other protocols on the same embedded data (DESIGN.md §3): messages sent with
apache-iggy 0.9.0 are read with Rog and Kafka clients, and the reverse, payloads intact."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import trio
from apache_iggy import Consumer as IggyConsumer
from apache_iggy import HeaderValue, IggyClient, PollingStrategy, SendMessage
from confluent_kafka import Consumer, Producer

from gateway.app import Running
from gateway.model import DEFAULT_STREAM
from protocols.rog import FetchOk, Ok
from tests.helpers.rog_client import RogClient

T = TypeVar("T")


async def iggy(running: Running, scenario: Callable[[IggyClient], Awaitable[T]]) -> T:
    """Run an apache-iggy scenario (asyncio) in a thread, logged in as root, bounded in time."""
    host, port = running.address("iggy")

    async def main() -> T:
        client = IggyClient(f"{host}:{port}")
        await client.connect()
        await client.login_user("iggy", "iggy")
        result = await scenario(client)
        await client.ping()  # iggy.md §1.1: let the heartbeat settle before the runtime exits
        return result

    with trio.fail_after(60):
        return await trio.to_thread.run_sync(lambda: asyncio.run(main()), abandon_on_cancel=True)


def kafka_servers(running: Running) -> str:
    host, port = running.address("kafka")
    return f"{host}:{port}"


async def in_thread(fn: Callable[[], T]) -> T:
    with trio.fail_after(60):
        return await trio.to_thread.run_sync(fn, abandon_on_cancel=True)


PAYLOADS = [b"iggy %d " % i + os.urandom(64) + bytes(range(256)) for i in range(20)]


async def test_iggy_sends_rog_fetches(gateway: Running) -> None:
    async def send(client: IggyClient) -> None:
        await client.create_stream(DEFAULT_STREAM)
        await client.create_topic(DEFAULT_STREAM, "from-iggy", 2)
        await client.send_messages(
            DEFAULT_STREAM, "from-iggy", 1, [SendMessage(p) for p in PAYLOADS]
        )

    await iggy(gateway, send)
    rog = RogClient(*gateway.address("rog"))
    for payload in PAYLOADS:
        fetched = await rog.fetch("from-iggy", 1, "rog-group")
        assert isinstance(fetched, FetchOk) and fetched.data == payload
        assert isinstance(await rog.ack("from-iggy", 1, "rog-group"), Ok)


async def test_rog_publishes_iggy_polls(gateway: Running) -> None:
    rog = RogClient(*gateway.address("rog"))
    assert isinstance(await rog.create_log("from-rog", 1), Ok)
    for payload in PAYLOADS:
        assert isinstance(await rog.publish("from-rog", 0, payload), Ok)

    async def poll(client: IggyClient) -> list[tuple[int, bytes, int]]:
        messages = await client.poll_messages(
            DEFAULT_STREAM, "from-rog", consumer=IggyConsumer.Single("iggy-reader"),
            polling_strategy=PollingStrategy.First(), count=100, auto_commit=True,
            partition_id=0,
        )  # fmt: skip
        return [(m.offset(), m.payload(), m.timestamp()) for m in messages]

    got = await iggy(gateway, poll)
    assert [(o, p) for o, p, _ in got] == list(enumerate(PAYLOADS))
    assert all(ts > 1_600_000_000_000_000 for *_, ts in got)  # Rog's arrival time, in µs


async def test_iggy_sends_kafka_consumes_headers_and_timestamps(gateway: Running) -> None:
    sent_at: list[int] = []
    ids: list[int] = []

    async def send(client: IggyClient) -> None:
        await client.create_stream(DEFAULT_STREAM)
        await client.create_topic(DEFAULT_STREAM, "iggy-kafka", 1)
        messages = [SendMessage(p, user_headers={"n": str(i)}) for i, p in enumerate(PAYLOADS)]
        await client.send_messages(DEFAULT_STREAM, "iggy-kafka", 0, messages)
        polled = await client.poll_messages(
            DEFAULT_STREAM, "iggy-kafka", consumer=IggyConsumer.Single(1),
            polling_strategy=PollingStrategy.First(), count=len(PAYLOADS), auto_commit=False,
            partition_id=0,
        )  # fmt: skip
        sent_at.append(polled[0].origin_timestamp())
        ids.extend(m.id() for m in polled)

    await iggy(gateway, send)
    servers = kafka_servers(gateway)

    def consume() -> list[tuple[bytes | None, list[tuple[str, bytes]], int]]:
        got: list[tuple[bytes | None, list[tuple[str, bytes]], int]] = []
        c = Consumer({"bootstrap.servers": servers, "group.id": "from-iggy",
                      "auto.offset.reset": "earliest"})  # fmt: skip
        c.subscribe(["iggy-kafka"])
        try:
            while len(got) < len(PAYLOADS):
                msg = c.poll(10)
                assert msg is not None and msg.error() is None
                raw: Any = msg.headers() or []  # confluent's stubs type it loosely
                headers = [(str(k), bytes(v or b"")) for k, v in raw]
                got.append((msg.value(), headers, msg.timestamp()[1]))
        finally:
            c.close()
        return got

    got = await in_thread(consume)
    assert [v for v, _, _ in got] == PAYLOADS
    # The ids the gateway gave the messages (Iggy's server assigns them) travel as a header.
    assert len(ids) == len(PAYLOADS) and all(ids)
    assert [h for _, h, _ in got] == [
        [("n", str(i).encode()), ("streamgate.id", ids[i].to_bytes(16, "big"))]
        for i in range(len(PAYLOADS))
    ]
    assert got[0][2] == sent_at[0] // 1000  # Iggy's origin µs is Kafka's CreateTime ms


async def test_kafka_produces_iggy_polls_key_as_header(gateway: Running) -> None:
    servers = kafka_servers(gateway)

    def produce() -> None:
        p = Producer({"bootstrap.servers": servers, "compression.type": "zstd"})
        for i, payload in enumerate(PAYLOADS):
            p.produce("kafka-iggy", payload, key=b"key-%d" % i, headers=[("h", b"v%d" % i)])
        assert p.flush(20) == 0

    await in_thread(produce)

    async def poll(client: IggyClient) -> list[tuple[bytes, dict[str, bytes]]]:
        messages = await client.poll_messages(
            DEFAULT_STREAM, "kafka-iggy", consumer=IggyConsumer.Single("k"),
            polling_strategy=PollingStrategy.Offset(0), count=1000, auto_commit=False,
            partition_id=0,
        )  # fmt: skip
        return [
            (m.payload(), {k.value: _header_bytes(v) for k, v in (m.user_headers() or {}).items()})
            for m in messages
        ]

    got = await iggy(gateway, poll)
    assert [p for p, _ in got] == PAYLOADS
    for i, (_, headers) in enumerate(got):
        assert headers == {"h": b"v%d" % i, "streamgate.key": b"key-%d" % i}


def _header_bytes(value: object) -> bytes:
    """apache-iggy hands header values back typed; a Kafka header is a Raw one."""
    assert isinstance(value, HeaderValue.Raw), value
    return value.value
