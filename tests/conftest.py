"""Fixtures shared by the whole suite: an in-process gateway on ephemeral ports."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import settings
from prometheus_client import CollectorRegistry
from xdist.scheduler import LoadFileScheduling

from gateway.app import Running, serve_gateway
from gateway.config import Config, load

# Hypothesis profiles, chosen by HYPOTHESIS_PROFILE (the Makefile sets it). `ci` (`make test`) is
# Hypothesis's own, which it already loads where CI=true: today's example counts, derandomized, no
# deadline, no example database. `dev` (`make check`) caps the tests that do not set their own
# max_examples; those that do (the FAST/FUZZ settings of tests/protocols) keep their counts.
# Unset, a plain `pytest` keeps Hypothesis's choice (`default`, or `ci` under CI).
settings.register_profile("dev", settings.get_profile("default"), max_examples=20)
if profile := os.environ.get("HYPOTHESIS_PROFILE"):
    settings.load_profile(profile)


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


async def start_gateway(nursery: trio.Nursery, config: Config) -> Running:
    """``serve_gateway(config)`` in ``nursery``, once everything is bound (10 s at most)."""
    with trio.fail_after(10):
        running: Running = await nursery.start(
            lambda task_status: serve_gateway(
                config, registry=CollectorRegistry(), task_status=task_status
            )
        )
    return running


@pytest.fixture
async def gateway(tmp_path: Path, nursery: trio.Nursery) -> AsyncIterator[Running]:
    yield await start_gateway(nursery, gateway_config(tmp_path / "data"))


class _FilesAndThePipeline(LoadFileScheduling):  # type: ignore[misc]
    """``--dist loadfile`` (what `make test` runs, on two pytest-xdist workers): a test file
    is a unit, except the pipeline's tests, which are all one: they run one after another on one
    worker, which starts one SparkSession for them (tests/pipeline/conftest.py). Scattered among
    other files over both workers, a worker's session was found stopped under later pipeline
    tests."""

    def _split_scope(self, nodeid: str) -> str:
        path = nodeid.split("::", 1)[0]
        return "tests/pipeline" if path.startswith("tests/pipeline/") else path


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> LoadFileScheduling | None:
    if config.getvalue("dist") != "loadfile":
        return None  # what was asked for
    return _FilesAndThePipeline(config, log)
