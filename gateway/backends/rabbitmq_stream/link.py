"""The backend's link to RabbitMQ: one connection at a time, reopened with backoff after the
broker goes away (rabbitmq-stream.md §1.2: a restart takes 3-5 s).

Commands ask ``Link.connection()`` for the live connection and wait for one at most
``connect_wait_s``; meanwhile they fail with ``BackendUnavailable`` (retriable), and ``ping`` fails
so that ``/readyz`` turns false. After a restart a stream answers STREAM_NOT_AVAILABLE, or
Metadata shows no leader, for a moment (tests/helpers/rabbitmq_server.py observed 0.2-0.5 s):
``Link.retry`` retries idempotent requests through that, within a bound.

Every bound on the broker is kept in real time by one ``Watchdog`` (the Iggy and Kafka backends'
own): what it guards against is a broker that does not answer, whatever the run's clock says,
so trio's autojump test clock cannot fire it while RabbitMQ works in another process.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Final, TypeVar

import structlog
import trio

from gateway.backends.base import Retries
from gateway.backends.rabbitmq_stream.conn import Connection, Settings
from gateway.backends.rabbitmq_stream.handshake import connect
from gateway.backends.watchdog import Watchdog
from gateway.model import BackendUnavailable

log = structlog.get_logger("streamgate.backend.rabbitmq_stream")

T = TypeVar("T")

MIN_BACKOFF_S: Final = 0.1
MAX_BACKOFF_S: Final = 2.0
STABLE_S: Final = 10.0  # a connection that lived this long resets the backoff
RETRY_LIMIT_S: Final = 10.0  # STREAM_NOT_AVAILABLE after a restart: retried this long


class Link:
    def __init__(
        self,
        settings: Settings,
        watchdog: Watchdog,
        *,
        name: str = "streamgate",
        connect_wait_s: float = 2.0,
        on_connect: Callable[[Connection], Awaitable[None]] | None = None,
    ) -> None:
        self.settings = settings
        self.watchdog = watchdog
        self.name = name  # the connection_name RabbitMQ shows
        self.connect_wait_s = connect_wait_s
        self.on_connect = on_connect
        self.conn: Connection | None = None
        self.generation = 0  # bumped on every new connection
        self.last_error = "not connected yet"
        self.retries = Retries()  # the backend's, once it hands it over
        self._connected = trio.Event()

    @property
    def address(self) -> str:
        return f"{self.settings.host}:{self.settings.port}"

    def current(self) -> Connection:
        """The live connection now, without waiting."""
        conn = self.conn
        if conn is None or not conn.alive:
            raise BackendUnavailable(f"RabbitMQ at {self.address} unreachable: {self.last_error}")
        return conn

    async def connection(self) -> Connection:
        """The live connection, waiting at most ``connect_wait_s`` for one."""
        conn = self.conn
        if conn is not None and conn.alive:
            return conn
        with self.watchdog.bound(self.connect_wait_s):
            while True:
                conn = self.conn
                if conn is not None and conn.alive:
                    return conn
                if self._connected.is_set():  # ending: the loop below notices in a moment
                    await trio.sleep(0.01)
                else:
                    await self._connected.wait()
        return self.current()  # raises with the reason

    async def retry(self, op: Callable[[], Awaitable[T]], *, limit_s: float = RETRY_LIMIT_S) -> T:
        """``op()``, again while it fails with ``BackendUnavailable`` although the connection
        lives (a stream without a leader for a moment after a restart), for at most
        ``limit_s``. Only for requests that may be repeated: never a Publish. With the broker
        unreachable it fails at once: commands fail fast while the link reconnects."""
        deadline = time.monotonic() + limit_s
        delay = 0.05
        while True:
            try:
                return await op()
            except BackendUnavailable:
                conn = self.conn
                if conn is None or not conn.alive or time.monotonic() + delay > deadline:
                    raise
            self.retries("request")
            await trio.sleep(delay)
            delay = min(delay * 2, 1.0)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Connect, serve, reconnect with backoff; forever (until cancelled)."""
        task_status.started()
        backoff = MIN_BACKOFF_S
        first = True
        while True:
            if not first:
                self.retries("reconnect")
            first = False
            try:
                conn = await connect(self.settings, self.watchdog, self.name)
            except BackendUnavailable as exc:
                self.last_error = exc.message
                log.info("RabbitMQ unreachable", address=self.address, error=exc.message,
                         retry_in_s=backoff)  # fmt: skip
                await trio.sleep(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_S)
                continue
            except Exception as exc:  # wrong credentials, no such vhost: keep trying, loudly
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.error("RabbitMQ refused the connection", address=self.address,
                          error=self.last_error)  # fmt: skip
                await trio.sleep(MAX_BACKOFF_S)
                continue
            began = time.monotonic()
            try:
                async with trio.open_nursery() as nursery:
                    await nursery.start(conn.serve)
                    self.conn = conn
                    self.generation += 1
                    self._connected.set()
                    if self.on_connect is not None:
                        nursery.start_soon(self._hook, conn)
                    await conn.closed.wait()
                    self.last_error = "connection lost"
                    nursery.cancel_scope.cancel()
            except Exception:  # a bug must not end the backend: log, reconnect
                log.exception("RabbitMQ connection failed unexpectedly")
                self.last_error = "connection failed"
                await trio.sleep(MAX_BACKOFF_S)
            finally:
                self.conn = None
                self._connected = trio.Event()
            if time.monotonic() - began > STABLE_S:
                backoff = MIN_BACKOFF_S  # it served a while: try again at once
            else:  # it ended at once (the broker closing it): no busy loop
                await trio.sleep(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_S)

    async def _hook(self, conn: Connection) -> None:
        assert self.on_connect is not None
        try:
            await self.on_connect(conn)
        except Exception:
            log.exception("RabbitMQ connection set-up failed")
            conn.close()


__all__ = ["Link"]
