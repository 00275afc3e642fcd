"""Every mistake on the command line or in config: one ``streamgate: ...`` line on stderr, a
non-zero exit (2 for a usage error), never a traceback, never a password (issue 18, item 8).

The real ``streamgate`` CLI in a subprocess each time; anything it started is ended by pid."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import trio

from gateway.config import ConfigError, load
from tests.helpers.processes import descendants, send_signal, until_dead

SECRET = "s3cr3t-pw"  # in every URL that carries a password: never in any output
# Ports 0 everywhere: only the port a case takes on purpose is ever in use. Warnings and up
# only, so the info lines of a start that gets as far as the listeners are not counted.
_PORTS = ("--rog-port", "0", "--kafka-port", "0", "--iggy-port", "0",
          "--rabbitmq-stream-port", "0", "--admin-port", "0")  # fmt: skip
# No broker listens on port 1: a backend there is unreachable (refused at once).
_NOWHERE = "127.0.0.1:1"


@dataclass(frozen=True)
class Outcome:
    code: int
    stdout: str
    stderr: str


async def streamgate(cwd: Path, *args: str, limit_s: float = 40) -> Outcome:
    """``streamgate ARGS`` in ``cwd`` until it exits, within ``limit_s``; on the way out it and
    whatever it started (``--workers``) are ended by pid."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMGATE_")}
    proc = await trio.lowlevel.open_process(
        [sys.executable, "-m", "gateway.cli", *args],
        cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**env, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    out = bytearray()
    err = bytearray()

    async def drain(stream: trio.abc.ReceiveStream, into: bytearray) -> None:
        async for chunk in stream:
            into += chunk

    try:
        assert proc.stdout is not None and proc.stderr is not None
        with trio.fail_after(limit_s):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(drain, proc.stdout, out)
                nursery.start_soon(drain, proc.stderr, err)
            await proc.wait()
    finally:
        if proc.returncode is None:
            started = descendants([proc.pid])
            for pid in started:
                send_signal(pid, signal.SIGKILL)
            await until_dead(started, 10)
        with trio.move_on_after(10):
            await proc.wait()
    assert proc.returncode is not None
    return Outcome(proc.returncode, out.decode(errors="replace"), err.decode(errors="replace"))


def one_line(outcome: Outcome, *names: str, code: int | None = None) -> str:
    """The one stderr line of a refused command, checked: it names each of ``names``."""
    everything = outcome.stdout + outcome.stderr
    assert "Traceback" not in everything, outcome.stderr
    assert SECRET not in everything, everything
    lines = [line for line in outcome.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, outcome.stderr
    line = lines[0]
    assert line.startswith("streamgate: "), line
    for name in names:
        assert name in line, line
    assert outcome.code != 0
    if code is not None:
        assert outcome.code == code, (outcome.code, line)
    return line


@contextmanager
def taken_port() -> Iterator[int]:
    """A port on 127.0.0.1 some other program listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def run_args(tmp_path: Path, *extra: str, backend: str | None = None) -> list[str]:
    return ["run", "--backend", backend or f"embedded:{tmp_path / 'data'}", *_PORTS,
            "--log-level", "warning", *extra]  # fmt: skip


# (id, extra arguments of ``run``, what the line names, exit code)
RUN_MISTAKES = [
    ("unknown-scheme", ["--backend", "embeded:./x"], ["'embeded'", "embedded"], 2),
    ("fsync", ["--fsync", "sometimes"], ["backend.fsync", "'sometimes'"], 2),
    ("log-level", ["--log-level", "verbose"], ["log.level", "'verbose'"], 2),
    ("log-format", ["--log-format", "weird"], ["log.format", "'weird'"], 2),
    ("set-type", ["--set", "limits.idle_timeout_s=abc"], ["limits.idle_timeout_s", "'abc'"], 2),
    ("set-unknown", ["--set", "limits.idle_timeot_s=5"], ["'limits.idle_timeot_s'"], 2),
    (
        "url-option",
        ["--backend", f"iggy://alice:{SECRET}@{_NOWHERE}?bogus=1"],
        ["unknown iggy URL option 'bogus'", "alice:***@"],
        2,
    ),
    ("kafka-url-option", ["--backend", f"kafka://{_NOWHERE}?bogus=1"], ["'bogus'"], 2),
    (
        "kafka-url-password",  # user info is SASL to the broker: a mechanism it cannot do
        ["--backend", f"kafka://alice:{SECRET}@{_NOWHERE}?sasl=GSSAPI"],
        ["sasl", "one of PLAIN"],
        2,
    ),
    ("url-bad-port", ["--backend", f"iggy://alice:{SECRET}@127.0.0.1:abc"], ["bad port"], 2),
    (
        "tls-cert-missing",
        [
            "--set",
            "listeners.kafka.tls.enabled=true",
            "--set",
            "listeners.kafka.tls.cert_file=missing-cert.pem",
            "--set",
            "listeners.kafka.tls.key_file=missing-key.pem",
        ],
        ["kafka", "missing-cert.pem", "No such file"],
        1,
    ),
    ("tls-without-cert", ["--set", "listeners.kafka.tls.enabled=true"], ["cert_file"], 2),
    (
        "workers-store-link",  # the workers' link to the store owner is the supervisor's
        ["--workers", "2", "--backend", "embedded+owner:/run/x.sock"],
        ["embedded+owner", "embedded:DIR"],
        2,
    ),
    ("port-range", ["--kafka-port", "99999"], ["listeners.kafka.port", "99999"], 2),
]


@pytest.mark.parametrize(
    ("extra", "names", "code"),
    [pytest.param(extra, names, code, id=name) for name, extra, names, code in RUN_MISTAKES],
)
async def test_run_mistake_is_one_line(
    tmp_path: Path, extra: list[str], names: list[str], code: int
) -> None:
    one_line(await streamgate(tmp_path, *run_args(tmp_path, *extra)), *names, code=code)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("log.level", "verbose"),
        ("log.format", "weird"),
        ("backend.fsync", "interval:soon"),
        ("listeners.rog.port", "65536"),
        ("admin.port", "-1"),
        ("listeners.kafka.tls.port", "-2"),
    ],
)
def test_config_refuses_values_no_type_check_catches(key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=f"^{re.escape(key)}: .*{re.escape(value)}"):
        load(overrides={key: value})


@pytest.mark.parametrize("level", ["debug", "INFO", "warning", "error", "critical"])
def test_config_takes_every_log_level(level: str) -> None:
    assert load(overrides={"log.level": level}).log.level == level


async def test_config_file_that_does_not_parse_is_named_with_its_line(tmp_path: Path) -> None:
    config = tmp_path / "streamgate.toml"
    config.write_text('host = "127.0.0.1"\n\n[backend]\nurl = "embedded:./data\n')
    line = one_line(
        await streamgate(tmp_path, *run_args(tmp_path, "--config", str(config))), code=2
    )
    assert str(config) in line and "line 4" in line


async def test_unknown_setting_in_config_file(tmp_path: Path) -> None:
    config = tmp_path / "streamgate.toml"
    config.write_text("[limits]\nidle_timeout = 5\n")
    one_line(
        await streamgate(tmp_path, *run_args(tmp_path, "--config", str(config))),
        str(config), "'limits.idle_timeout'", code=2,
    )  # fmt: skip


@pytest.mark.parametrize("listener", ["kafka", "iggy", "rabbitmq-stream", "rog", "admin"])
async def test_port_in_use_names_the_listener_and_address(tmp_path: Path, listener: str) -> None:
    with taken_port() as port:
        outcome = await streamgate(tmp_path, *run_args(tmp_path, f"--{listener}-port", str(port)))
    protocol = listener.replace("-", "_")
    line = one_line(outcome, code=1)
    assert (
        line
        == f"streamgate: cannot listen for {protocol} on 127.0.0.1:{port}: address already in use"
    )


async def test_host_that_cannot_be_bound(tmp_path: Path) -> None:
    # TEST-NET-3 (RFC 5737): no interface of this machine has it.
    one_line(
        await streamgate(tmp_path, *run_args(tmp_path, "--host", "203.0.113.7")),
        "cannot listen for", "203.0.113.7", code=1,
    )  # fmt: skip


# ``--workers`` needs an external backend; none answers on port 1, which is no mistake of the
# command line (the workers start and keep reconnecting), so warnings are left out as well.
def workers_args(tmp_path: Path, *extra: str, backend: str = f"kafka://{_NOWHERE}") -> list[str]:
    return [*run_args(tmp_path, "--workers", "2", *extra, backend=backend), "--log-level", "error"]


async def test_workers_port_in_use_is_said_once(tmp_path: Path) -> None:
    with taken_port() as port:
        outcome = await streamgate(tmp_path, *workers_args(tmp_path, "--kafka-port", str(port)))
    line = one_line(outcome, code=1)
    assert (
        line == f"streamgate: cannot listen for kafka on 127.0.0.1:{port}: address already in use"
    )


async def test_workers_admin_port_in_use(tmp_path: Path) -> None:
    with taken_port() as port:
        outcome = await streamgate(tmp_path, *workers_args(tmp_path, "--admin-port", str(port)))
    one_line(outcome, f"admin on 127.0.0.1:{port}", "address already in use", code=1)


async def test_workers_refused_backend_url_is_said_once(tmp_path: Path) -> None:
    outcome = await streamgate(
        tmp_path, *workers_args(tmp_path, backend=f"iggy://alice:{SECRET}@{_NOWHERE}?bogus=1")
    )
    one_line(outcome, "unknown iggy URL option 'bogus'", code=2)


# Client commands: (id, command, --url, what the line names)
CLIENT_MISTAKES = [
    ("scheme", ["topics", "list"], f"foo://alice:{SECRET}@{_NOWHERE}", ["'foo'"]),
    ("kafka-port", ["topics", "list"], "kafka://127.0.0.1:abc", ["127.0.0.1:abc"]),
    (
        "kafka-password",
        ["topics", "list"],
        f"kafka://alice:{SECRET}@{_NOWHERE}?sasl=GSSAPI",
        ["one of PLAIN"],
    ),
    (
        "kafka-password-bad-port",
        ["produce", "t"],
        f"kafka://alice:{SECRET}@127.0.0.1:abc",
        ["127.0.0.1:abc"],
    ),
    ("iggy-port", ["consume", "t"], f"iggy://alice:{SECRET}@127.0.0.1:abc", ["bad port"]),
    ("iggy-option", ["topics", "list"], f"iggy://alice:{SECRET}@{_NOWHERE}?x=1", ["'x'"]),
    ("iggy-refused", ["topics", "list"], f"iggy://alice:{SECRET}@{_NOWHERE}", [_NOWHERE]),
    ("kafka-refused", ["produce", "t"], f"kafka://{_NOWHERE}", [_NOWHERE]),
    (
        "rabbitmq-refused",
        ["consume", "t"],
        f"rabbitmq-stream://alice:{SECRET}@{_NOWHERE}",
        [_NOWHERE, "alice:***@"],
    ),
    ("unknown-host", ["topics", "list"], f"iggy://alice:{SECRET}@no-such-host.invalid:1", []),
    ("users-scheme", ["users", "list"], f"kafka://alice:{SECRET}@{_NOWHERE}", ["iggy://"]),
    ("users-refused", ["users", "list"], f"iggy://alice:{SECRET}@{_NOWHERE}", [_NOWHERE]),
]


@pytest.mark.parametrize(
    ("command", "url", "names"),
    [pytest.param(c, u, n, id=name) for name, c, u, n in CLIENT_MISTAKES],
)
async def test_client_bad_url_is_one_line_without_the_password(
    tmp_path: Path, command: list[str], url: str, names: list[str]
) -> None:
    outcome = await streamgate(tmp_path, *command, "--url", url, "--timeout", "2")
    one_line(outcome, *names)
