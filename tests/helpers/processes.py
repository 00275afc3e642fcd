"""Processes a test started, tracked and ended by pid (never by name), through /proc (proc(5)).

A pid alone can be reused once its process is gone, so a process is known by (pid, start
time). ``descendants`` finds what a child of ours started in turn, even in sessions of their
own, as long as the chain of parents still stands.
"""

from __future__ import annotations

import os
import signal
import socket
from collections.abc import Iterable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

import trio

__all__ = [
    "accepted_on",
    "alive",
    "descendants",
    "end_child",
    "free_ports",
    "send_signal",
    "until_dead",
]


@dataclass(frozen=True)
class _Stat:
    state: str
    ppid: int
    start: int  # clock ticks after boot


def _stat(pid: int) -> _Stat | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()  # from field 3 (state); starttime is 22
    return _Stat(state=fields[0], ppid=int(fields[1]), start=int(fields[19]))


def alive(pid: int, start: int | None = None) -> bool:
    """Whether ``pid`` runs (a zombie does not: an orphan's may wait for a slow reaper) and,
    when ``start`` is given, is the process that started then."""
    stat = _stat(pid)
    return stat is not None and stat.state not in "ZX" and start in (None, stat.start)


def descendants(roots: Iterable[int]) -> dict[int, int]:
    """Live descendants of ``roots``, roots included: pid -> start time. Orphans are adopted
    by init, so call it while the parents live."""
    children: dict[int, list[int]] = {}
    stats: dict[int, _Stat] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (stat := _stat(int(entry.name))) is not None:
            stats[int(entry.name)] = stat
            children.setdefault(stat.ppid, []).append(int(entry.name))
    found: dict[int, int] = {}
    todo = [p for p in roots if p in stats]
    while todo:
        pid = todo.pop()
        if stats[pid].state not in "ZX":
            found[pid] = stats[pid].start
        todo.extend(c for c in children.get(pid, ()) if c not in found)
    return found


def send_signal(pid: int, sig: signal.Signals) -> None:
    with suppress(ProcessLookupError):
        os.kill(pid, sig)


async def until_dead(pids: Iterable[int], limit_s: float) -> bool:
    """Wait until none of ``pids`` runs, at most ``limit_s``; whether none does."""
    pids = list(pids)
    with trio.move_on_after(limit_s):
        while any(alive(p) for p in pids):  # noqa: ASYNC110 - not our children: no event
            await trio.sleep(0.05)
    return not any(alive(p) for p in pids)


async def end_child(process: trio.Process, grace_s: float, term_s: float = 10) -> None:
    """Give a child of ours ``grace_s`` to exit, then SIGTERM and ``term_s``, then SIGKILL;
    reaped in every case."""
    with trio.move_on_after(grace_s):
        await process.wait()
    if process.returncode is None:
        process.send_signal(signal.SIGTERM)
        with trio.move_on_after(term_s):
            await process.wait()
    if process.returncode is None:
        process.kill()
        await process.wait()


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct ports free on ``host`` now. Another process may take one before it
    is used: callers that can retry with fresh ports should."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((host, 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


_ESTABLISHED = "01"  # tcp_states.h


def accepted_on(pid: int, port: int) -> int:
    """How many established TCP connections process ``pid`` holds with local port ``port``
    (the connections it accepted on a listener there): its socket inodes (/proc/<pid>/fd)
    matched against /proc/net/tcp and tcp6."""
    inodes = set()
    with suppress(OSError):
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with suppress(OSError):
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                local_port = int(fields[1].rsplit(":", 1)[1], 16)
                if local_port == port and fields[3] == _ESTABLISHED and fields[9] in inodes:
                    count += 1
    return count
