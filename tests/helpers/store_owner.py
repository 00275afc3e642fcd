"""A real store owner (``streamgate run --backend embedded:DIR --set store_socket=PATH``, what
the supervisor of ``--workers`` starts on the embedded backend) for tests that put gateways of
their own in front of it (``embedded+owner:PATH``). Started and stopped by its pid; the socket in
a short private directory (a unix socket path has at most 107 bytes)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import trio

from tests.helpers.processes import end_child

READY_WITHIN_S = 20.0


@dataclass
class StoreOwner:
    process: trio.Process
    socket: str
    log_path: Path

    @property
    def url(self) -> str:
        return f"embedded+owner:{self.socket}"


@asynccontextmanager
async def store_owner(data: Path, log_dir: Path) -> AsyncIterator[StoreOwner]:
    with tempfile.TemporaryDirectory(prefix="sg-") as where:
        sock = os.path.join(where, "store.sock")
        log_path = log_dir / "store-owner.log"
        with log_path.open("ab") as out:
            process = await trio.lowlevel.open_process(
                [sys.executable, "-m", "gateway.cli", "run", "--backend", f"embedded:{data}",
                 "--set", f"store_socket={sock}", "--log-format", "console"],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"}, cwd=log_dir,
            )  # fmt: skip
        try:
            give_up = time.monotonic() + READY_WITHIN_S
            while f"store listening on {sock}" not in log_path.read_text(errors="replace"):
                assert process.returncode is None, log_path.read_text(errors="replace")
                assert time.monotonic() < give_up, log_path.read_text(errors="replace")
                await trio.sleep(0.05)
            yield StoreOwner(process, sock, log_path)
        finally:
            with trio.CancelScope(shield=True):
                await end_child(process, grace_s=0, term_s=20)


__all__ = ["StoreOwner", "store_owner"]
