"""Helpers for the RabbitMQ Stream client tests (rstream 1.1.1, rbfly): scenarios in a worker
thread, the gateway in the test's trio loop.

Both clients are asyncio-only, so each scenario is one ``asyncio.run`` in a worker thread while the
gateway (the ``gateway`` fixture of tests/conftest.py) serves in trio. Every scenario is bounded on
both sides: asyncio cancels it first, so its clients still close, then the trio bound fails the
test if the thread does not come back.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import trio

from gateway.app import Running

T = TypeVar("T")

USER, PASSWORD = "guest", "guest"  # the listener's default user


async def in_thread(fn: Callable[[], T], *, limit_s: float = 30) -> T:
    with trio.fail_after(limit_s):
        return await trio.to_thread.run_sync(fn, abandon_on_cancel=True)


def address(running: Running) -> tuple[str, int]:
    return running.address("rabbitmq_stream")


async def run_client(
    running: Running,
    scenario: Callable[[str, int], Awaitable[T]],
    *,
    limit_s: float = 30,
) -> T:
    """Run ``scenario(host, port)`` in a fresh asyncio loop in a worker thread, bounded."""
    host, port = address(running)

    async def main() -> T:
        return await asyncio.wait_for(scenario(host, port), limit_s - 5)

    return await in_thread(lambda: asyncio.run(main()), limit_s=limit_s)


async def eventually(check: Callable[[], bool], *, limit_s: float = 10) -> None:
    """Wait (asyncio side) until ``check()`` holds, failing after ``limit_s``."""
    deadline = time.monotonic() + limit_s
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)


def rstream_kwargs(port: int, host: str = "127.0.0.1") -> dict[str, Any]:
    return {"host": host, "port": port, "username": USER, "password": PASSWORD}
