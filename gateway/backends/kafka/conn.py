"""Connections of the Kafka backend: the client role of ``protocols.kafka`` over trio streams.

A ``BrokerConnection`` is one TCP (or TLS, ``backends.tls``) connection driven by
``KafkaClientCodec``. Requests are written under a lock and may be pipelined; one reader task
(in the backend's nursery) decodes every response and hands it to the request waiting on its
correlation id. A broker works through a connection's requests in order (Tansu too: a long-poll
Fetch holds back everything queued behind it, kafka.md §5), so a ``BrokerPool`` keeps one shared
connection for short requests and leases connections of their own to long polls and to requests
that may make a broker drop the connection.

Every wait is bounded in real time by the backend's ``Watchdog`` (what a bound guards against is
a broker that does not answer, whatever the run's clock says): the connect, each write
(shielded, so a cancelled caller never leaves half a frame on the wire) and each answer. A
request whose caller is cancelled is abandoned: its answer is read and dropped, and the
connection stays usable.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Final

import trio

from gateway.backends.tls import TlsClient
from gateway.backends.watchdog import Watchdog
from gateway.gathered import QuickAck, unthrottle_sends
from gateway.model import BackendUnavailable, GatewayError, Timeout
from protocols._wire import CONNECTION_CLOSED, NEED_DATA, ProtocolError
from protocols.kafka.framing import KafkaClientCodec

MAX_IDLE_LEASES: Final = 8
_RECEIVE_BYTES: Final = 1 << 16


@dataclass(slots=True)
class _Pending:
    done: trio.Event = field(default_factory=trio.Event)
    response: Any = None
    error: GatewayError | None = None


class BrokerConnection:
    def __init__(
        self, stream: trio.abc.Stream, codec: KafkaClientCodec, label: str, watchdog: Watchdog
    ) -> None:
        self.label = label
        self._watchdog = watchdog
        self._stream = stream
        self._codec = codec
        self._quick_ack = QuickAck(stream)  # for a broker that leaves Nagle's algorithm on
        self._pending: dict[int, _Pending] = {}
        self._abandoned: set[int] = set()
        self._send_lock = trio.StrictFIFOLock()
        self._reader = trio.CancelScope()
        self.closed = False
        self.why = ""

    @property
    def busy(self) -> bool:
        """Requests (answered or abandoned) are still owed an answer on this connection."""
        return bool(self._pending or self._abandoned)

    async def serve(self) -> None:
        """The reader task: decode answers until EOF, an error or ``close``; then fail the rest."""
        why = "closed"
        try:
            with self._reader:
                why = await self._read_loop()
        finally:
            self._fail(self.why or why)
            await trio.aclose_forcefully(self._stream)

    async def _read_loop(self) -> str:
        codec = self._codec
        while True:
            try:
                response = codec.next_response()
                if response is NEED_DATA:
                    if codec.buffered:
                        self._quick_ack.now()  # its tail may wait for the acknowledgement
                    data = await self._stream.receive_some(_RECEIVE_BYTES)
                    if data:
                        codec.receive_data(bytes(data))
                    else:
                        codec.receive_eof()
                    continue
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                return f"{self.label}: connection lost ({exc.__class__.__name__}: {exc})"
            except ProtocolError as exc:
                return f"{self.label}: unreadable answer ({exc})"
            if response is CONNECTION_CLOSED:
                return f"{self.label}: the broker closed the connection"
            waiter = self._pending.pop(response.correlation_id, None)
            if waiter is None:
                self._abandoned.discard(response.correlation_id)
                continue
            waiter.response = response.body
            waiter.done.set()

    def _fail(self, why: str) -> None:
        self.closed = True
        self.why = why
        pending, self._pending = self._pending, {}
        self._abandoned.clear()
        for waiter in pending.values():
            waiter.error = BackendUnavailable(why)
            waiter.done.set()

    def close(self, why: str) -> None:
        if not self.closed:
            self.why = why
            self._reader.cancel()
            self._fail(why)

    async def request(self, body: Any, *, timeout_s: float) -> Any:
        """Send a kio request object, wait for its answer (the kio response object)."""
        if self.closed:
            raise BackendUnavailable(self.why)
        correlation_id, data = self._codec.send(body)
        waiter = self._pending[correlation_id] = _Pending()
        with trio.CancelScope(shield=True):
            with self._watchdog.bound(timeout_s) as sending:
                try:
                    async with self._send_lock:
                        await self._stream.send_all(data)
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                    self.close(f"{self.label}: connection lost ({exc.__class__.__name__})")
            if sending.cancelled_caught:
                self.close(f"{self.label}: a request could not be written in {timeout_s:g} s")
        try:
            with self._watchdog.bound(timeout_s) as waiting:
                await waiter.done.wait()
        except trio.Cancelled:
            if self._pending.pop(correlation_id, None) is not None:
                self._abandoned.add(correlation_id)
            raise
        if waiting.cancelled_caught:
            self.close(f"{self.label}: no answer within {timeout_s:g} s")
            raise Timeout(f"{self.label}: no answer within {timeout_s:g} s")
        if waiter.error is not None:
            raise waiter.error
        return waiter.response


Opener = Callable[[], Awaitable[BrokerConnection]]


async def open_connection(
    nursery: trio.Nursery,
    watchdog: Watchdog,
    host: str,
    port: int,
    *,
    client_id: str,
    max_frame_bytes: int,
    timeout_s: float,
    tls: TlsClient | None = None,
) -> BrokerConnection:
    """A connection to ``host:port``, TLS hand-shaken when ``tls`` is given; the connect and the
    handshake together within ``timeout_s``."""
    label = f"kafka broker {host}:{port}"
    stream: trio.abc.Stream | None = None
    try:
        with watchdog.bound(timeout_s) as scope:
            tcp = await trio.open_tcp_stream(host, port)
            unthrottle_sends(tcp)  # a big Produce in one write
            try:
                stream = tcp if tls is None else await tls.wrap(tcp, host, port)
            finally:
                if stream is None:
                    await trio.aclose_forcefully(tcp)
    except OSError as exc:
        raise BackendUnavailable(f"{label}: cannot connect ({exc})") from None
    if scope.cancelled_caught or stream is None:
        raise BackendUnavailable(f"{label}: no connection within {timeout_s:g} s")
    conn = BrokerConnection(stream, KafkaClientCodec(client_id, max_frame_bytes), label, watchdog)
    nursery.start_soon(conn.serve)
    return conn


class BrokerPool:
    """One broker's connections: a shared, pipelined one and leased ones (exclusive use)."""

    def __init__(self, opener: Opener) -> None:
        self._open = opener
        self._shared: BrokerConnection | None = None
        self._idle: list[BrokerConnection] = []
        self._lock = trio.Lock()

    async def shared(self) -> BrokerConnection:
        conn = self._shared
        if conn is not None and not conn.closed:
            return conn
        async with self._lock:
            if self._shared is None or self._shared.closed:
                self._shared = await self._open()
            return self._shared

    @asynccontextmanager
    async def lease(self) -> AsyncIterator[BrokerConnection]:
        self._idle = [c for c in self._idle if not c.closed]
        conn = next((c for c in self._idle if not c.busy), None)
        if conn is None:
            conn = await self._open()
        else:
            self._idle.remove(conn)
        try:
            yield conn
        finally:
            # An abandoned long poll leaves the connection busy until its answer is read; it
            # waits among the idle ones until then.
            if conn.closed:
                pass
            elif len(self._idle) < MAX_IDLE_LEASES:
                self._idle.append(conn)
            else:
                conn.close("more idle connections than the pool keeps")

    def close(self, why: str) -> None:
        for conn in (self._shared, *self._idle):
            if conn is not None:
                conn.close(why)
        self._shared = None
        self._idle = []


__all__ = ["BrokerConnection", "BrokerPool", "open_connection"]
