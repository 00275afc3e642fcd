"""The suite's test ids are the same in every collection.

`make test` runs on pytest-xdist workers, and xdist refuses to start when two workers collect
different ids ("Different tests were collected between gw0 and gw1"). An id made of data that
changes with the clock (a gzip member's mtime) or with the hash seed (set order) passes most
runs and fails one. Two collections, a second and more apart and under different hash seeds,
must list the same ids.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def collect(seed: str) -> list[str]:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return [line for line in done.stdout.splitlines() if "::" in line]


def test_two_collections_list_the_same_ids() -> None:
    first = collect("1")
    time.sleep(1.1)  # a clock read at collection (gzip's mtime is in seconds) moves on
    second = collect("2")
    assert len(first) > 1000
    assert first == second, sorted(set(first) ^ set(second))[:10]
