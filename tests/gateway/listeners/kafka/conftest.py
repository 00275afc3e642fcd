"""Helpers for the Kafka client tests: the bootstrap address, and blocking clients in threads.

The real Kafka clients are blocking (confluent-kafka, kafka-python, kcat) or asyncio (aiokafka),
so each test runs them in a worker thread while the gateway (the ``gateway`` fixture of
tests/conftest.py) serves in the test's trio loop.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import trio

from gateway.app import Running

T = TypeVar("T")


def bootstrap(running: Running) -> str:
    host, port = running.address("kafka")
    return f"{host}:{port}"


async def in_thread(fn: Callable[[], T], *, limit_s: float = 60) -> T:
    """Run a blocking client call in a thread, bounded in time (the thread is abandoned, not
    killed, on timeout; the test fails either way)."""
    with trio.fail_after(limit_s):
        return await trio.to_thread.run_sync(fn, abandon_on_cancel=True)
