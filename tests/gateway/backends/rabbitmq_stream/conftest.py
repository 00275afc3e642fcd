"""The RabbitMQ backend against a real RabbitMQ 3.10.8: the session's shared node with a fresh
virtual host per test (tests/helpers/rabbitmq_shared.py) unless a test kills its own node, and
streamgate in-process on that backend. rstream 1.1.1 reads and writes the broker directly
(tests/helpers/rstream_direct.py), as the proof of what it holds; every wait is bounded.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
import trio
from prometheus_client import CollectorRegistry

from gateway.app import Running, serve_gateway
from gateway.backends.rabbitmq_stream.backend import RabbitStreamBackend
from tests.conftest import gateway_config
from tests.helpers.rabbitmq_server import PASSWORD, USER
from tests.helpers.rabbitmq_shared import SharedRabbitMQ, shared_rabbitmq
from tests.helpers.rstream_direct import in_asyncio as in_asyncio
from tests.helpers.rstream_direct import publish_direct as publish_direct
from tests.helpers.rstream_direct import read_direct as read_direct

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Broker:
    """Where a test's data is on the real broker."""

    host: str
    port: int
    vhost: str

    @property
    def url(self) -> str:
        vhost = "%2F" if self.vhost == "/" else self.vhost
        return f"rabbitmq-stream://{USER}:{PASSWORD}@{self.host}:{self.port}/{vhost}"

    def rstream(self) -> dict[str, Any]:
        return {"host": self.host, "port": self.port, "vhost": self.vhost, "username": USER,
                "password": PASSWORD}  # fmt: skip


@pytest.fixture
async def broker() -> Broker:
    shared: SharedRabbitMQ = await trio.to_thread.run_sync(shared_rabbitmq)
    vhost = await trio.to_thread.run_sync(shared.new_vhost)
    host, port = shared.address
    return Broker(host, port, vhost)


async def in_thread(fn: Callable[[], T], *, limit_s: float = 40) -> T:
    with trio.fail_after(limit_s):
        return await trio.to_thread.run_sync(fn, abandon_on_cancel=True)


@asynccontextmanager
async def streamgate(tmp_path: Path, url: str) -> AsyncIterator[Running]:
    """streamgate in-process on the RabbitMQ backend at ``url``, every port ephemeral."""
    config = gateway_config(tmp_path / "data", **{"backend.url": url})
    async with trio.open_nursery() as nursery:
        with trio.fail_after(30):
            running: Running = await nursery.start(
                lambda task_status: serve_gateway(
                    config, registry=CollectorRegistry(), task_status=task_status
                )
            )
        assert isinstance(running.backend, RabbitStreamBackend)
        await running.backend.wait_ready()
        try:
            yield running
        finally:
            nursery.cancel_scope.cancel()


@pytest.fixture
async def gateway_on(broker: Broker, tmp_path: Path) -> AsyncIterator[Running]:
    async with streamgate(tmp_path, broker.url) as running:
        yield running
