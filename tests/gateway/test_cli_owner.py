"""A data directory served by ``streamgate run`` is that process's: a second ``run`` and a client
command with ``--url embedded:`` on it fail with one line naming the owner and its listener and
write nothing; client commands without ``--url`` go through the gateway's Kafka listener."""

from __future__ import annotations

import sys
from pathlib import Path

import trio

from gateway.backends.embedded import LOCK_FILE
from tests.gateway.test_cli_run import streamgate
from tests.helpers.client_cli import cli, cli_env
from tests.helpers.listing import listing

PORTS = ("--rog-port", "0", "--kafka-port", "0", "--iggy-port", "0",
         "--rabbitmq-stream-port", "0", "--admin-port", "0")  # fmt: skip


async def test_second_run_and_embedded_clients_fail_and_write_nothing(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with trio.fail_after(60):
        async with streamgate(data) as (proc, addresses):
            line = (
                f"streamgate: data directory {data} is in use by streamgate (pid {proc.pid}); "
                f"reach it through its listener: --url kafka://{addresses['kafka']}"
            )
            before = listing(data)
            assert {"users.json", LOCK_FILE} <= set(before)

            with trio.fail_after(30):
                second = await trio.run_process(
                    [sys.executable, "-m", "gateway.cli", "run", "--backend", f"embedded:{data}",
                     *PORTS],
                    capture_stdout=True, capture_stderr=True, check=False, env=cli_env(),
                )  # fmt: skip
            assert second.returncode == 1
            assert second.stdout == b""
            assert second.stderr.decode().splitlines() == [line]

            at = ("--url", f"embedded:{data}")
            produced = await cli("produce", "orders", *at, stdin=b"one\n", cwd=tmp_path)
            consumed = await cli("consume", "orders", *at, cwd=tmp_path)
            for ran in (produced, consumed):
                assert (ran.code, ran.out, ran.err.splitlines()) == (1, "", [line])
            assert listing(data) == before


async def test_clients_without_url_go_through_the_gateway(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with streamgate(tmp_path / "data") as (proc, addresses):
            note = (
                f"streamgate: ./data is served by streamgate (pid {proc.pid}); "
                f"going through its listener kafka://{addresses['kafka']}"
            )
            # ``./data`` (the default URL) in this cwd is the gateway's directory.
            created = await cli("topics", "create", "orders", cwd=tmp_path)
            assert (created.code, created.lines) == (0, ["created topic 'orders' (1 partition)"])
            assert created.err.splitlines() == [note]
            produced = await cli("produce", "orders", stdin=b"one\ntwo\n", cwd=tmp_path)
            assert produced.code == 0, produced
            assert produced.lines == [
                "acknowledged 2 messages on 'orders' partition 0, offsets 0..1"
            ]
            consumed = await cli("consume", "orders", cwd=tmp_path)
            assert (consumed.code, consumed.lines, consumed.err.splitlines()) == (
                0, ["one", "two"], [note]
            )  # fmt: skip

            # A stream the Kafka listener does not serve: the one line, naming the listeners.
            other = await cli("consume", "orders", "--stream", "other", cwd=tmp_path)
            assert other.code == 1 and other.out == ""
            [line] = other.err.splitlines()
            assert line.startswith(
                f"streamgate: data directory ./data is in use by streamgate (pid {proc.pid}); "
                "reach it through one of its listeners: "
            )
            assert f"--url kafka://{addresses['kafka']} (stream default)" in line
