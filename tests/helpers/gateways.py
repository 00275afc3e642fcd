"""Real ``streamgate run`` processes in front of one backend, as sidecars or replicas are.

Each gateway is a child process on free ports (port 0, the addresses read back from its
``listening on`` lines), its output in a file (a pipe nobody reads would block it once full),
stopped by its pid: SIGTERM and a bounded wait, SIGKILL if need be; ``kill`` is the crash.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import trio

from tests.helpers.processes import end_child

READY_WITHIN_S = 20.0
STOP_WITHIN_S = 10.0
ENDPOINTS = ("rog", "kafka", "iggy", "rabbitmq_stream", "admin")


class GatewayDidNotStart(RuntimeError):
    pass


@dataclass
class Gateway:
    name: str
    process: trio.Process
    log_path: Path
    addresses: dict[str, str]

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def kafka(self) -> str:
        return self.addresses["kafka"]

    def port(self, endpoint: str) -> int:
        return int(self.addresses[endpoint].rsplit(":", 1)[1])

    async def kill(self) -> None:
        """SIGKILL by pid (a crash: nothing is drained or closed cleanly), then reap it."""
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGKILL)
        with trio.move_on_after(STOP_WITHIN_S):
            await self.process.wait()

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except OSError:
            return "(no log)"


def _listening(log_path: Path) -> dict[str, str]:
    seen: dict[str, str] = {}
    for line in log_path.read_text(errors="replace").splitlines():
        words = line.split()
        if len(words) >= 4 and words[1:3] == ["listening", "on"] and words[0] in ENDPOINTS:
            seen[words[0]] = words[3].removeprefix("http://")
    return seen


@asynccontextmanager
async def running_gateway(
    backend_url: str, directory: Path, name: str, *extra: str
) -> AsyncIterator[Gateway]:
    """``streamgate run --backend backend_url`` with every listener on a free port."""
    log_path = directory / f"gateway-{name}.log"
    argv = [
        sys.executable, "-m", "gateway.cli", "run", "--backend", backend_url,
        "--rog-port", "0", "--kafka-port", "0", "--iggy-port", "0",
        "--rabbitmq-stream-port", "0", "--admin-port", "0", "--log-format", "console",
        "--log-level", "info", *extra,
    ]  # fmt: skip
    with log_path.open("ab") as out:
        process = await trio.lowlevel.open_process(
            argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"}, cwd=directory,
        )  # fmt: skip
    gateway = Gateway(name, process, log_path, {})
    try:
        # Bounded in real time (the test may run under an autojump clock).
        give_up = time.monotonic() + READY_WITHIN_S
        while set(gateway.addresses) != set(ENDPOINTS):
            if process.returncode is not None or time.monotonic() > give_up:
                raise GatewayDidNotStart(
                    f"gateway {name} did not start (exit {process.returncode}):\n{gateway.log()}"
                )
            await trio.sleep(0.05)
            gateway.addresses = _listening(log_path)
        yield gateway
    finally:
        with trio.CancelScope(shield=True):
            await end_child(process, grace_s=0, term_s=STOP_WITHIN_S)


@asynccontextmanager
async def running_gateways(
    backend_url: str, directory: Path, count: int, *extra: str
) -> AsyncIterator[list[Gateway]]:
    """``count`` gateways on one backend, started one after another, all stopped on exit."""
    async with AsyncExitStack() as stack:
        gateways = [
            await stack.enter_async_context(
                running_gateway(backend_url, directory, chr(ord("a") + i), *extra)
            )
            for i in range(count)
        ]
        yield gateways


__all__ = ["Gateway", "GatewayDidNotStart", "running_gateway", "running_gateways"]


SUPERVISOR_READY_S = 60.0


@asynccontextmanager
async def supervisor(
    tmp_path: Path, backend: str, workers: int = 2, *extra: str
) -> AsyncIterator[tuple[trio.Process, dict[str, str], list[int]]]:
    """``streamgate run --workers`` on free ports (and ``extra`` arguments): the process,
    {endpoint: address}, the workers' pids (from its ``workers:`` line)."""
    log_path = tmp_path / "supervisor.log"
    with log_path.open("ab") as out:
        proc = await trio.lowlevel.open_process(
            [sys.executable, "-m", "gateway.cli", "run", "--backend", backend,
             "--workers", str(workers), "--rog-port", "0", "--kafka-port", "0",
             "--iggy-port", "0", "--rabbitmq-stream-port", "0", "--admin-port", "0",
             "--log-format", "console", *extra],
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"}, cwd=tmp_path,
        )  # fmt: skip
    try:
        give_up = time.monotonic() + SUPERVISOR_READY_S
        while True:
            text = log_path.read_text(errors="replace")
            lines = [line.split() for line in text.splitlines()]
            pids = next((w[1:] for w in lines if w[:1] == ["workers:"]), None)
            if pids is not None:
                break
            assert proc.returncode is None, f"exited {proc.returncode}:\n{text}"
            assert time.monotonic() < give_up, text
            await trio.sleep(0.05)
        addresses = {w[0]: w[3].removeprefix("http://") for w in lines
                     if len(w) >= 4 and w[1:3] == ["listening", "on"]}  # fmt: skip
        yield proc, addresses, [int(p) for p in pids]
    finally:
        with trio.CancelScope(shield=True):
            await end_child(proc, grace_s=0, term_s=20)
