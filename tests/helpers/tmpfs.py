"""A real, small tmpfs for disk-full tests: ENOSPC from the kernel, not a mock.

Needs root (or CAP_SYS_ADMIN) to mount. Where that is impossible the test is skipped with the
reason, except under CI=true, where a missing tmpfs fails the test (CI must run it).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def small_tmpfs(directory: Path, size: str) -> Iterator[Path]:
    """``directory`` with a tmpfs of ``size`` (e.g. "2m") mounted on it; unmounted after."""
    directory.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(directory)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        why = f"cannot mount a tmpfs (uid {os.getuid()}): {done.stderr.strip()}"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{why}; under CI=true the disk-full tests must run")
        pytest.skip(why)
    try:
        yield directory
    finally:
        subprocess.run(["umount", "-l", str(directory)], check=False)


def fill(directory: Path, name: str = "filler", leave: int = 0) -> Path:
    """A file taking all the space left on the file system of ``directory`` but about
    ``leave`` bytes."""
    path = directory / name
    chunk = b"\xaa" * 65536
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        while True:
            st = os.statvfs(directory)
            free = st.f_bavail * st.f_frsize - leave
            if free <= 0:
                break
            os.write(fd, chunk[: min(len(chunk), free)])
    except OSError:
        pass
    finally:
        os.close(fd)
    return path
