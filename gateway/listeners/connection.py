"""The generic trio connection pump every protocol listener runs on.

One nursery per connection; one task at a time writes to the socket: the protocol's handler
writes a frame itself while nothing is queued and the socket takes all of it at once, and hands
the writer task the rest through a bounded memory channel, which is the backpressure (a client
that does not read makes its own handler wait, nobody else). Limits: max connections, max frame
size (the codec checks it), idle timeout. A failing connection is logged and closed alone; it
never takes the listener down.

Before a client has logged in (a listener that authenticates says so: ``authenticates``; its
handler calls ``conn.authenticated()`` once a login succeeds) its frames are held to the
handshake's size (``max_preauth_frame_bytes``: the codec refuses a bigger one unread) and the
login must be done within ``auth_timeout_s``, so that an anonymous client cannot make the
gateway buffer 64 MiB frames or hold a connection for ever. A frame, once its first byte is
read, must arrive whole within ``request_timeout_s`` (slowloris: bytes trickled one at a time
do not keep the connection open past it).

On shutdown the listener stops accepting and every connection finishes the request it is
working on, then closes (drain). A request is in flight from its first byte the
gateway has read: one whose frame has begun to arrive is still read to its end and answered.

With TLS (gateway/tls.py) the handshake runs first, bounded in time, and the protocol handler
sees the decrypted stream; a failed handshake, or a TLS ClientHello on a plaintext port, closes
the connection and is counted as ``reason="tls"``.
"""

from __future__ import annotations

import math
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, cast

import structlog
import trio
from prometheus_client import Gauge

from gateway.access_log import AccessLog, Client
from gateway.gathered import (
    WAKE_WHOLE_FROM,
    ExactReads,
    QuickAck,
    WakeWhole,
    WriteThrough,
    read_now,
    unthrottle_sends,
)
from gateway.histograms import Observer
from gateway.listeners.limits import BUFFERED, BUFFERED_FLOOR, Limits
from gateway.metrics import Metrics
from gateway.router import RequestContext
from gateway.tls import TlsError, looks_like_client_hello
from protocols._wire import Gather, Receiver

log = structlog.get_logger("streamgate.session")
_TLS_BATCH_BYTES = 65536  # what one receive hands the codec at most over TLS
_RECEIVE_BYTES = 65536  # one read from the socket, between frames
_RECEIVE_MID_FRAME_BYTES = 1 << 20  # ... and in the middle of one (a big send arrives in fewer)
_RECEIVE_REST_BYTES = 4 << 20  # ... and the rest of a big frame, read to its end (ExactReads)


class IdleTimeout(Exception):
    pass


class AuthTimeout(Exception):
    pass


class RequestTimeout(Exception):
    pass


class MemoryPressure(Exception):
    """The process holds ``max_buffered_bytes`` of frames still arriving (``Buffered``)."""


@dataclass(slots=True)
class Drain:
    """Set once on shutdown: listeners stop accepting, connections finish and close."""

    event: trio.Event = field(default_factory=trio.Event)
    connections: set[Connection] = field(default_factory=set)

    def start(self) -> None:
        self.event.set()
        for conn in list(self.connections):
            conn.drain()

    @property
    def draining(self) -> bool:
        return self.event.is_set()


class RequestMeters:
    """One listener's per-request metric children, looked up once and shared by its connections
    (a label lookup costs about as much as the observation itself)."""

    __slots__ = (
        "_overhead", "_overhead_by_command", "access_log", "inflight", "metrics", "protocol",
    )  # fmt: skip

    def __init__(
        self, metrics: Metrics, protocol: str, access_log: AccessLog | None = None
    ) -> None:
        self.metrics = metrics
        self.protocol = protocol
        self.access_log = access_log
        self.inflight: Gauge = metrics.inflight_requests.labels(protocol)
        self._overhead = metrics.gateway_overhead
        self._overhead_by_command: dict[str, Observer] = {}

    def overhead(self, wire_command: str) -> Observer:
        child = self._overhead_by_command.get(wire_command)
        if child is None:
            child = self._overhead_by_command[wire_command] = self._overhead.labels(
                self.protocol, wire_command
            )
        return child


class Request:
    """The accounting of one wire request, around handling it and sending its answer: the
    in-flight gauge, the ``RequestContext`` the router adds backend time to, and on success the
    gateway's own overhead (elapsed minus that backend time). A request that raises is not
    observed: its connection fails and is counted there.

    A listener that answers some requests by itself (no canonical command runs) names them in
    ``command`` (and ``error_type``): such a request is timed here as that command, and so is
    an ``error_type`` it answered after commands that worked (its own refusal). With an
    access log, the lines of the request's commands wait here for its duration (a request
    that raises still ends them: its commands ran)."""

    __slots__ = ("_meters", "_t0", "command", "ctx", "error_type")

    def __init__(
        self, meters: RequestMeters, wire_command: str, client: Client | None = None
    ) -> None:
        self._meters = meters
        self.ctx = RequestContext(meters.protocol, wire_command, client=client, allowed=set())
        if meters.access_log is not None:
            self.ctx.access_lines = []
        self.command = ""
        self.error_type = ""
        self._t0 = 0.0

    def __enter__(self) -> Request:
        self._meters.inflight.inc()
        self._t0 = time.perf_counter()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        meters = self._meters
        meters.inflight.dec()
        elapsed = time.perf_counter() - self._t0
        ctx = self.ctx
        if meters.access_log is not None:
            name = self.command if exc_type is None else ""
            meters.access_log.request_done(ctx, elapsed, name, self.error_type)
        if exc_type is not None:
            return
        if self.command and ctx.command_s == 0.0:
            meters.metrics.observe_command(
                ctx.protocol, self.command, ctx.wire_command, elapsed, self.error_type
            )
        elif self.error_type and not ctx.errors:
            # Refused by the listener itself after commands that worked (a stream that already
            # exists, a name its catalog does not know): the error a client got is counted,
            # timed as the listener's own share of the request.
            meters.metrics.observe_command(
                ctx.protocol, self.command or ctx.wire_command, ctx.wire_command,
                max(0.0, elapsed - ctx.command_s), self.error_type,
            )  # fmt: skip
        if self.error_type == "forbidden" and not ctx.errors:
            # A permission the listener checked itself (Iggy's and RabbitMQ Stream's finer
            # checks, before any command): counted with the router's refusals.
            meters.metrics.authorization_denied.labels(
                ctx.protocol, self.command or ctx.wire_command
            ).inc()
        meters.overhead(ctx.wire_command).observe(max(0.0, elapsed - ctx.command_s))


class Connection:
    """What a protocol handler sees: bytes in, bytes out through the one writer, a logger, and
    the accounting of each request (``with conn.request(wire_command) as request``)."""

    def __init__(
        self,
        stream: trio.abc.Stream,
        send_channel: trio.MemorySendChannel[bytes | Gather],
        *,
        protocol: str,
        conn_id: int,
        peer: str,
        metrics: Metrics,
        limits: Limits,
        meters: RequestMeters | None = None,
        local: tuple[str, int] | None = None,
        tls_principal: str | None = None,
        secure: bool = False,
        advertised_port: int | None = None,
        authenticated: bool = True,
    ) -> None:
        self.stream = stream
        self.protocol = protocol
        self.conn_id = conn_id
        self.peer = peer
        self.metrics = metrics
        self.limits = limits
        self.log = log.bind(conn_id=conn_id, peer=peer, protocol=protocol)
        self.client = Client(peer)  # whom its access log lines name
        self.local = local  # the listening address the client connected to
        self.secure = secure  # over TLS
        # The user a verified client certificate names (gateway/tls.py, ``principal``).
        self.tls_principal = tls_principal
        # Replaces the listener's advertised port for this connection (0 = the local port):
        # clients of a TLS port beside a plaintext one are sent back to the TLS port.
        self.advertised_port = advertised_port
        self._sniff_tls = not secure  # look once at the first bytes of a plaintext connection
        # trio.SSLStream's ssl.SSLObject (a private attribute: without it, one record per
        # receive, which is only slower).
        self._tls_object: Any = getattr(stream, "_ssl_object", None) if secure else None
        # A big frame's rest in one receive, not one per burst of segments (each a pass through
        # trio's loop).
        self._wake = WakeWhole(stream)
        self._quick_ack = QuickAck(stream)
        unthrottle_sends(stream)  # a big reply in one write
        self._awaited = 0  # what this connection counts in BUFFERED.awaited
        self._reads = ExactReads(
            self._wake.settable, between=_RECEIVE_BYTES, within=_RECEIVE_MID_FRAME_BYTES,
            rest=_RECEIVE_REST_BYTES,
        )  # fmt: skip
        self._send = send_channel
        self.through = WriteThrough(stream)  # (the writer task counts what it wrote of its queue)
        self._bytes_in = metrics.bytes_received.labels(protocol)
        self._bytes_out = metrics.bytes_sent.labels(protocol)
        self._paused = metrics.paused_reads.labels(protocol)
        self._meters = meters if meters is not None else RequestMeters(metrics, protocol)
        self._draining = False
        self._receive_scope: trio.CancelScope | None = None
        self._feeding: Receiver | None = None  # the codec ``feed`` is reading for
        self._authenticated = authenticated
        self._auth_scope: trio.CancelScope | None = None  # the login deadline (``_Server``)
        # The codec whose limit is lowered until the login, and the limit it had.
        self._capped: tuple[Receiver, int] | None = None
        # When the chunk holding the first byte of the frame now arriving was read (None
        # between frames), and the last chunk read (its size, when): see ``feed``.
        self._frame_started: float | None = None
        self._last_chunk = (0, 0.0)
        self._held = 0  # what this connection counts in BUFFERED.total

    @property
    def is_authenticated(self) -> bool:
        return self._authenticated

    def authenticated(self) -> None:
        """The client has logged in: its frames may be as big as ``max_frame_bytes`` from the
        next one on, and the login deadline is off."""
        self._authenticated = True
        if self._capped is not None:
            codec, limit = self._capped
            self._capped = None
            if codec.max_frame_size == self.limits.max_preauth_frame_bytes:  # (not re-tuned)
                codec.max_frame_size = limit
        if self._auth_scope is not None:
            self._auth_scope.deadline = math.inf

    def bind(self, **context: object) -> None:
        """Add context (user, client id) to every later log line of this connection; ``user``
        (the name only) also to its later access log lines."""
        self.log = self.log.bind(**context)
        if "user" in context:
            self.client.user = str(context["user"])

    def request(self, wire_command: str) -> Request:
        """Enter around handling one request AND sending its answer (the overhead covers both);
        the request's ``ctx`` goes to every ``router.execute`` it makes."""
        return Request(self._meters, wire_command, self.client)

    async def receive(self, max_bytes: int = _RECEIVE_BYTES) -> bytes:
        """The next bytes from the client (up to ``max_bytes`` from the socket); b"" at EOF, or
        when the gateway is draining and no request is partly read."""
        if self._draining and not self._mid_request():
            return b""
        idle, request = self.limits.idle_timeout_s, self.limits.request_timeout_s
        now = trio.current_time()
        idle_deadline = now + idle if idle > 0 else math.inf
        started = self._frame_started
        # A frame that has begun to arrive has until its deadline, however its bytes trickle.
        request_deadline = started + request if started is not None and request > 0 else math.inf
        deadline = min(idle_deadline, request_deadline)
        # One scope for both ends of a wait: its deadline (a timeout), or drain() cancelling it.
        with trio.CancelScope(deadline=deadline) as scope:
            self._receive_scope = scope
            data = cast(bytes, await self.stream.receive_some(max_bytes))
        self._receive_scope = None
        if scope.cancelled_caught:
            if self._draining and trio.current_time() < deadline:
                return b""  # cancelled by drain()
            if request_deadline <= idle_deadline:
                raise RequestTimeout(f"a request still arriving after {request} s")
            raise IdleTimeout(f"no request for {idle} s")
        self._last_chunk = (len(data), trio.current_time())
        if self._tls_object is not None and data:
            data = self._more_records(data)
        if self._sniff_tls:
            self._sniff_tls = False
            if looks_like_client_hello(data):
                raise TlsError("TLS ClientHello on a plaintext port")
        self._bytes_in.inc(len(data))
        return data

    def _read_now(self, size: int) -> bytes | None:
        data = read_now(self.stream, size)
        if data:
            self._last_chunk = (len(data), trio.current_time())
            self._bytes_in.inc(len(data))
        return data

    def _more_records(self, data: bytes) -> bytes:
        """Also the TLS records already received from the socket: clients that write a record
        per message (librdkafka) would otherwise cost one pass through trio's SSLStream, and
        through here, per record."""
        chunks, size = [data], len(data)
        ssl_object = self._tls_object
        while size < _TLS_BATCH_BYTES:
            # Whole records already in the incoming buffer decrypt without waiting; what the
            # reads leave to send (a TLS 1.3 key update) goes out with the stream's next write,
            # ahead of it.
            try:
                more = ssl_object.read(_TLS_BATCH_BYTES - size)
            except ssl.SSLError:  # a partial record (want read), EOF, an alert: the stream's
                break  # own next receive deals with it
            if not more:
                break
            chunks.append(more)
            size += len(more)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    async def feed(self, codec: Receiver) -> None:
        """Hand the codec the next bytes from the client, or the EOF (also the drain's way of
        ending a connection between two requests)."""
        if not self._authenticated:
            self._cap(codec)
        # Handlers feed only when the codec needs more (NEED_DATA), so what it holds is the
        # beginning of one frame: none, or part of one that began in the last chunk read (a
        # new one), or in an earlier chunk (the same frame as at the last feed).
        buffered, (last_size, last_at) = codec.buffered, self._last_chunk
        if buffered < self._held:
            self._hold(buffered)  # frames handled since the last read
        if not buffered:
            self._frame_started = None
        else:
            if buffered <= last_size or self._frame_started is None:
                self._frame_started = last_at
            self._quick_ack.now()  # the rest may be held back for the acknowledgement
        self._feeding = codec
        self._await(min(codec.missing, _RECEIVE_REST_BYTES) if buffered else 0)
        size = self._reads.size(codec)
        try:
            # A small rest of a frame (read exactly) has mostly come with its beginning: taken
            # at once when it has, not through trio's loop.
            data = self._read_now(size) if buffered and size < WAKE_WHOLE_FROM else None
            if data is None:
                data = await self.receive(size)
        finally:
            self._feeding = None
            BUFFERED.awaited -= self._awaited
            self._awaited = 0
        if data:
            codec.receive_data(data)
            self._hold(codec.buffered)
        else:
            codec.receive_eof()

    def _await(self, missing: int) -> None:
        """Let the kernel gather the ``missing`` rest of a big frame before the receive wakes,
        while what all connections await that way stays under a quarter of the budget."""
        cap = self.limits.max_buffered_bytes
        if (
            missing >= WAKE_WHOLE_FROM
            and self._wake.settable  # (under TLS the bytes are read as they come)
            and (cap <= 0 or BUFFERED.awaited + missing <= cap // 4)
        ):
            BUFFERED.awaited += missing
            self._awaited = missing
        else:
            missing = 0
        self._wake.expect(missing)

    def _hold(self, buffered: int) -> None:
        grown = buffered - self._held
        BUFFERED.total += grown
        self._held = buffered
        cap = self.limits.max_buffered_bytes
        if grown > 0 and 0 < cap < BUFFERED.total and buffered > BUFFERED_FLOOR:
            raise MemoryPressure(
                f"the gateway holds {BUFFERED.total} bytes of frames still arriving"
                f" (limits.max_buffered_bytes {cap}); this connection {buffered}"
            )

    def release(self) -> None:
        """The connection ended: what it held is no longer held."""
        BUFFERED.total -= self._held
        self._held = 0

    def _cap(self, codec: Receiver) -> None:
        """Hold the codec to the pre-login frame size (again after a handshake step raised it:
        RabbitMQ Stream's Tune comes before Open)."""
        limit = self.limits.max_preauth_frame_bytes
        if 0 < limit < codec.max_frame_size:
            self._capped = (codec, codec.max_frame_size)
            codec.max_frame_size = limit
        elif codec.max_frame_size < limit:
            self._capped = None  # tuned below the cap: that limit stays

    async def send(self, data: bytes | Gather) -> None:
        """Send a frame (bytes, or a Gather of pieces): written here and now when nothing is
        queued and the socket takes it (``WriteThrough``), else queued, what is left of it,
        for the writer; waits (pausing this connection) when the queue is full."""
        size = data.nbytes if isinstance(data, Gather) else len(data)
        if not size:
            return
        self._bytes_out.inc(size)
        rest = self.through.write(data)
        if rest is None:
            if self.through.yield_due():
                await trio.lowlevel.checkpoint()
            return
        if self._send.statistics().current_buffer_used >= self.limits.send_queue_frames:
            self._paused.inc()
        self.through.queued += 1  # (from now on, frames sent go behind this one)
        try:
            await self._send.send(rest)
        except BaseException:
            self.through.queued -= 1  # (not queued: trio's channels send all or nothing)
            raise

    def drain(self) -> None:
        """Stop at the next request boundary: a connection waiting for a request ends now, one
        in the middle of a request's frame reads it to the end first (the listener's
        drain_timeout_s bounds that, as it bounds the answer)."""
        self._draining = True
        if self._receive_scope is not None and not self._mid_request():
            self._receive_scope.cancel()

    def _mid_request(self) -> bool:
        """Whether the codec being fed holds part of a frame."""
        return self._feeding is not None and self._feeding.buffered > 0


Handler = Callable[[Connection], Awaitable[None]]


def advertised_address(
    conn: Connection, host: str, port: int, default_port: int
) -> tuple[str, int]:
    """What discovery answers carry: the configured address, else where the client connected
    (the port of the listener it came in through: a TLS client is sent back to TLS)."""
    if conn.advertised_port is not None:
        port = conn.advertised_port
    if not host or not port:
        if conn.local is not None:
            host, port = host or conn.local[0], port or conn.local[1]
        else:
            host, port = host or "127.0.0.1", port or default_port
    return host, port


__all__ = [
    "AuthTimeout", "Connection", "Drain", "Handler", "IdleTimeout", "Limits", "Request",
    "RequestMeters", "RequestTimeout", "advertised_address",
]  # fmt: skip
