"""One topic, three client eras: what apache-iggy 0.8.0 (era B) or iggy-py 0.4.0 (era A) sends,
apache-iggy 0.9.0 (era C, the main venv) polls, and the reverse, payloads, ids and headers
intact and partitions where each era numbers them (iggy.md §7)."""

from __future__ import annotations

from typing import Any

from apache_iggy import HeaderValue as IggyHeaderValue
from apache_iggy import IggyClient, PollingStrategy, ReceiveMessage, SendMessage

from gateway.app import Running
from protocols.iggy import (
    Era,
    HeaderKind,
    PartitionId,
    SendMessages,
)
from protocols.iggy import Message as WireMessage
from tests.gateway.listeners.iggy.conftest import Clients, poll, run_iggy
from tests.helpers.iggy_wire import IggyWire

from .conftest import BINARY, HEADERS, OlderClient, hexes, polled


async def create(gateway: Running, stream: str, topic: str, partitions: int) -> None:
    async def scenario(clients: Clients) -> None:
        client = await clients.connect()
        await client.create_stream(stream)
        await client.create_topic(stream, topic, partitions)

    await run_iggy(gateway, scenario)


async def poll_09(
    gateway: Running, stream: str, topic: str, partition: int
) -> list[tuple[int, bytes, int, dict[str, Any]]]:
    """(offset, payload, id, headers) of a whole partition, polled by apache-iggy 0.9.0."""

    async def scenario(clients: Clients) -> list[tuple[int, bytes, int, dict[str, Any]]]:
        client: IggyClient = await clients.connect()
        got: list[ReceiveMessage] = await poll(
            client, stream, topic, PollingStrategy.First(), partition=partition
        )
        return [(m.offset(), m.payload(), m.id(), _headers(m)) for m in got]

    return await run_iggy(gateway, scenario)


def _headers(m: ReceiveMessage) -> dict[str, Any]:
    return {k.value: (type(v).__name__, v.value) for k, v in (m.user_headers() or {}).items()}


async def test_08_sends_09_polls(gateway: Running, iggy08: OlderClient) -> None:
    await create(gateway, "x-08-09", "t", 3)
    sent = await iggy08.run(
        gateway, "send", stream="x-08-09", topic="t", partition=2, payloads=hexes(BINARY)
    )
    assert sent == {"error": None}
    got = await poll_09(gateway, "x-08-09", "t", 2)
    assert [(o, p) for o, p, _, _ in got] == list(enumerate(BINARY))
    # The ids the server gave (0.8.0 sends none) are the ones each era reads.
    read = await iggy08.run(
        gateway, "read", stream="x-08-09", topic="t", partition=2, strategy="first"
    )
    assert polled(read, "id") == [i for _, _, i, _ in got]
    assert all(i for _, _, i, _ in got)


async def test_09_sends_older_eras_poll(
    gateway: Running, iggy08: OlderClient, iggypy04: OlderClient
) -> None:
    stream, topic = "x-09-old", "t"
    ids = [(1 << 127) + 5, 42, (1 << 64) + 1]
    expected = list(zip(BINARY[:3], ids, strict=True))
    headers = {
        "trace": IggyHeaderValue.String("abc-123"),
        "attempt": IggyHeaderValue.UnsignedInt32(3),
        "blob": IggyHeaderValue.Raw(b"\x00\xff\x10"),
    }

    async def send(clients: Clients) -> None:
        client = await clients.connect()
        await client.create_stream(stream)
        await client.create_topic(stream, topic, 2)
        await client.send_messages(
            stream,
            topic,
            1,
            [SendMessage(p, user_headers=headers, id=i) for p, i in expected],
        )

    await run_iggy(gateway, send)
    # Era B: partition 1, ids as the sender chose them.
    b = await iggy08.run(gateway, "read", stream=stream, topic=topic, partition=1, strategy="first")
    assert list(zip(polled(b), polled(b, "id"), strict=True)) == expected
    assert polled(b, "partition_id") == [1, 1, 1]
    # Era A: the same partition is its partition 2 (1-based).
    a = await iggypy04.run(
        gateway, "read", stream=stream, topic=topic, partition=2, strategy="first"
    )
    assert list(zip(polled(a), polled(a, "id"), strict=True)) == expected
    # Era-B frames carry the typed headers the current client sent.
    wire = await IggyWire.logged_in(gateway, Era.B)
    polled_b = await wire.poll(stream, topic, 1)
    await wire.aclose()
    assert [(m.payload, m.id) for m in polled_b.messages] == expected
    for message in polled_b.messages:
        typed = {h.key.value.decode(): (h.value.kind, h.value.value) for h in message.headers}
        assert typed == {
            "trace": (HeaderKind.STRING, b"abc-123"),
            "attempt": (HeaderKind.UINT32, (3).to_bytes(4, "little")),
            "blob": (HeaderKind.RAW, b"\x00\xff\x10"),
        }


async def test_era_b_headers_and_ids_reach_09(gateway: Running) -> None:
    await create(gateway, "x-b-09", "t", 1)
    wire = await IggyWire.logged_in(gateway, Era.B)
    messages = tuple(
        WireMessage(id=1000 + i, payload=p, headers=HEADERS) for i, p in enumerate(BINARY)
    )
    await wire.ok(
        SendMessages(
            stream_id="x-b-09", topic_id="t", partitioning=PartitionId(id=0), messages=messages
        )
    )
    await wire.aclose()
    got = await poll_09(gateway, "x-b-09", "t", 0)
    assert [(o, p, i) for o, p, i, _ in got] == [(n, p, 1000 + n) for n, p in enumerate(BINARY)]
    for *_, headers in got:
        assert headers == {
            "trace": ("String", "abc-123"),
            "attempt": ("UnsignedInt32", 3),
            "blob": ("Raw", b"\x00\xff\x10"),
        }


async def test_iggy_py_sends_09_polls(gateway: Running, iggypy04: OlderClient) -> None:
    await create(gateway, "x-a-09", "t", 2)
    texts = ["first ✓", "second", "third"]
    sent = await iggypy04.run(
        gateway, "send", stream="x-a-09", topic="t", partition=2, payloads=texts
    )
    assert sent == {"error": None}
    assert await poll_09(gateway, "x-a-09", "t", 0) == []
    got = await poll_09(gateway, "x-a-09", "t", 1)  # its partition 2 is the second one
    assert [(o, p) for o, p, _, _ in got] == [(n, t.encode()) for n, t in enumerate(texts)]
    assert all(i for _, _, i, _ in got)
