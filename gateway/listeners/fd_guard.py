"""What the listeners do when the process runs out of file descriptors, and how ``/readyz`` knows.

A client that opens connections and keeps them idle can take every descriptor of the process
(``RLIMIT_NOFILE``); then ``accept(2)`` fails with EMFILE while the connection waits in the
backlog, so it fails again at once, and the embedded store cannot open a file either. So:

- the listeners keep a RESERVE: a connection whose descriptor number is within ``reserve`` of the
  soft limit is closed at once (descriptors are allocated lowest first, so such a number means
  at least that many are open). The reserve is what the admin port (``/readyz`` answering 503
  rather than nothing), the store's files and the fsync thread still get;
- an accept that fails with EMFILE/ENFILE (something else took the reserve) backs off (0.05 s
  doubling to 1 s) instead of spinning;
- either is counted (``streamgate_connection_errors_total{reason="fd_exhausted"}``) and logged at
  most once per ``log_every_s`` with how many happened since the last line;
- ``check`` (a ``/readyz`` input) says not ready from the first such event until a descriptor
  opened for the check is below the reserve again.

One guard per process (``FD_GUARD``): the limit is the process's, whichever listener hits it.
"""

from __future__ import annotations

import errno
import functools
import math
import os
import resource
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Final

import structlog
import trio

log = structlog.get_logger("streamgate.listeners")

# accept(2) failing because the process or the system is out of something: wait, then retry
# (trio.serve_listeners logs a traceback every 0.1 s instead: issue 18).
_FD_ERRNOS: Final = frozenset((errno.EMFILE, errno.ENFILE))
_CAPACITY_ERRNOS: Final = _FD_ERRNOS | {errno.ENOMEM, errno.ENOBUFS}
_BACKOFF_S: Final = (0.05, 1.0)


def _soft_limit() -> int | None:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return None if soft == resource.RLIM_INFINITY or soft <= 0 else int(soft)


class FdGuard:
    def __init__(
        self,
        *,
        limit: int | None = None,
        reserve: int | None = None,
        log_every_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limit = limit if limit is not None else _soft_limit()
        # 1/16 of the limit, 16..256: room for /readyz, the store and fsync's duplicates.
        soft = self.limit or 0
        self.reserve = reserve if reserve is not None else min(256, max(16, soft // 16))
        self.log_every_s = log_every_s
        self.exhausted = False
        self._clock = clock
        self._last_log = -math.inf
        self._since_log = 0

    def over_reserve(self, fd: int) -> bool:
        """Whether a descriptor numbered ``fd`` was taken from the reserve."""
        return self.limit is not None and fd >= self.limit - self.reserve

    def note(self, protocol: str, what: str) -> None:
        """A connection refused (``what``: "reserve", or the accept's errno name)."""
        self.exhausted = True
        self._since_log += 1
        now = self._clock()
        if now - self._last_log >= self.log_every_s:
            log.warning(
                "file descriptors exhausted: refusing connections",
                protocol=protocol,
                cause=what,
                refused=self._since_log,  # since the previous line about it
                limit=self.limit,
                reserve=self.reserve,
            )
            self._last_log = now
            self._since_log = 0

    def recovered(self) -> None:
        if self.exhausted:
            self.exhausted = False
            log.info("file descriptors available again", refused_unlogged=self._since_log)
            self._since_log = 0
            self._last_log = -math.inf

    def check(self) -> str | None:
        """Why the gateway is not ready for more connections, or None (a ``/readyz`` input)."""
        if not self.exhausted:
            return None
        try:
            fd = os.open(os.devnull, os.O_RDONLY)
        except OSError as exc:
            return f"file descriptors exhausted ({exc.strerror})"
        os.close(fd)
        if self.over_reserve(fd):
            return f"file descriptors nearly exhausted ({fd + 1} of {self.limit} in use)"
        self.recovered()
        return None


FD_GUARD: Final = FdGuard()


async def accept_loop(
    listener: trio.abc.Listener[trio.SocketStream],
    start: Callable[[trio.SocketStream], None],
    guard: FdGuard,
    name: str,
    *,
    on_refused: Callable[[], None] | None = None,
    reserve: bool = True,
) -> None:
    """Accept until cancelled and ``start`` each connection; out of descriptors, back off and
    refuse quietly. ``on_refused`` counts each refusal; without ``reserve`` (the admin port:
    what the reserve is kept for) only a failing accept refuses."""
    backoff = _BACKOFF_S[0]
    async with listener:
        while True:
            try:
                stream = await listener.accept()
            except OSError as exc:
                if exc.errno not in _CAPACITY_ERRNOS:
                    raise
                if exc.errno in _FD_ERRNOS and on_refused is not None:
                    on_refused()
                guard.note(name, errno.errorcode[exc.errno])
                await trio.sleep(backoff)
                backoff = min(backoff * 2, _BACKOFF_S[1])
                continue
            backoff = _BACKOFF_S[0]
            if reserve and guard.over_reserve(stream.socket.fileno()):
                if on_refused is not None:
                    on_refused()
                guard.note(name, "reserve")
                await trio.aclose_forcefully(stream)
                continue
            if reserve:
                guard.recovered()
            start(stream)


async def serve_listeners_quietly(
    handler: Callable[[trio.SocketStream], Awaitable[object]],
    listeners: Sequence[trio.abc.Listener[trio.SocketStream]],
    name: str,
    guard: FdGuard = FD_GUARD,
) -> None:
    """``trio.serve_listeners`` for a port with no reserve of its own (admin), quiet on EMFILE."""

    async def run(stream: trio.SocketStream) -> None:
        try:
            await handler(stream)
        finally:
            await trio.aclose_forcefully(stream)

    async with trio.open_nursery() as nursery:

        def start(stream: trio.SocketStream) -> None:
            nursery.start_soon(run, stream)

        for listener in listeners:
            accept = functools.partial(accept_loop, reserve=False)
            nursery.start_soon(accept, listener, start, guard, name)


__all__ = ["FD_GUARD", "FdGuard", "accept_loop", "serve_listeners_quietly"]
