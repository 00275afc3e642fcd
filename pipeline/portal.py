"""Synchronous access to an endpoint: its backend runs under trio in a thread of its own for as
long as a session lasts, and Spark's methods (plain functions) call into it. A read task
converts one answer to Arrow while the loop keeps the connection alive, and a backend is started
once per session, not once per call.

    with session(conn) as s:
        info = s.run(describe)  # ``await describe(endpoint)`` in the loop; its result here
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Awaitable, Callable, Iterator
from typing import Final, TypeVar

import trio

from gateway.client.session import redacted

from .endpoint import Endpoint, open_endpoint
from .errors import PipelineError
from .options import Connection

T = TypeVar("T")

_STOP_S: Final = 30.0  # a backend closing (fsyncs, goodbyes) is never waited for longer


class Session:
    """A trio loop in a thread, holding one endpoint open from ``open`` to ``close``."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self._endpoint: Endpoint | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._stop: trio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name="streamgate-endpoint", daemon=True)

    @property
    def endpoint(self) -> Endpoint:
        assert self._endpoint is not None, "not open"
        return self._endpoint

    def open(self) -> None:
        self._thread.start()
        self._ready.wait()  # bounded by open_endpoint's own deadlines
        if self._endpoint is None:
            self._thread.join()
            raise self._error or PipelineError(f"{redacted(self.conn.url)}: not reached")

    def close(self) -> None:
        if self._token is not None and self._stop is not None:
            # RunFinished: the loop ended already (the backend failed); its error is kept.
            with contextlib.suppress(trio.RunFinishedError):
                trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
        self._thread.join(_STOP_S)

    def run(self, fn: Callable[[Endpoint], Awaitable[T]]) -> T:
        """``fn(endpoint)`` in the loop; its result, or its exception raised here."""
        endpoint = self.endpoint
        try:
            return trio.from_thread.run(fn, endpoint, trio_token=self._token)
        except trio.RunFinishedError:
            self._thread.join(_STOP_S)
            raise self._error or PipelineError(f"{endpoint.shown} stopped") from None

    def _main(self) -> None:
        try:
            trio.run(self._serve)
        except BaseException as exc:
            self._error = _unwrapped(exc)
        finally:
            self._ready.set()

    async def _serve(self) -> None:
        async with open_endpoint(self.conn) as endpoint:
            self._stop = trio.Event()
            self._token = trio.lowlevel.current_trio_token()
            self._endpoint = endpoint
            self._ready.set()
            await self._stop.wait()


def _unwrapped(exc: BaseException) -> BaseException:
    """The first error inside nested groups: the one the user should read."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


@contextlib.contextmanager
def session(conn: Connection) -> Iterator[Session]:
    """The endpoint of ``conn``, open for the block."""
    s = Session(conn)
    try:
        s.open()
        yield s
    finally:
        s.close()


def call(conn: Connection, fn: Callable[[Endpoint], Awaitable[T]]) -> T:
    """``fn`` on the endpoint of ``conn``, opened for just this call (planning steps)."""
    with session(conn) as s:
        return s.run(fn)


__all__ = ["Session", "call", "session"]
