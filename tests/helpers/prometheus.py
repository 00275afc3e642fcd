"""Debian's Prometheus and promtool for the monitoring tests: a private server on a free loopback
port scraping given targets every second, its HTTP API, stopped by its pid.

``/usr/bin/prometheus`` 2.42 batches target discovery for 5 s, so the first scrape comes about
6 s after the start (../shared/notes/observability.md §2): ``started`` waits for it. Where the
binaries are missing the tests skip with the reason, except under CI=true, where that is a
failure (``make test`` installs the ``prometheus`` package).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.helpers.processes import end_child, free_ports

FIRST_SCRAPE_WITHIN_S = 30.0
JOB = "streamgate"


def binary(name: str) -> str:
    """The path of ``prometheus`` or ``promtool``; a skip saying so where it is missing, a
    failure under CI."""
    found = shutil.which(name) or (
        f"/usr/bin/{name}" if os.path.exists(f"/usr/bin/{name}") else None
    )
    if found is None:
        why = f"{name} is not installed (Debian package prometheus; `make test` installs it)"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(why)
        pytest.skip(why)
    return found


class QueryFailed(AssertionError):
    pass


@dataclass
class Prometheus:
    url: str
    process: trio.Process
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-3000:]

    def api(self, path: str, **params: str) -> Any:
        """GET /api/v1/<path>: its ``data``, or ``QueryFailed`` with Prometheus's own error
        (``bad_data`` for a query that does not parse)."""
        url = f"{self.url}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                body = json.load(response)
        except urllib.error.HTTPError as exc:
            body = json.loads(exc.read() or b"{}")
        if body.get("status") != "success":
            raise QueryFailed(f"{body.get('errorType')}: {body.get('error')} (GET {url})")
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's samples (``[{"metric": {...}, "value": [t, "v"]}, ...]``)."""
        data = self.api("query", query=expr)
        if data["resultType"] != "vector":
            raise QueryFailed(f"{expr}: a {data['resultType']}, not an instant vector")
        result: list[dict[str, Any]] = data["result"]
        return result

    async def scrapes(self, count: int, within_s: float = 20.0) -> None:
        """Wait until Prometheus has scraped every target ``count`` more times."""
        seen = self._last_scrape()
        done = 0
        give_up = time.monotonic() + within_s
        while done < count:
            assert time.monotonic() < give_up, f"no new scrape within {within_s} s\n{self.log()}"
            await trio.sleep(0.2)
            now = self._last_scrape()
            if now != seen:
                seen, done = now, done + 1

    def _last_scrape(self) -> float:
        found = self.query(f'timestamp(up{{job="{JOB}"}})')
        return max((float(s["value"][1]) for s in found), default=0.0)


@asynccontextmanager
async def started(
    directory: Path, targets: Sequence[str], rule_files: Sequence[Path] = ()
) -> AsyncIterator[Prometheus]:
    """Prometheus on a free loopback port scraping ``targets`` (host:port, ``/metrics``) every
    second as job "streamgate", evaluating ``rule_files`` every second; yielded once the first
    scrape of every target is in."""
    prometheus = binary("prometheus")
    config = directory / "prometheus.yml"
    directory.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240 - before anything runs
    # JSON is YAML: no YAML library needed to write the configuration.
    config.write_text(
        json.dumps(
            {
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                "rule_files": [str(p.resolve()) for p in rule_files],
                "scrape_configs": [
                    {"job_name": JOB, "static_configs": [{"targets": list(targets)}]}
                ],
            }
        )
    )
    (port,) = free_ports(1)
    log_path = directory / "prometheus.log"
    with log_path.open("ab") as out:
        process = await trio.lowlevel.open_process(
            [
                prometheus, f"--config.file={config}",
                f"--storage.tsdb.path={directory / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    server = Prometheus(f"http://127.0.0.1:{port}", process, log_path)
    try:
        give_up = time.monotonic() + FIRST_SCRAPE_WITHIN_S
        while True:
            assert process.returncode is None, f"prometheus exited:\n{server.log()}"
            assert time.monotonic() < give_up, (
                f"no scrape within {FIRST_SCRAPE_WITHIN_S} s\n{server.log()}"
            )
            try:
                up = server.query(f'up{{job="{JOB}"}} == 1')
            except (OSError, QueryFailed):
                up = []
            if len(up) == len(targets):
                break
            await trio.sleep(0.2)
        yield server
    finally:
        with trio.CancelScope(shield=True):
            await end_child(process, grace_s=0, term_s=10)


def promtool(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    """``promtool args...``, its output as text (bounded: promtool runs offline in well under a
    second)."""
    return subprocess.run(
        [binary("promtool"), *args],
        input=None if stdin is None else stdin.decode(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


__all__ = ["JOB", "Prometheus", "QueryFailed", "binary", "promtool", "started"]
