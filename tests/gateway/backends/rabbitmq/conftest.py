"""A real RabbitMQ for the backend tests: the ``rabbitmq`` fixture
(tests/helpers/rabbitmq_server.py) and rstream 1.1.1 as the client that proves what it holds.

rstream is asyncio-only: a scenario is one ``asyncio.run`` in a worker thread while the test (and
the server's processes) stay in trio. Every scenario is bounded on both sides: asyncio cancels it
first, so its clients still close, then the trio bound fails the test if the thread hangs.
"""

from __future__ import annotations

import asyncio
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
    RawMessage,
)

from tests.helpers.rabbitmq_server import PASSWORD, USER, RabbitMQServer
from tests.helpers.rabbitmq_server import rabbitmq as rabbitmq

T = TypeVar("T")

WAIT_S = 15.0  # for confirms or deliveries, asyncio side


async def in_asyncio(scenario: Callable[[], Awaitable[T]], *, limit_s: float = 30) -> T:
    """``scenario()`` in a fresh asyncio loop in a worker thread, bounded."""

    async def main() -> T:
        return await asyncio.wait_for(scenario(), limit_s - 5)

    with trio.fail_after(limit_s):
        return await trio.to_thread.run_sync(lambda: asyncio.run(main()), abandon_on_cancel=True)


def rstream_kwargs(server: RabbitMQServer) -> dict[str, Any]:
    host, port = server.stream_address
    return {"host": host, "port": port, "username": USER, "password": PASSWORD}


async def publish(
    server: RabbitMQServer, stream: str, bodies: list[bytes], *, create: bool = False
) -> None:
    """Publish ``bodies`` to ``stream`` and wait until the server confirmed every one."""
    confirmed: list[ConfirmationStatus] = []
    done = asyncio.Event()

    def on_confirm(status: ConfirmationStatus) -> None:
        confirmed.append(status)
        if len(confirmed) == len(bodies):
            done.set()

    async with Producer(**rstream_kwargs(server)) as producer:
        if create:
            await producer.create_stream(stream, exists_ok=True)
        await producer.send_batch(
            stream, [RawMessage(b) for b in bodies], on_publish_confirm=on_confirm
        )
        await asyncio.wait_for(done.wait(), WAIT_S)
    assert all(s.is_confirmed for s in confirmed), confirmed


async def consume(server: RabbitMQServer, stream: str, count: int) -> list[tuple[int, bytes]]:
    """The first ``count`` messages of ``stream`` from its start: (offset, body)."""
    got: list[tuple[int, bytes]] = []
    done = asyncio.Event()

    def on_message(body: bytes, context: MessageContext) -> None:
        got.append((context.offset, body))
        if len(got) >= count:
            done.set()

    async with Consumer(**rstream_kwargs(server)) as consumer:
        await consumer.subscribe(
            stream,
            on_message,  # no decoder: the raw body
            offset_specification=ConsumerOffsetSpecification(OffsetType.FIRST, None),
        )
        await asyncio.wait_for(done.wait(), WAIT_S)
    return got[:count]
