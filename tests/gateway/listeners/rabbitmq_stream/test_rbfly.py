"""rbfly 0.10.0 (rabbitmq-stream.md §9.3) against the gateway: its single and batch publishers with
every body kind it encodes (bytes -> data, str -> amqp-value string, dict -> amqp-value map) and
application properties, read back exactly with their offsets; every offset specification it has;
``write_offset`` then ``Offset.reference`` from a new connection; deduplication by publisher name
across reconnects; and its heartbeat watchdog (§7) on an idle connection.

rbfly keeps one connection per client and opens it on demand; ``@connection`` closes it (Close)
when the decorated coroutine returns. Every scenario runs under ``run_client``'s bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import pytest
import rbfly.streams as rbs
import trio

from gateway.app import Running
from tests.conftest import gateway_config, start_gateway
from tests.helpers.connections import connection_errors

from .conftest import PASSWORD, USER, run_client

PROTOCOL = "rabbitmq_stream"
# rbfly's Offset.FIRST... are class attributes typed as instance fields (mypy refuses them).
FIRST = rbs.Offset(rbs.OffsetType.FIRST)
LAST = rbs.Offset(rbs.OffsetType.LAST)
NEXT = rbs.Offset(rbs.OffsetType.NEXT)


def client_of(host: str, port: int) -> rbs.StreamsClient:
    return rbs.streams_client(f"rabbitmq-stream://{USER}:{PASSWORD}@{host}:{port}/")


@dataclass(frozen=True, slots=True)
class Got:
    offset: int
    body: rbs.AMQPBody
    app_properties: dict[str, rbs.AMQPScalar]
    timestamp: float  # the chunk's, seconds


def subscription(
    client: rbs.StreamsClient, stream: str, offset: rbs.Offset, *, idle_s: float = 0
) -> AsyncGenerator[rbs.AMQPBody, None]:
    """``client.subscribe`` (an async generator, typed as an iterator), for ``aclosing``."""
    return cast(
        AsyncGenerator[rbs.AMQPBody, None],
        client.subscribe(stream, offset=offset, timeout=idle_s),
    )


async def read(
    client: rbs.StreamsClient, stream: str, offset: rbs.Offset, count: int, *, idle_s: float = 0
) -> list[Got]:
    """The first ``count`` messages a subscription from ``offset`` yields; with ``idle_s``, fewer
    when nothing more comes for that long (rbfly's own subscription timeout)."""
    got: list[Got] = []
    async with contextlib.aclosing(subscription(client, stream, offset, idle_s=idle_s)) as messages:
        try:
            async for body in messages:
                ctx = rbs.get_message_ctx()
                got.append(
                    Got(ctx.stream_offset, body, dict(ctx.app_properties), ctx.stream_timestamp)
                )
                if len(got) == count:
                    break
        except TimeoutError:
            assert idle_s > 0
    return got


def offsets(got: list[Got]) -> list[int]:
    return [g.offset for g in got]


# --- publishing and reading back ------------------------------------------------------------

PROPS: dict[str, rbs.AMQPScalar] = {"k": "v", "n": 7, "big": 1 << 40, "neg": -3, "f": 1.5,
                                    "yes": True, "raw": b"\x00\xff"}  # fmt: skip
SINGLE: list[rbs.AMQPBody] = [b"bytes \x00\xff", "text \u00e9", {"a": 1, "b": "x", "c": [1, 2]}]
BATCH: list[rbs.AMQPBody] = [b"batch-0", "batch-1", {"batch": 2}]


async def test_publish_every_body_kind_and_read_it_back_exactly(gateway: Running) -> None:
    async def scenario(host: str, port: int) -> list[Got]:
        @rbs.connection
        async def run(client: rbs.StreamsClient) -> list[Got]:
            await client.create_stream("rb-bodies")
            async with client.publisher("rb-bodies", name="rb-single") as pub:
                for body in SINGLE:
                    await pub.send(body)
                await pub.send(rbs.stream_message_ctx(b"with props", app_properties=PROPS))
            async with client.publisher(
                "rb-bodies", name="rb-batch", cls=rbs.PublisherBatchFast
            ) as batch:
                for body in BATCH:
                    batch.batch(body)
                batch.batch(rbs.stream_message_ctx("batched props", app_properties={"i": 3}))
                await batch.flush()
            return await read(client, "rb-bodies", FIRST, 8)

        return await run(client_of(host, port))

    before = time.time()
    got = await run_client(gateway, scenario)
    assert offsets(got) == list(range(8))
    assert [g.body for g in got] == [*SINGLE, b"with props", *BATCH, "batched props"]
    assert [g.app_properties for g in got] == [{}, {}, {}, PROPS, {}, {}, {}, {"i": 3}]
    assert all(before - 1 <= g.timestamp <= time.time() + 1 for g in got), got
    assert connection_errors(gateway, PROTOCOL, "protocol_error") == 0


async def test_create_stream_twice_is_fine(gateway: Running) -> None:
    """rbfly ignores 0x05 "stream exists" and always follows Create with Metadata (§9.3)."""

    async def scenario(host: str, port: int) -> list[Got]:
        @rbs.connection
        async def run(client: rbs.StreamsClient) -> list[Got]:
            await client.create_stream("rb-twice")
            await client.create_stream("rb-twice")
            async with client.publisher("rb-twice", name="rb-twice") as pub:
                await pub.send(b"once")
            return await read(client, "rb-twice", FIRST, 1)

        return await run(client_of(host, port))

    got = await run_client(gateway, scenario)
    assert [(g.offset, g.body) for g in got] == [(0, b"once")]


# --- offset specifications (§4, §6) ---------------------------------------------------------


async def wait_for_clock_past(ms: int) -> None:
    """Chunk timestamps are the gateway's clock in ms: let it move past ``ms`` (no event tells)."""
    while time.time() * 1000 <= ms:  # noqa: ASYNC110 - a clock, not an event
        await asyncio.sleep(0.001)


OFFSETS = {
    "first": (FIRST, list(range(10))),
    "offset 3": (rbs.Offset.offset(3), list(range(3, 10))),
    "offset 7": (rbs.Offset.offset(7), [7, 8, 9]),  # inside the batch: rbfly drops 5 and 6
    "last": (LAST, [5, 6, 7, 8, 9]),  # the whole last chunk
}


async def publish_ten(client: rbs.StreamsClient, stream: str) -> int:
    """Messages 0-4 one by one (a chunk each), 5-9 as one batch (one chunk); returns a time in ms
    after 0-4 were stored and before 5-9 were."""
    await client.create_stream(stream)
    async with client.publisher(stream, name="rb-o1") as pub:
        for i in range(5):
            await pub.send(b"m%d" % i)
    between_ms = int(time.time() * 1000) + 1
    await wait_for_clock_past(between_ms + 1)
    async with client.publisher(stream, name="rb-o2", cls=rbs.PublisherBatchFast) as batch:
        for i in range(5, 10):
            batch.batch(b"m%d" % i)
        await batch.flush()
    return between_ms


@pytest.mark.parametrize("kind", [*OFFSETS, "timestamp"])
async def test_offset_specification(gateway: Running, kind: str) -> None:
    """Delivery is chunk-granular; rbfly drops records below an ``Offset.offset`` itself (§6).
    A subscription that delivers fewer messages than expected ends after 2 s of silence."""

    async def scenario(host: str, port: int) -> list[Got]:
        @rbs.connection
        async def run(client: rbs.StreamsClient) -> list[Got]:
            between_ms = await publish_ten(client, "rb-offsets")
            # + 0.5 ms: rbfly sends int(seconds * 1000), which float error may round down.
            offset = (
                rbs.Offset.timestamp((between_ms + 0.5) / 1000)
                if kind == "timestamp"
                else OFFSETS[kind][0]
            )
            return await read(client, "rb-offsets", offset, 10, idle_s=2)

        return await run(client_of(host, port))

    got = await run_client(gateway, scenario)
    expected = [5, 6, 7, 8, 9] if kind == "timestamp" else OFFSETS[kind][1]
    assert [(g.offset, g.body) for g in got] == [(i, b"m%d" % i) for i in expected]


async def test_offset_next_delivers_only_what_comes_after(gateway: Running) -> None:
    async def scenario(host: str, port: int) -> list[Got]:
        @rbs.connection
        async def run(client: rbs.StreamsClient) -> list[Got]:
            await publish_ten(client, "rb-next")
            return await next_message(client, "rb-next")

        return await run(client_of(host, port))

    [after] = await run_client(gateway, scenario)
    assert after.offset >= 10 and after.body == b"after %d" % (after.offset - 10)


async def next_message(client: rbs.StreamsClient, stream: str) -> list[Got]:
    """Subscribe from NEXT and publish until something comes: the first thing delivered must be
    one of the messages published after the subscription, never an older one."""
    reader = asyncio.create_task(read(client, stream, NEXT, 1))
    async with client.publisher(stream, name="rb-next") as pub:
        for i in range(100):
            await pub.send(b"after %d" % i)
            done, _ = await asyncio.wait({reader}, timeout=0.1)
            if done:
                return reader.result()
    reader.cancel()
    raise AssertionError("a NEXT subscription never delivered")


async def test_write_offset_then_reference_resumes_in_a_new_connection(gateway: Running) -> None:
    async def scenario(host: str, port: int) -> tuple[list[Got], list[Got], list[Got]]:
        @rbs.connection
        async def produce_and_store(client: rbs.StreamsClient) -> list[Got]:
            await client.create_stream("rb-ref")
            async with client.publisher("rb-ref", name="rb-ref") as pub:
                for i in range(6):
                    await pub.send(b"r%d" % i)
            # Never stored: starts at 0 (QueryOffset answers 0x13, §9.3).
            fresh = await read(client, "rb-ref", rbs.Offset.reference("rb-reader"), 2)
            got: list[Got] = []
            async with contextlib.aclosing(subscription(client, "rb-ref", FIRST)) as messages:
                async for body in messages:
                    got.append(Got(rbs.get_message_ctx().stream_offset, body, {}, 0))
                    if len(got) == 3:
                        await client.write_offset("rb-ref", "rb-reader")  # offset 2
                        break
            return fresh + got

        @rbs.connection
        async def resume(client: rbs.StreamsClient) -> list[Got]:
            return await read(client, "rb-ref", rbs.Offset.reference("rb-reader"), 3)

        @rbs.connection
        async def store_explicit(client: rbs.StreamsClient) -> list[Got]:
            await client.get_protocol()  # write_offset never connects: it drops the offset
            await client.write_offset("rb-ref", "rb-other", 4)
            return []

        @rbs.connection
        async def resume_explicit(client: rbs.StreamsClient) -> list[Got]:
            return await read(client, "rb-ref", rbs.Offset.reference("rb-other"), 1)

        first = await produce_and_store(client_of(host, port))
        resumed = await resume(client_of(host, port))
        await store_explicit(client_of(host, port))
        return first, resumed, await resume_explicit(client_of(host, port))

    first, resumed, explicit = await run_client(gateway, scenario)
    assert offsets(first) == [0, 1, 0, 1, 2]
    assert [(g.offset, g.body) for g in resumed] == [(3, b"r3"), (4, b"r4"), (5, b"r5")]
    assert [(g.offset, g.body) for g in explicit] == [(5, b"r5")]


# --- deduplication (§5) ---------------------------------------------------------------------


async def test_named_publisher_deduplicates_across_reconnects(gateway: Running) -> None:
    """rbfly queries the publisher sequence when a publisher starts and numbers on from it; a
    publishing id at or below the stored one is confirmed but not stored."""

    async def scenario(host: str, port: int) -> tuple[list[int], list[Got]]:
        sequences: list[int] = []

        @rbs.connection
        async def first(client: rbs.StreamsClient) -> None:
            await client.create_stream("rb-dedup")
            async with client.publisher("rb-dedup", name="rb-dedup") as pub:
                sequences.append(pub.message_id)
                for i in range(3):
                    await pub.send(b"d%d" % i)  # publishing ids 1, 2, 3

        @rbs.connection
        async def second(client: rbs.StreamsClient) -> None:
            async with client.publisher("rb-dedup", name="rb-dedup") as pub:
                sequences.append(pub.message_id)  # 3 stored -> numbers on from 4
                await pub.send(rbs.stream_message_ctx(b"dup of 2", publish_id=2))
                await pub.send(rbs.stream_message_ctx(b"dup of 3", publish_id=3))
                await pub.send(rbs.stream_message_ctx(b"fresh", publish_id=4))
            async with client.publisher("rb-dedup", name="rb-other") as other:
                sequences.append(other.message_id)  # another name: its own sequence
                await other.send(b"other 1")

        @rbs.connection
        async def check(client: rbs.StreamsClient) -> list[Got]:
            return await read(client, "rb-dedup", FIRST, 5)

        await first(client_of(host, port))
        await second(client_of(host, port))
        return sequences, await check(client_of(host, port))

    sequences, got = await run_client(gateway, scenario)
    assert sequences == [1, 4, 1]
    assert [(g.offset, g.body) for g in got] == [
        (0, b"d0"), (1, b"d1"), (2, b"d2"), (3, b"fresh"), (4, b"other 1"),
    ]  # fmt: skip


# --- heartbeats (§7) ------------------------------------------------------------------------


@pytest.fixture
async def beating(tmp_path: Path, nursery: trio.Nursery) -> AsyncIterator[Running]:
    """A gateway proposing a 1 s heartbeat (rbfly takes what the server proposes)."""
    config = gateway_config(tmp_path / "data", **{"listeners.rabbitmq_stream.heartbeat": 1})
    running = await start_gateway(nursery, config)
    yield running


async def test_idle_rbfly_connection_stays_up_across_heartbeats(beating: Running) -> None:
    """rbfly aborts a connection when the server was silent for two intervals (§7). Its watchdog
    is first scheduled with the default 60 s, before Tune: it is restarted here with the tuned
    1 s, as it runs on any connection older than a minute."""

    async def scenario(host: str, port: int) -> tuple[int, bool, list[Got]]:
        @rbs.connection
        async def run(client: rbs.StreamsClient) -> tuple[int, bool, list[Got]]:
            await client.create_stream("rb-idle")
            protocol = await client.get_protocol()
            assert protocol._timestamp_handle is not None
            protocol._timestamp_handle.cancel()
            protocol.schedule_timestamp_callback()
            await asyncio.sleep(3.5)  # idle: only heartbeats on the wire
            same = (await client.get_protocol()) is protocol and protocol.connected
            async with client.publisher("rb-idle", name="rb-idle") as pub:
                await pub.send(b"still here")
            return protocol.heartbeat, same, await read(client, "rb-idle", FIRST, 1)

        return await run(client_of(host, port))

    heartbeat, same, got = await run_client(beating, scenario)
    assert heartbeat == 1
    assert same, "rbfly lost its connection while idle"
    assert [(g.offset, g.body) for g in got] == [(0, b"still here")]
    assert beating.metrics is not None
    accepted = beating.metrics.registry.get_sample_value(
        "streamgate_connections_total", {"protocol": PROTOCOL}
    )
    assert accepted == 1  # no reconnection
    assert connection_errors(beating, PROTOCOL, "idle_timeout") == 0
