"""Fixtures shared by the whole suite: an in-process gateway on ephemeral ports."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio
from prometheus_client import CollectorRegistry

from gateway.app import Running, serve_gateway
from gateway.config import Config, load


def gateway_config(data_dir: Path, **overrides: object) -> Config:
    """Loopback only, every port ephemeral, the embedded store in ``data_dir``."""
    values: dict[str, object] = {
        "host": "127.0.0.1",
        "backend.url": f"embedded:{data_dir}",
        "backend.fsync": "never",
        "listeners.rog.port": 0,
        "listeners.kafka.port": 0,
        "listeners.iggy.port": 0,
        "listeners.rabbitmq_stream.port": 0,
        "groups.initial_rebalance_delay_ms": 200,
        "admin.port": 0,
        "limits.drain_timeout_s": 2.0,
    }
    values.update(overrides)
    return load(overrides=values)


@pytest.fixture
async def gateway(tmp_path: Path, nursery: trio.Nursery) -> AsyncIterator[Running]:
    config = gateway_config(tmp_path / "data")
    with trio.fail_after(10):
        running: Running = await nursery.start(
            lambda task_status: serve_gateway(
                config, registry=CollectorRegistry(), task_status=task_status
            )
        )
    yield running
