"""The command-line tools the deploy tests run (hadolint, kubectl, kubernetes-validate), found
where the test extra installs them: the test virtualenv's own bin directory, else PATH.

A missing tool fails the test under CI (``make test`` installs every one of them, so missing
means the setup is broken); on a developer's machine it skips with the reason, which pytest's
``-ra`` summary prints.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

__all__ = ["run_tool", "tool"]

RUN_LIMIT_S = 120.0


def tool(name: str) -> str:
    here = Path(sys.executable).parent / name
    found = str(here) if here.is_file() else shutil.which(name)
    if found is None:
        message = f"{name} not found: `make setup` (the test extra of pyproject.toml) installs it"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(message)
        pytest.skip(message)
    return found


def run_tool(
    name: str, *args: str, stdin: str | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``name args...``, bounded in time; its exit status is the caller's to check."""
    return subprocess.run(
        [tool(name), *args], input=stdin, capture_output=True, text=True, cwd=cwd,
        timeout=RUN_LIMIT_S, check=False,
    )  # fmt: skip
