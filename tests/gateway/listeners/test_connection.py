"""The generic connection pump: limits, isolation of bad connections, drain on shutdown."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from gateway.app import Running
from protocols.rog import Ok
from tests.conftest import gateway_config, start_gateway
from tests.helpers.rog_client import RogClient
from tests.helpers.waiting import eventually


async def start(nursery: trio.Nursery, tmp_path: Path, **overrides: object) -> Running:
    config = gateway_config(tmp_path / "data", **overrides)
    running = await start_gateway(nursery, config)
    return running


def active(gw: Running) -> float:
    assert gw.metrics is not None
    return float(gw.metrics.connections_active.labels("rog")._value.get())


def errors(gw: Running, reason: str) -> float:
    assert gw.metrics is not None
    return float(gw.metrics.connection_errors.labels("rog", reason)._value.get())


async def test_max_connections_closes_the_extra_one(nursery: trio.Nursery, tmp_path: Path) -> None:
    gw = await start(nursery, tmp_path, **{"limits.max_connections": 2})
    host, port = gw.address("rog")
    with trio.fail_after(10):
        held = [await trio.open_tcp_stream(host, port) for _ in range(2)]
        # Let the server register both sessions before the third arrives.
        await eventually(lambda: active(gw) == 2)
        extra = await trio.open_tcp_stream(host, port)
        async with extra:
            with pytest.raises(trio.BrokenResourceError):
                # The server closed it at once: reading gives EOF or a reset.
                data = await extra.receive_some(10)
                if data == b"":
                    raise trio.BrokenResourceError
        assert errors(gw, "too_many_connections") == 1
        for s in held:
            await s.aclose()
        # Capacity is back once they are gone.
        await eventually(lambda: active(gw) == 0)
        assert await RogClient(host, port).create_log("after", 1) == Ok()


async def test_idle_connection_is_closed(nursery: trio.Nursery, tmp_path: Path) -> None:
    gw = await start(nursery, tmp_path, **{"limits.idle_timeout_s": 0.2})
    host, port = gw.address("rog")
    with trio.fail_after(5):
        stream = await trio.open_tcp_stream(host, port)
        async with stream:
            assert await stream.receive_some(10) == b""
    assert errors(gw, "idle_timeout") == 1


async def test_drain_refuses_new_work_and_finishes(tmp_path: Path) -> None:
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            gw = await start(nursery, tmp_path)
            host, port = gw.address("rog")
            idle = await trio.open_tcp_stream(host, port)  # a connection with nothing in flight
            assert await RogClient(host, port).create_log("d", 1) == Ok()
            gw.shutdown()
            assert gw.health is not None
            ok, why = await gw.health.ready(gw.metrics)  # type: ignore[arg-type]
            assert (ok, why) == (False, "draining")
            # The idle connection is closed by the drain, and serve_gateway returns by itself.
            assert await idle.receive_some(10) == b""
            await idle.aclose()
        with pytest.raises(OSError):
            await trio.open_tcp_stream(host, port)
