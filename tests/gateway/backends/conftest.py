"""The ``backend`` fixture: every backend implementation, started, one test run each.

Later backends (rabbitmq_stream, kafka, iggy) add a factory to ``FACTORIES``; the conformance
suite then runs against them unchanged.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import pytest

from gateway.backends.base import Backend
from gateway.backends.embedded import open_embedded

BackendFactory = Callable[[Path], AbstractAsyncContextManager[Backend]]


def _embedded(tmp_path: Path) -> AbstractAsyncContextManager[Backend]:
    return open_embedded(tmp_path / "embedded", fsync="never")


FACTORIES: dict[str, BackendFactory] = {"embedded": _embedded}


@pytest.fixture(params=sorted(FACTORIES))
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    async with FACTORIES[request.param](tmp_path) as started:
        yield started
