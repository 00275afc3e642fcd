"""A real RabbitMQ for the backend tests: the ``rabbitmq`` fixture
(tests/helpers/rabbitmq_server.py) and rstream 1.1.1 as the client that proves what it holds.

rstream is asyncio-only: a scenario is one ``asyncio.run`` in a worker thread while the test (and
the server's processes) stay in trio. Every scenario is bounded on both sides: asyncio cancels it
first, so its clients still close, then the trio bound fails the test if the thread hangs.
"""

from __future__ import annotations

from typing import Any

from rstream import RawMessage

from tests.helpers.rabbitmq_server import PASSWORD, USER, RabbitMQServer
from tests.helpers.rabbitmq_server import rabbitmq as rabbitmq
from tests.helpers.rstream_direct import in_asyncio as in_asyncio
from tests.helpers.rstream_direct import publish_direct, read_direct


def rstream_kwargs(server: RabbitMQServer) -> dict[str, Any]:
    host, port = server.stream_address
    return {"host": host, "port": port, "username": USER, "password": PASSWORD}


async def publish(
    server: RabbitMQServer, stream: str, bodies: list[bytes], *, create: bool = False
) -> None:
    """Publish ``bodies`` to ``stream`` and wait until the server confirmed every one."""
    await publish_direct(rstream_kwargs(server), stream, [RawMessage(b) for b in bodies],
                         create=create)  # fmt: skip


async def consume(server: RabbitMQServer, stream: str, count: int) -> list[tuple[int, bytes]]:
    """The first ``count`` messages of ``stream`` from its start: (offset, body)."""
    got = await read_direct(rstream_kwargs(server), stream, count)
    return [(offset, body) for offset, body, _ in got]
