"""What the rstream 1.1.1 tests share: an inbox that consumer callbacks fill (awaited by count,
never polled), producers and consumers against the gateway, rstream's own lower-level ``Client``
for the commands its high-level classes hide, rstream's super-stream hash, and a gateway on a
data directory of the test's choosing (restarts).

Every wait here is bounded; the scenarios themselves run under ``run_client``'s bound as well.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mmh3
import trio
from rstream import (
    AMQPMessage,
    ConfirmationStatus,
    ConsumerOffsetSpecification,
    EventContext,
    MessageContext,
    OffsetNotFound,
    OffsetSpecification,
    OffsetType,
    Producer,
    RawMessage,
)
from rstream.client import Addr, Client, ClientPool

from gateway.app import Running
from tests.conftest import gateway_config, start_gateway

from .conftest import PASSWORD, USER, rstream_kwargs

WAIT_S = 10.0  # for any one expected delivery or confirm


@dataclass(frozen=True, slots=True)
class Got:
    stream: str
    offset: int
    timestamp_ms: int  # the chunk's
    message: Any  # AMQPMessage with amqp_decoder, bytes without


class _Counted:
    """Something callbacks add to; ``_reached(check)`` returns once ``check()`` holds, tested
    after every addition (no polling)."""

    def __init__(self) -> None:
        self._waiters: list[tuple[Callable[[], bool], asyncio.Event]] = []

    def _added(self) -> None:
        for check, event in self._waiters:
            if check():
                event.set()

    async def _reached(self, check: Callable[[], bool], what: str, limit_s: float) -> None:
        if check():
            return
        waiter = (check, asyncio.Event())
        self._waiters.append(waiter)
        try:
            await asyncio.wait_for(waiter[1].wait(), limit_s)
        except TimeoutError:
            raise AssertionError(f"no {what} after {limit_s} s: {self!r}") from None
        finally:
            self._waiters.remove(waiter)


class Inbox(_Counted):
    """A consumer callback's record; ``until(n)`` returns once ``n`` messages came."""

    def __init__(self) -> None:
        super().__init__()
        self.items: list[Got] = []

    def __repr__(self) -> str:
        return f"Inbox({[(g.stream, g.offset) for g in self.items]})"

    async def __call__(self, message: Any, ctx: MessageContext) -> None:
        self.items.append(Got(ctx.stream, ctx.offset, ctx.timestamp, message))
        self._added()

    async def until(self, count: int, *, limit_s: float = WAIT_S) -> list[Got]:
        """Once ``count`` messages came."""
        await self._reached(lambda: len(self.items) >= count, f"{count} messages", limit_s)
        return list(self.items)

    async def until_offset(self, offset: int, *, limit_s: float = WAIT_S) -> list[Got]:
        """Once the message at ``offset`` (or a later one) came."""
        await self._reached(
            lambda: any(g.offset >= offset for g in self.items), f"offset {offset}", limit_s
        )
        return list(self.items)

    @property
    def offsets(self) -> list[int]:
        return [g.offset for g in self.items]

    @property
    def bodies(self) -> list[bytes]:
        return [body_of(g.message) for g in self.items]


def body_of(message: Any) -> bytes:
    if isinstance(message, AMQPMessage):
        body = message.body
        if isinstance(body, list):  # several data sections
            return b"".join(body)
        assert isinstance(body, bytes), body
        return body
    assert isinstance(message, bytes), message
    return message


def amqp(body: bytes, **kwargs: Any) -> AMQPMessage:
    return AMQPMessage(body=body, **kwargs)


class Confirms(_Counted):
    """An ``on_publish_confirm`` callback; ``until(n)`` returns once ``n`` statuses came."""

    def __init__(self) -> None:
        super().__init__()
        self.statuses: list[tuple[int, bool, int]] = []  # (publishing id, confirmed, code)

    def __repr__(self) -> str:
        return f"Confirms({self.statuses})"

    async def __call__(self, status: ConfirmationStatus) -> None:
        self.statuses.append((status.message_id, status.is_confirmed, status.response_code))
        self._added()

    async def until(self, count: int, *, limit_s: float = WAIT_S) -> list[tuple[int, bool, int]]:
        await self._reached(lambda: len(self.statuses) >= count, f"{count} confirms", limit_s)
        return sorted(self.statuses)


def bodies(prefix: str, n: int, start: int = 0) -> list[bytes]:
    return [f"{prefix}{i}".encode() for i in range(start, start + n)]


async def publish(port: int, stream: str, payloads: list[bytes], *, create: bool = False) -> None:
    """One Publish (= one chunk) per payload, each confirmed before the next."""
    async with Producer(**rstream_kwargs(port)) as producer:
        if create:
            await producer.create_stream(stream)
        for payload in payloads:
            await producer.send_wait(stream, RawMessage(payload))


def first() -> ConsumerOffsetSpecification:
    return ConsumerOffsetSpecification(OffsetType.FIRST, None)


def spec(kind: OffsetType, value: int | None = None) -> ConsumerOffsetSpecification:
    return ConsumerOffsetSpecification(kind, value)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


async def clock_past(ms: int) -> None:
    """Wait until the wall clock (the gateway's too: same machine) is past ``ms``; chunk
    timestamps have millisecond resolution and no event marks a clock tick."""
    while now_ms() <= ms:  # noqa: ASYNC110
        await asyncio.sleep(0.001)


def resume_from_stored(
    on_event: Callable[[bool, EventContext], None] | None = None,
    *,
    offsets_only: bool = False,
) -> Callable[[bool, EventContext], Awaitable[OffsetSpecification]]:
    """A single-active-consumer ``consumer_update_listener``: once active, continue after the
    offset stored under the consumer name, from the first message when none is (FIRST; with
    ``offsets_only`` OFFSET 0, and OFFSET 0 instead of NEXT when deactivated)."""

    async def listener(active: bool, ctx: EventContext) -> OffsetSpecification:
        if on_event is not None:
            on_event(active, ctx)
        if not active:
            return OffsetSpecification(OffsetType.OFFSET if offsets_only else OffsetType.NEXT, 0)
        try:
            stored = await ctx.consumer.query_offset(ctx.stream, ctx.reference)
        except OffsetNotFound:
            return OffsetSpecification(OffsetType.OFFSET if offsets_only else OffsetType.FIRST, 0)
        return OffsetSpecification(OffsetType.OFFSET, stored + 1)

    return listener


@asynccontextmanager
async def low_level(host: str, port: int, *, vhost: str = "/") -> AsyncIterator[Client]:
    """rstream's own ``Client`` (one connection, every command) for what Producer/Consumer
    do not expose: QueryPublisherSequence, Partitions, Route, the Metadata answer."""
    pool = ClientPool(
        host,
        port,
        vhost=vhost,
        username=USER,
        password=PASSWORD,
        frame_max=1 << 20,
        heartbeat=60,
        load_balancer_mode=False,
        max_retries=1,
    )
    client = await pool.new(connection_name="rstream-low-level", addr=Addr(host, port))
    try:
        yield client
    finally:
        await client.close()


async def key_of(message: AMQPMessage) -> str:
    """The routing extractor: the ``key`` application property of the message being sent."""
    return str(message.application_properties["key"])


def hash_partition(routing_key: str, partitions: int) -> int:
    """The partition rstream's HashRoutingMurmurStrategy picks: murmur3 x64 128-bit, seed
    104729, of the key's UTF-16 bytes (with BOM), little-endian, modulo the partition count."""
    digest = mmh3.hash_bytes(bytes(routing_key, "UTF-16"), 104729)
    return int.from_bytes(digest, "little", signed=False) % partitions


@asynccontextmanager
async def gateway_on(data_dir: Path, **overrides: object) -> AsyncIterator[Running]:
    """A whole gateway on ``data_dir`` (``tests/conftest.py``'s config) until the block ends."""
    config = gateway_config(data_dir, **overrides)
    async with trio.open_nursery() as nursery:
        running = await start_gateway(nursery, config)
        yield running
        nursery.cancel_scope.cancel()
