"""``streamgate run`` as a real process: addresses printed, crash and restart, clean SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import trio

from protocols.rog import NO_DATA_LEFT, Error, FetchOk, Ok
from tests.helpers.rog_client import RogClient


@asynccontextmanager
async def streamgate(data: Path, *extra: str) -> AsyncIterator[tuple[trio.Process, dict[str, str]]]:
    """Start ``streamgate run``; yield the process and {endpoint: address} from its stdout."""
    proc = await trio.lowlevel.open_process(
        [sys.executable, "-m", "gateway.cli", "run", "--backend", f"embedded:{data}",
         "--rog-port", "0", "--kafka-port", "0", "--iggy-port", "0", "--rabbitmq-stream-port", "0",
         "--admin-port", "0",
         "--log-format", "json",
         *extra],
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        seen: dict[str, str] = {}
        buf = b""
        with trio.fail_after(20):
            while "admin" not in seen:
                chunk = await proc.stdout.receive_some(4096)
                assert chunk, f"streamgate exited early with {proc.poll()}"
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    words = line.decode().split()
                    if len(words) >= 4 and words[1:3] == ["listening", "on"]:
                        seen[words[0]] = words[3].removeprefix("http://")
        yield proc, seen
    finally:
        if proc.returncode is None:
            proc.kill()  # by pid: only the process this test started
        with trio.move_on_after(10):
            await proc.wait()


def rog(addresses: dict[str, str]) -> RogClient:
    host, port = addresses["rog"].rsplit(":", 1)
    return RogClient(host, int(port))


async def test_killed_gateway_restarts_with_logs_messages_and_offsets(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with trio.fail_after(60):
        async with streamgate(data, "--fsync", "never") as (proc, addresses):
            c = rog(addresses)
            assert await c.create_log("restart.log", 10) == Ok()
            for p in range(10):
                for i in range(3):
                    assert await c.publish("restart.log", p, b"m%d-%d" % (p, i)) == Ok()
            for p in range(10):
                assert await c.fetch("restart.log", p, "g") == FetchOk(data=b"m%d-0" % p)
                assert await c.ack("restart.log", p, "g") == Ok()
            # A crash, not a clean stop: acknowledged data must already be in the files.
            proc.send_signal(signal.SIGKILL)
            await proc.wait()
        async with streamgate(data) as (_, addresses):
            c = rog(addresses)
            assert await c.create_log("restart.log", 10) == Error(
                text="Log restart.log already exists"
            )
            for p in range(10):
                # The group goes on from its stored offset; another group starts at 0.
                assert await c.fetch("restart.log", p, "g") == FetchOk(data=b"m%d-1" % p)
                assert await c.fetch("restart.log", p, "other") == FetchOk(data=b"m%d-0" % p)
            assert await c.publish("restart.log", 0, b"after") == Ok()
            for expected in (b"m0-1", b"m0-2", b"after"):
                assert await c.fetch("restart.log", 0, "g") == FetchOk(data=expected)
                assert await c.ack("restart.log", 0, "g") == Ok()
            assert await c.fetch("restart.log", 0, "g") == Error(text=NO_DATA_LEFT)


async def test_sigterm_stops_cleanly(tmp_path: Path) -> None:
    with trio.fail_after(30):
        async with streamgate(tmp_path / "data") as (proc, addresses):
            assert set(addresses) == {"rog", "kafka", "iggy", "rabbitmq_stream", "admin"}
            assert await rog(addresses).create_log("x", 1) == Ok()
            proc.send_signal(signal.SIGTERM)
            assert await proc.wait() == 0


async def test_bad_config_exits_with_a_clear_message(tmp_path: Path) -> None:
    with trio.fail_after(30):
        result = await trio.run_process(
            [sys.executable, "-m", "gateway.cli", "run", "--set", "listeners.rog.prot=1"],
            capture_stdout=True, capture_stderr=True, check=False,
        )  # fmt: skip
    assert result.returncode == 2
    assert b"unknown setting 'listeners.rog.prot'" in result.stderr
