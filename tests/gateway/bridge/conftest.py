"""The gateway of the bridge matrix, on each backend the issue names: embedded, and a real
RabbitMQ 3.10.8 (the session's shared node, a fresh virtual host per test)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import trio

from gateway.app import Running
from tests.conftest import gateway_config, start_gateway
from tests.gateway.backends.rabbitmq_stream.conftest import streamgate
from tests.helpers.rabbitmq_shared import shared_rabbitmq, stop_shared_rabbitmq

BACKENDS = ("embedded", "rabbitmq")


@pytest.fixture(scope="session", autouse=True)
def _shared_rabbitmq_stops() -> Iterator[None]:
    yield
    stop_shared_rabbitmq()  # by pid, if a test started it


@pytest.fixture(params=BACKENDS)
async def bridge_gateway(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Running]:
    if request.param == "rabbitmq":
        shared = await trio.to_thread.run_sync(shared_rabbitmq)
        vhost = await trio.to_thread.run_sync(shared.new_vhost)
        async with streamgate(tmp_path, shared.url(vhost)) as running:
            yield running
        return
    config = gateway_config(tmp_path / "data")
    async with trio.open_nursery() as nursery:
        running = await start_gateway(nursery, config)
        try:
            yield running
        finally:
            nursery.cancel_scope.cancel()
