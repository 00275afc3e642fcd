"""A serving gateway has moved its start-up objects out of the collector's way and collects its
youngest generation less often (gateway.runtime_gc)."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

from gateway import runtime_gc

SERVE_AND_SAY = textwrap.dedent(
    """
    import gc, sys, trio
    from prometheus_client import CollectorRegistry
    from gateway.app import serve_gateway
    from tests.conftest import gateway_config

    async def main():
        before = (gc.get_threshold(), gc.get_freeze_count())
        async with trio.open_nursery() as nursery:
            with trio.fail_after(20):
                await nursery.start(lambda task_status: serve_gateway(
                    gateway_config(sys.argv[1]), registry=CollectorRegistry(),
                    task_status=task_status))
            print((before, (gc.get_threshold(), gc.get_freeze_count())), flush=True)
            nursery.cancel_scope.cancel()

    trio.run(main)
    """
)


def test_a_serving_gateway_has_settled_its_collector(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SERVE_AND_SAY, str(tmp_path / "data")],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    line = done.stdout.strip().splitlines()[-1]
    (threshold_before, frozen_before), (threshold_after, frozen_after) = ast.literal_eval(line)
    assert frozen_before == 0 and threshold_before != runtime_gc.THRESHOLDS
    assert threshold_after == runtime_gc.THRESHOLDS
    assert frozen_after > 10_000  # the modules, the configuration, the backend...


def test_settling_again_freezes_nothing_more() -> None:
    """A process that serves twice (tests do) freezes once."""
    code = (
        "import gc; from gateway import runtime_gc; runtime_gc.settle(); n = gc.get_freeze_count();"
        " keep = [[i] for i in range(50_000)]; runtime_gc.settle();"
        " print(n, gc.get_freeze_count())"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)  # fmt: skip
    first, second = map(int, done.stdout.split())
    assert first > 0
    assert second == first
