"""The ``streamgate`` client subcommands run as real processes (``python -m gateway.cli``)."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

__all__ = ["Ran", "cli", "cli_command", "cli_env", "json_lines"]

LIMIT_S = 30.0  # one command, start to exit (the interpreter's start included)


@dataclass(frozen=True, slots=True)
class Ran:
    code: int
    out: str
    err: str

    @property
    def lines(self) -> list[str]:
        return self.out.splitlines()


def cli_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "gateway.cli", *args]


def cli_env() -> dict[str, str]:
    """The test's environment without STREAMGATE_URL: each test names its endpoint."""
    env = {k: v for k, v in os.environ.items() if k != "STREAMGATE_URL"}
    env["PYTHONUNBUFFERED"] = "1"
    return env


async def cli(
    *args: str, stdin: bytes = b"", limit_s: float = LIMIT_S, cwd: Path | None = None
) -> Ran:
    """Run ``streamgate <args>`` (in ``cwd``) to its end; its exit code, stdout and stderr."""
    with trio.fail_after(limit_s):
        done = await trio.run_process(
            cli_command(*args), stdin=stdin, capture_stdout=True, capture_stderr=True,
            check=False, env=cli_env(), cwd=cwd,
        )  # fmt: skip
    return Ran(done.returncode, done.stdout.decode(), done.stderr.decode())


def json_lines(ran: Ran) -> list[dict[str, Any]]:
    return [json.loads(line) for line in ran.lines]
