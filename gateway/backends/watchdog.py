"""Request bounds in real time, shared by the backends that talk to a server over a network."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import trio


class Watchdog:
    """Request bounds in real (monotonic) time, enforced by one task that looks every
    ``tick_s``: what a bound guards against is a server that does not answer, whatever the
    run's clock says. (It also keeps trio's autojump test clock from firing a bound while
    the server works in another thread or process.)"""

    def __init__(self, tick_s: float = 0.1) -> None:
        self.tick_s = tick_s
        self._scopes: dict[trio.CancelScope, float] = {}

    @contextmanager
    def bound(self, seconds: float) -> Iterator[trio.CancelScope]:
        scope = trio.CancelScope()
        self._scopes[scope] = time.monotonic() + seconds
        try:
            with scope:
                yield scope
        finally:
            del self._scopes[scope]

    async def run(self) -> None:
        while True:
            await trio.sleep(self.tick_s)
            now = time.monotonic()
            for scope, deadline in list(self._scopes.items()):
                if now >= deadline:
                    scope.cancel()


__all__ = ["Watchdog"]
