"""Headless Chromium (Debian's ``chromium``, ../shared/notes/observability.md §5) for the pages
the gateway serves: the DOM once the page's script has run, and screenshots.

Each run is a child process with a profile directory of its own, bounded in time, stopped by
its pid (and its own children by theirs) if it overruns. ``--virtual-time-budget`` lets the
page's timers run that many virtual milliseconds; virtual time stands still while a fetch is
in flight, so the page's ``status.json`` answers are in the DOM it dumps. A missing browser
skips the test, and fails it under CI=true.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import pytest
import trio

from tests.helpers.processes import alive, descendants, end_child, send_signal

FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
)  # fmt: skip
RUN_WITHIN_S = 60.0


def chromium_binary() -> str:
    found = shutil.which("chromium") or "/usr/bin/chromium"
    if not os.access(found, os.X_OK):
        why = "chromium is missing (apt-get install --no-install-recommends chromium)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{why}; CI must run the status page tests")
        pytest.skip(why)
    return found


async def run_chromium(workdir: Path, *args: str, limit_s: float = RUN_WITHIN_S) -> str:
    """``chromium FLAGS args`` in a new profile under ``workdir``: its stdout. Raises
    ``trio.TooSlowError`` past ``limit_s`` (after stopping it) and AssertionError on a non-zero
    exit, with its stderr."""
    binary = chromium_binary()
    profile = tempfile.mkdtemp(prefix="chromium-profile-", dir=workdir)
    out_path, err_path = Path(profile) / "stdout", Path(profile) / "stderr"
    with out_path.open("wb") as out, err_path.open("wb") as err:
        process = await trio.lowlevel.open_process(
            [binary, *FLAGS, f"--user-data-dir={profile}/data", *args],
            stdin=subprocess.DEVNULL, stdout=out, stderr=err,
        )  # fmt: skip
    try:
        with trio.fail_after(limit_s):
            await process.wait()
    finally:
        if process.returncode is None:
            with trio.CancelScope(shield=True):
                tree = descendants([process.pid])  # while the parent stands: its children
                await end_child(process, grace_s=0, term_s=5)
                for pid, start in tree.items():
                    if alive(pid, start):
                        send_signal(pid, signal.SIGKILL)
    stderr = err_path.read_text(errors="replace")
    assert process.returncode == 0, f"chromium exited {process.returncode}:\n{stderr[-3000:]}"
    return out_path.read_text(errors="replace")


async def dump_dom(workdir: Path, url: str, *, budget_ms: int = 5000) -> str:
    """The page's DOM, serialised, after ``budget_ms`` of virtual time."""
    return await run_chromium(workdir, f"--virtual-time-budget={budget_ms}", "--dump-dom", url)


async def screenshot(
    workdir: Path, url: str, path: Path, *, size: tuple[int, int], budget_ms: int = 5000
) -> None:
    """A PNG of the page at ``size`` (width, height) after ``budget_ms`` of virtual time."""
    await run_chromium(
        workdir, f"--virtual-time-budget={budget_ms}", f"--window-size={size[0]},{size[1]}",
        f"--screenshot={path}", url,
    )  # fmt: skip
    assert await trio.Path(path).is_file(), f"chromium wrote no screenshot to {path}"


__all__ = ["chromium_binary", "dump_dom", "run_chromium", "screenshot"]
