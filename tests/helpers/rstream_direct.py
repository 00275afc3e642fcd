"""rstream 1.1.1 straight against a real RabbitMQ: the client that proves what the broker holds.

rstream is asyncio-only: a scenario is one ``asyncio.run`` in a worker thread while the test (and
the server's processes) stay in trio. Every scenario is bounded on both sides: asyncio cancels it
first, so its clients still close, then the trio bound fails the test if the thread hangs.
``where`` is rstream's connection keywords (host, port, vhost, username, password).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import trio
from rstream import (
    ConfirmationStatus,
    Consumer,
    ConsumerOffsetSpecification,
    MessageContext,
    OffsetType,
    Producer,
)

__all__ = [
    "WAIT_S",
    "Read",
    "in_asyncio",
    "publish_direct",
    "read_direct",
    "read_until",
    "stream_exists",
]

T = TypeVar("T")

WAIT_S = 15.0  # for confirms or deliveries, asyncio side

Read = tuple[int, Any, int]  # offset, entry (decoded by the decoder, else bytes), chunk time ms


async def in_asyncio(scenario: Callable[[], Awaitable[T]], *, limit_s: float = 30) -> T:
    """``scenario()`` in a fresh asyncio loop in a worker thread, bounded."""

    async def main() -> T:
        return await asyncio.wait_for(scenario(), limit_s - 5)

    with trio.fail_after(limit_s):
        return await trio.to_thread.run_sync(lambda: asyncio.run(main()), abandon_on_cancel=True)


async def stream_exists(where: dict[str, Any], stream: str) -> bool:
    """Whether the broker has ``stream`` (a Metadata request of rstream's)."""
    async with Consumer(**where) as consumer:
        return await consumer.stream_exists(stream)


async def publish_direct(
    where: dict[str, Any], stream: str, messages: list[Any], *, create: bool = True
) -> None:
    """Publish ``messages`` to ``stream`` and wait until the server confirmed every one."""
    confirmed: list[ConfirmationStatus] = []
    done = asyncio.Event()

    def on_confirm(status: ConfirmationStatus) -> None:
        confirmed.append(status)
        if len(confirmed) == len(messages):
            done.set()

    async with Producer(**where) as producer:
        if create:
            await producer.create_stream(stream, exists_ok=True)
        await producer.send_batch(stream, messages, on_publish_confirm=on_confirm)
        await asyncio.wait_for(done.wait(), WAIT_S)
    assert all(s.is_confirmed for s in confirmed), confirmed


async def read_until(
    where: dict[str, Any],
    stream: str,
    enough: Callable[[list[Read]], bool],
    *,
    decoder: Any = None,
    strict: bool = True,
) -> list[Read]:
    """Messages of ``stream`` from its first until ``enough(got)``, at most ``WAIT_S`` (then
    what came, unless ``strict``)."""
    got: list[Read] = []
    done = asyncio.Event()

    def on_message(body: Any, context: MessageContext) -> None:
        got.append((context.offset, body, context.timestamp))
        if enough(got):
            done.set()

    async with Consumer(**where) as consumer:
        await consumer.subscribe(
            stream, on_message, decoder=decoder,
            offset_specification=ConsumerOffsetSpecification(OffsetType.FIRST, None),
        )  # fmt: skip
        if strict:
            await asyncio.wait_for(done.wait(), WAIT_S)
        else:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), WAIT_S)
    return got


async def read_direct(
    where: dict[str, Any], stream: str, count: int, *, decoder: Any = None
) -> list[Read]:
    """The first ``count`` messages of ``stream`` (no decoder: each entry's raw bytes)."""
    got = await read_until(where, stream, lambda got: len(got) >= count, decoder=decoder)
    return got[:count]
