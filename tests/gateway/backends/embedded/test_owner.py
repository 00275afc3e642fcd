"""One owner per data directory: a second opener fails at once with the owner's pid and
listener and writes nothing; the lock goes with the store's close or its process's death."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from gateway.backends.embedded import (
    LOCK_FILE,
    EmbeddedBackend,
    Listener,
    Owner,
    StoreInUse,
    open_embedded,
)
from tests.helpers.listing import listing

from .support import append, batch, create, read_all

REPO = Path(__file__).resolve().parents[4]


async def refused(root: Path) -> StoreInUse:
    """Start a second backend on ``root``: it must fail at start with ``StoreInUse``."""
    second = EmbeddedBackend(root, fsync="never")
    async with trio.open_nursery() as nursery:
        with pytest.raises(StoreInUse) as caught:
            await nursery.start(second.run)
    return caught.value


async def test_second_opener_fails_writes_nothing_and_opens_after_close(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with trio.fail_after(20):
        async with open_embedded(root, fsync="never") as first:
            await create(first)
            await append(first, batch(3))
            lock = json.loads((root / LOCK_FILE).read_text())
            assert lock == {"pid": os.getpid(), "listeners": {}}
            before = listing(root)
            exc = await refused(root)
            assert exc.message == (
                f"data directory {root} is in use by streamgate (pid {os.getpid()}); "
                "stop it, or reach it through its listeners once they are bound"
            )
            assert listing(root) == before

            await first.record_listeners([
                Listener("rog", "127.0.0.1", 7878),
                Listener("kafka", "0.0.0.0", 9092, stream="default"),
            ])  # fmt: skip
            exc = await refused(root)
            assert exc.message == (
                f"data directory {root} is in use by streamgate (pid {os.getpid()}); "
                "reach it through its listener: --url kafka://127.0.0.1:9092"
            )
            assert exc.owner is not None and exc.owner.kafka_url("default") is not None
        # Closed: the lock is free, the file names no listener any more.
        assert (root / LOCK_FILE).read_bytes() == b""
        async with open_embedded(root, fsync="never") as again:
            assert len(await read_all(again)) == 3
            await append(again, batch(1, start=3))


async def test_lock_of_a_killed_owner_does_not_block(tmp_path: Path) -> None:
    root = tmp_path / "store"
    args = [sys.executable, "-m", "tests.gateway.backends.embedded.lock_holder", str(root)]
    proc = await trio.lowlevel.open_process(args, stdout=subprocess.PIPE, cwd=REPO)
    assert proc.stdout is not None
    try:
        with trio.fail_after(20):
            said = b""
            while not said.endswith(b"\n"):
                chunk = await proc.stdout.receive_some()
                assert chunk, "the lock holder exited before it was killed"
                said += chunk
            assert said == b"ready\n"
            exc = await refused(root)
            assert f"(pid {proc.pid}); reach it through its listener: --url kafka://" in exc.message
            os.kill(proc.pid, signal.SIGKILL)  # by pid: the child this test started
            await proc.wait()
    finally:
        if proc.returncode is None:
            proc.kill()
        with trio.CancelScope(shield=True), trio.move_on_after(10):
            await proc.wait()
        await proc.stdout.aclose()
    assert proc.returncode == -signal.SIGKILL
    # The dead owner's record is still there; its lock went with the process.
    assert json.loads((root / LOCK_FILE).read_text())["pid"] == proc.pid
    with trio.fail_after(10):
        async with open_embedded(root, fsync="never") as b:
            await create(b)
            assert json.loads((root / LOCK_FILE).read_text())["pid"] == os.getpid()


def test_message_names_the_listeners_a_command_on_its_stream_can_use() -> None:
    owner = Owner(pid=7, listeners=(
        Listener("kafka", "127.0.0.1", 9092, stream="default", sasl=True),
        Listener("iggy", "::", 8090),
        Listener("rabbitmq_stream", "127.0.0.1", 5552),
        Listener("rog", "127.0.0.1", 7878),
    ))  # fmt: skip
    assert Owner.from_json(json.loads(json.dumps(owner.to_json()))) == owner
    assert owner.kafka_url("default") is None  # SASL: the Kafka backend speaks none
    assert StoreInUse("data", owner, stream="orders").message == (
        "data directory ./data is in use by streamgate (pid 7); reach it through one of its "
        "listeners: --url kafka://127.0.0.1:9092 (SASL) (stream default), "
        "--url iggy://USER:PASSWORD@[::1]:8090, "
        "--url rabbitmq-stream://USER:PASSWORD@127.0.0.1:5552/orders"
    )
