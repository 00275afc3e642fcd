"""A second streamgate (embedded store) serving Iggy, as the Iggy server of the Iggy backend's
tests: no Iggy server is installable here, and streamgate's Iggy listener speaks the same
current (VSR) framing as a real one (see ../shared/protocols/iggy.md)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio
from prometheus_client import CollectorRegistry

from gateway.app import Running, serve_gateway
from gateway.backends.iggy.backend import IggyBackend
from gateway.backends.iggy.pool import IggyTarget
from gateway.config import Config
from tests.conftest import gateway_config

# Short enough that a test sees an outage and a recovery within a second or two.
FAST_HEALTH: dict[str, Any] = {"ping_interval_s": 0.2, "connect_timeout_s": 2.0}


@asynccontextmanager
async def upstream_gateway(data_dir: Path, *, iggy_port: int = 0) -> AsyncIterator[Running]:
    """The upstream: only its Iggy listener (on ``iggy_port``, 0 = any), embedded store in
    ``data_dir``. Leaving the block stops it at once, like a killed server."""
    config = gateway_config(
        data_dir,
        **{
            "listeners.iggy.port": iggy_port,
            "listeners.kafka.enabled": False,
            "listeners.rog.enabled": False,
            "listeners.rabbitmq_stream.enabled": False,
            "admin.enabled": False,
        },
    )
    async with serving(config) as running:
        yield running


@asynccontextmanager
async def serving(config: Config) -> AsyncIterator[Running]:
    """A gateway until the block ends (then stopped at once). Not under a trio deadline: the
    store opens in a worker thread, during which an autojump clock would jump to it;
    pytest-timeout bounds a start that hangs."""
    async with trio.open_nursery() as nursery:
        running: Running = await nursery.start(
            lambda task_status: serve_gateway(
                config, registry=CollectorRegistry(), task_status=task_status
            )
        )
        try:
            yield running
        finally:
            nursery.cancel_scope.cancel()


@asynccontextmanager
async def started_backend(address: tuple[str, int], **options: Any) -> AsyncIterator[IggyBackend]:
    """An ``IggyBackend`` on ``address``, logged in as the upstream's root (iggy/iggy)."""
    host, port = address
    backend = IggyBackend(IggyTarget(host=host, port=port), **options)
    async with trio.open_nursery() as nursery:
        await nursery.start(backend.run)  # bounded by the backend's connect timeout
        try:
            yield backend
        finally:
            nursery.cancel_scope.cancel()


@asynccontextmanager
async def chained_iggy_backend(data_dir: Path, **options: Any) -> AsyncIterator[IggyBackend]:
    async with (
        upstream_gateway(data_dir) as upstream,
        started_backend(upstream.address("iggy"), **options) as backend,
    ):
        yield backend


@asynccontextmanager
async def front_gateway(data_dir: Path, upstream: tuple[str, int]) -> AsyncIterator[Running]:
    """A whole gateway (every listener) whose backend is ``iggy://iggy:iggy@<upstream>``: the
    URL path of ``streamgate run --backend iggy://...``."""
    host, port = upstream
    config = gateway_config(data_dir, **{"backend.url": f"iggy://iggy:iggy@{host}:{port}"})
    async with serving(config) as running:
        yield running
