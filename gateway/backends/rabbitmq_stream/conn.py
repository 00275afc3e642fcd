"""One connection to RabbitMQ's stream port, on the client role of ``protocols.rabbitmq_stream``
(rabbitmq-stream.md §5, §7, §12).

``rabbitmq_stream_handshake.connect`` opens one; ``Connection.serve`` then runs three tasks
until the connection ends: the reader, which decodes every frame and dispatches it without ever
waiting (responses to their ``Call``, Deliver to its subscriber, PublishConfirm/PublishError to
their publisher, MetadataUpdate and Close); the one writer, which sends what the ``Outbox``
holds (Credit top-ups first, batched); and the heartbeat, which sends our Heartbeat every
interval and drops a broker it has heard nothing from for 2.5 intervals (§7: RabbitMQ
heartbeats every interval when idle, so silence means it is gone).

The reader never blocks on sending: a full socket on both sides would otherwise deadlock (the
broker blocks in sendfile while we wait to write). Control frames and credits are queued
without waiting; only data (Publish) waits for room in the outbox.

Every request is bounded in real time (``request_timeout_s``, by the backend's ``Watchdog``: a
bound guards against a broker that does not answer, whatever the run's clock says); when the
connection ends, every waiting call, subscriber and publisher is failed with
``BackendUnavailable`` (retriable).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import AsyncIterator, Callable
from collections.abc import Set as AbstractSet
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Final, Protocol

import structlog
import trio

from gateway.backends.tls import TlsClient
from gateway.backends.watchdog import Watchdog
from gateway.gathered import ExactReads, coalesced, send_gathered, socket_of
from gateway.model import BackendUnavailable, GatewayError, Timeout
from gateway.translate.rabbitmq_stream.errors import code_name, error_of
from protocols import rabbitmq_stream as rs
from protocols._wire import Piece, RemoteProtocolError
from protocols.rabbitmq_stream import ResponseCode
from protocols.rabbitmq_stream.chunk import DeliveredChunk

log = structlog.get_logger("streamgate.backend.rabbitmq_stream")

RECEIVE_LIMIT: Final = 64 << 20  # largest frame accepted from the broker (a Deliver of big chunks)
OUTBOX_LIMIT: Final = 4 << 20  # queued bytes above which publishers wait for the writer
READ_SIZE: Final = 1 << 20
READ_REST: Final = 4 << 20  # at most, a big Deliver's rest read to its end (ExactReads)
DEAD_INTERVALS: Final = 2.5  # heartbeat intervals of silence before the broker counts as gone
MAX_IDS: Final = 256  # publisher and subscription ids are uint8 (§12)


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    host: str
    port: int
    username: str
    password: str
    vhost: str = "/"
    frame_max: int = rs.DEFAULT_MAX_FRAME_SIZE
    heartbeat_s: int = 60
    connect_timeout_s: float = 10.0
    request_timeout_s: float = 10.0
    tls: TlsClient | None = None  # TLS to the broker (backends.tls)


class Subscriber(Protocol):
    """Receives one subscription's chunks (called by the reader: must not block)."""

    stream: str

    def deliver(self, chunk: DeliveredChunk) -> None: ...
    def closed(self, why: GatewayError) -> None: ...


class PublishSink(Protocol):
    stream: str

    def confirmed(self, ids: tuple[int, ...]) -> None: ...
    def failed(self, errors: tuple[rs.PublishingError, ...]) -> None: ...
    def closed(self, why: GatewayError) -> None: ...


def check(reply: rs.Frame, what: str, *ok: int) -> rs.Frame:
    """``reply`` if its code is OK (or one of ``ok``), else its canonical failure."""
    code = getattr(reply, "code", ResponseCode.OK)
    if code != ResponseCode.OK and code not in ok:
        raise error_of(code, what)
    return reply


class ConnectionLost(Exception):
    pass


def _lost(why: str) -> BackendUnavailable:
    return BackendUnavailable(f"connection to RabbitMQ lost: {why}")


class Outbox:
    """What the writer sends next: frames in order, and Credit top-ups (sent first, merged)."""

    def __init__(self, codec: rs.RabbitStreamClientCodec, limit: int = OUTBOX_LIMIT) -> None:
        self._codec = codec
        self._limit = limit
        self._parts: list[Piece] = []
        self._size = 0
        self._credits: dict[int, int] = {}
        self._ready = trio.Event()
        self._room = trio.Event()

    def put_nowait(self, *pieces: Piece) -> None:
        """One frame (in pieces: sent one after the other, nothing between them)."""
        self._parts += pieces
        self._size += sum(map(len, pieces))
        self._ready.set()

    async def put(self, *pieces: Piece) -> None:
        while self._size > self._limit:
            if self._room.is_set():
                self._room = trio.Event()
            await self._room.wait()
        self.put_nowait(*pieces)

    def credit(self, subscription_id: int, credit: int) -> None:
        self._credits[subscription_id] = self._credits.get(subscription_id, 0) + credit
        self._ready.set()

    async def take(self) -> list[Piece]:
        while not self._parts and not self._credits:
            if self._ready.is_set():
                self._ready = trio.Event()
            await self._ready.wait()
        parts: list[Piece] = [
            self._codec.send(rs.Credit(subscription_id=sid, credit=min(n, 0x7FFF)))
            for sid, n in self._credits.items()
        ]
        parts += self._parts
        self._parts, self._size, self._credits = [], 0, {}
        self._room.set()
        return parts


class Call:
    """A request on its way; ``result`` waits (bounded) for the response."""

    def __init__(self, conn: Connection, correlation_id: int) -> None:
        self._conn = conn
        self.correlation_id = correlation_id
        self._done = trio.Event()
        self._reply: rs.Frame | None = None
        self._error: GatewayError | None = None

    def resolve(self, reply: rs.Frame) -> None:
        self._reply = reply
        self._done.set()

    def fail(self, error: GatewayError) -> None:
        self._error = error
        self._done.set()

    async def result(self) -> rs.Frame:
        try:
            with self._conn.watchdog.bound(self._conn.settings.request_timeout_s):
                await self._done.wait()
        finally:
            self._conn.forget(self.correlation_id)
        if self._error is not None:
            raise self._error
        if self._reply is None:
            raise Timeout(
                f"RabbitMQ did not answer within {self._conn.settings.request_timeout_s} s"
            )
        return self._reply


class Connection:
    def __init__(
        self,
        stream: trio.abc.Stream,
        codec: rs.RabbitStreamClientCodec,
        settings: Settings,
        tune: rs.Tune,
        server: dict[str, str],
        watchdog: Watchdog,
    ) -> None:
        self.settings = settings
        self.watchdog = watchdog  # bounds in real time (see rabbitmq_stream_link)
        self.tune = tune  # what we answered: the frame_max and heartbeat in force
        self.server = server  # the broker's PeerProperties (product, version...)
        self._stream = stream
        self._codec = codec
        self.outbox = Outbox(codec)
        self._correlation = itertools.count(10)
        self._calls: dict[int, Call] = {}
        self._subscribers: dict[int, Subscriber] = {}
        self._publishers: dict[int, PublishSink] = {}
        self._draining: set[int] = set()  # unsubscribed, id free once the broker answered
        self._nursery: trio.Nursery | None = None
        self._last_received = time.monotonic()
        self._error: GatewayError | None = None
        self.closed = trio.Event()

    @property
    def alive(self) -> bool:
        return self._error is None and not self.closed.is_set()

    @property
    def frame_max(self) -> int:
        return self.tune.frame_max or RECEIVE_LIMIT

    # --- requests ----------------------------------------------------------------------------

    def start(self, make: Callable[[int], rs.Request]) -> Call:
        """Send a request now (its correlation id given to ``make``); await ``result()``."""
        self._check()
        corr = next(self._correlation) & 0xFFFF_FFFF
        call = Call(self, corr)
        self._calls[corr] = call
        self.outbox.put_nowait(self._codec.send(make(corr)))
        return call

    async def call(self, make: Callable[[int], rs.Request]) -> rs.Frame:
        return await self.start(make).result()

    def forget(self, correlation_id: int) -> None:
        self._calls.pop(correlation_id, None)

    def send_nowait(self, frame: rs.Frame) -> None:
        self._check()
        self.outbox.put_nowait(self._codec.send(frame))

    async def send_encoded(self, *pieces: Piece) -> None:
        """A whole data frame, encoded (maybe in pieces): waits while the outbox is full."""
        self._check()
        await self.outbox.put(*pieces)
        self._check()

    def _check(self) -> None:
        if self._error is not None:
            raise self._error
        if self.closed.is_set():
            raise _lost("closed")

    # --- subscriptions and publishers ----------------------------------------------------------

    def add_subscriber(self, sub: Subscriber) -> int:
        self._check()
        sid = _free_id(self._subscribers.keys() | self._draining)
        self._subscribers[sid] = sub
        return sid

    def remove_subscriber(self, sid: int) -> None:
        """Unsubscribe (in the background); the id is reused once the broker answered."""
        if self._subscribers.pop(sid, None) is None or not self.alive:
            return
        self._draining.add(sid)
        assert self._nursery is not None
        self._nursery.start_soon(self._unsubscribe, sid)

    async def _unsubscribe(self, sid: int) -> None:
        try:
            await self.call(lambda c: rs.Unsubscribe(correlation_id=c, subscription_id=sid))
        except GatewayError as exc:
            log.debug("unsubscribe failed", subscription=sid, error=exc.message)
        self._draining.discard(sid)

    def add_publisher(self, sink: PublishSink) -> int:
        self._check()
        pid = _free_id(self._publishers.keys())
        self._publishers[pid] = sink
        return pid

    def remove_publisher(self, pid: int, *, delete: bool = True) -> None:
        if self._publishers.pop(pid, None) is None or not delete or not self.alive:
            return
        self.send_nowait(rs.DeletePublisher(correlation_id=0, publisher_id=pid))

    # --- running -----------------------------------------------------------------------------

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the reader, writer and heartbeat until the connection ends (or is cancelled);
        then fail whatever still waits on it."""
        why = "closed"
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._reader)
                nursery.start_soon(self._writer)
                nursery.start_soon(self._heartbeats)
                task_status.started()
        except* (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as group:
            why = f"socket error: {group.exceptions[0]}"
        except* RemoteProtocolError as group:
            why = f"protocol error: {group.exceptions[0]}"
        except* ConnectionLost as group:
            why = str(group.exceptions[0])
        finally:
            self._shutdown(_lost(why))
            with trio.CancelScope(shield=True):
                await trio.aclose_forcefully(self._stream)
        log.info("RabbitMQ connection ended", reason=why)

    def close(self) -> None:
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel()

    def _shutdown(self, error: GatewayError) -> None:
        if self._error is None:
            self._error = error
        calls, self._calls = list(self._calls.values()), {}
        subs, self._subscribers = list(self._subscribers.values()), {}
        pubs, self._publishers = list(self._publishers.values()), {}
        for call in calls:
            call.fail(error)
        for sub in subs:
            sub.closed(error)
        for pub in pubs:
            pub.closed(error)
        self.closed.set()

    async def _reader(self) -> None:
        codec = self._codec
        # A big Deliver read to its end, not joined (ExactReads). No receive low-water mark
        # here: RabbitMQ sends a chunk with sendfile in pieces, and a reader waiting for all of
        # it cost RabbitMQ more per message consumed (0.60 against 0.52 us at 1 KiB, medians of
        # 6 runs) and the gateway no less.
        plain = socket_of(self._stream) is not None
        reads = ExactReads(plain, between=READ_SIZE, within=READ_SIZE, rest=READ_REST)
        while True:
            frame = codec.next_frame()
            if frame is rs.NEED_DATA:
                data = await self._stream.receive_some(reads.size(codec))
                if data:
                    codec.receive_data(bytes(data))  # a no-op on bytes; TLS may give bytearray
                else:
                    codec.receive_eof()
                continue
            if frame is rs.CONNECTION_CLOSED:
                raise ConnectionLost("the broker closed the connection")
            assert isinstance(frame, rs.Frame)
            self._last_received = time.monotonic()
            self._dispatch(frame)

    async def _writer(self) -> None:
        # A plain socket takes the pieces in one gathering write (a Publish frame's items as
        # the client sent them are not copied into one); TLS is given them joined.
        sock = socket_of(self._stream)
        while True:
            parts = await self.outbox.take()
            if len(parts) == 1:
                await self._stream.send_all(parts[0])
            elif sock is not None:
                await send_gathered(sock, coalesced(parts))
            else:
                await self._stream.send_all(b"".join(parts))

    async def _heartbeats(self) -> None:
        interval = self.tune.heartbeat
        if interval <= 0:
            return
        sent = time.monotonic()
        while True:  # in real time: a virtual clock must not make the broker look dead
            await trio.sleep(min(interval, 1.0))
            now = time.monotonic()
            if now - sent >= interval:
                self.outbox.put_nowait(self._codec.send(rs.Heartbeat()))
                sent = now
            silent = now - self._last_received
            if silent > DEAD_INTERVALS * interval:
                raise ConnectionLost(f"no frame from the broker for {silent:.1f} s")

    def _dispatch(self, frame: rs.Frame) -> None:
        if isinstance(frame, rs.Deliver):
            sub = self._subscribers.get(frame.subscription_id)
            if sub is not None:
                sub.deliver(frame.chunk)
        elif isinstance(frame, rs.PublishConfirm):
            sink = self._publishers.get(frame.publisher_id)
            if sink is not None:
                sink.confirmed(frame.publishing_ids)
        elif isinstance(frame, rs.PublishError):
            sink = self._publishers.get(frame.publisher_id)
            if sink is not None:
                sink.failed(frame.errors)
        elif isinstance(frame, rs.MetadataUpdate):
            self._stream_gone(frame.stream, frame.code)
        elif isinstance(frame, rs.Close):
            # The broker ends the connection (§5): answer, then it closes the socket.
            log.warning("RabbitMQ closes the connection", code=code_name(frame.code),
                        reason=frame.reason)  # fmt: skip
            self._error = _lost(f"closed by the broker ({frame.reason})")
            self.outbox.put_nowait(
                self._codec.send(
                    rs.CloseResponse(correlation_id=frame.correlation_id, code=ResponseCode.OK)
                )
            )
        elif isinstance(frame, rs.CreditResponse):
            log.warning("credit refused", subscription=frame.subscription_id,
                        code=code_name(frame.code))  # fmt: skip
        elif isinstance(frame, rs.CodeResponse | rs.MetadataResponse):
            call = self._calls.pop(frame.correlation_id, None)
            if call is not None:
                call.resolve(frame)
        # Heartbeat, Tune: nothing to do (any frame counts as traffic).

    def _stream_gone(self, stream: str, code: int) -> None:
        """MetadataUpdate (§5): the broker dropped this connection's publishers and subscribers
        of ``stream`` (deleted, or its leader went away)."""
        error = error_of(code, f"stream {stream!r} is gone")
        for sid, sub in list(self._subscribers.items()):
            if sub.stream == stream:
                del self._subscribers[sid]
                sub.closed(error)
        for pid, pub in list(self._publishers.items()):
            if pub.stream == stream:
                del self._publishers[pid]
                pub.closed(error)


@asynccontextmanager
async def gathering() -> AsyncIterator[trio.Nursery]:
    """A nursery for requests made side by side; a failure comes out as the first
    ``GatewayError`` among them rather than an ExceptionGroup (callers expect GatewayErrors)."""
    try:
        async with trio.open_nursery() as nursery:
            yield nursery
    except BaseExceptionGroup as group:
        first = _first_gateway_error(group)
        if first is None:
            raise
        raise first from None


def _first_gateway_error(group: BaseExceptionGroup[BaseException]) -> GatewayError | None:
    for exc in group.exceptions:
        if isinstance(exc, GatewayError):
            return exc
        if isinstance(exc, BaseExceptionGroup):
            found = _first_gateway_error(exc)
            if found is not None:
                return found
    return None


def _free_id(taken: AbstractSet[int]) -> int:
    for i in range(MAX_IDS):
        if i not in taken:
            return i
    raise BackendUnavailable("no free RabbitMQ publisher/subscription id on the connection")


__all__ = [
    "Call",
    "Connection",
    "PublishSink",
    "Settings",
    "Subscriber",
    "check",
    "gathering",
]
