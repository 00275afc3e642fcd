"""RabbitMQ Stream listener (default port 5552): the server side of the RabbitMQ Stream protocol
(rabbitmq-stream.md) on the canonical model.

The connection goes through the server's states (§7): PeerProperties, SaslHandshake and
SaslAuthenticate (PLAIN, users of the gateway's user store), the gateway's Tune and the client's
answer, Open of a virtual host (= a canonical stream, ``/`` = ``default``). Before Open only those
frames (and Heartbeat, Close) are taken; anything else, or a frame that cannot be decoded, closes
the socket without a word, as the real server does. After Open an unknown or undecodable frame is
answered with ``Close(code)`` (0x0d unknown frame...) and the connection ends when the client
answers or after a grace period; a frame over the negotiated frame_max gets ``Close(0x0e)``.

Frames are handled in arrival order by the reading task (a publisher's entries are appended in
the order sent); every subscription delivers from a task of its own, bounded by its credit, and a
heartbeat task sends a Heartbeat each interval and drops a client silent for three of them.
"""

from __future__ import annotations

import contextlib
import enum
import itertools
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import structlog
import trio

from gateway.coordination import UserStore
from gateway.coordination.permissions import Action
from gateway.coordination.user_records import User, allowed
from gateway.listeners import (
    rabbitmq_stream_consume,
    rabbitmq_stream_publish,
    rabbitmq_stream_streams,
)
from gateway.listeners.rabbitmq_stream_catalog import Catalog
from gateway.listeners.rabbitmq_stream_sac import ActiveConsumers
from gateway.listeners.session import Connection, Handler, IdleTimeout, advertised_address
from gateway.model import (
    CreateStream,
    Forbidden,
    GatewayError,
    InvalidCredentials,
    ListStreams,
    StreamExists,
    Unauthorized,
    UnknownUser,
)
from gateway.router import RequestContext, Router
from gateway.translate import rabbitmq_stream as tr
from protocols import rabbitmq_stream as rs
from protocols._wire import NEED_DATA, FrameTooLarge, RemoteProtocolError
from protocols.rabbitmq_stream import Key, ResponseCode

if TYPE_CHECKING:
    from gateway.listeners.rabbitmq_stream_consume import Subscription
    from gateway.listeners.rabbitmq_stream_publish import Publisher

log = structlog.get_logger("streamgate.rabbitmq_stream")

MECHANISMS = ("PLAIN",)
CLOSE_GRACE_S = 5.0  # how long a Close waits for the client's CloseResponse


@dataclass(frozen=True, slots=True, kw_only=True)
class RabbitStreamSettings:
    advertised_host: str = ""  # "" = the address the client connected to
    advertised_port: int = 0
    frame_max: int = 1_048_576  # proposed in Tune; the client may ask for less (0 = ours)
    heartbeat_s: int = 60  # proposed in Tune; the client decides (0 = none)
    max_frame_bytes: int = 64 << 20  # before Tune, and when the client asks for "unlimited"
    default_user: str = "guest"  # created in the user store when missing ("" = none)
    default_password: str = "guest"
    default_user_loopback_only: bool = True  # RabbitMQ's loopback_users
    cluster_name: str = "streamgate"
    # What PeerProperties says: clients pick features by the server version (the Java client
    # sends ExchangeCommandVersions from 3.11 on); this is the RabbitMQ level implemented.
    server_version: str = "3.13.7"


class State(enum.IntEnum):
    CONNECTED = 0
    AUTHENTICATED = 1  # Tune sent
    TUNED = 2
    OPEN = 3


class Closed(Exception):
    """The connection ends normally (Close exchanged, or the client asked)."""


@dataclass(slots=True, eq=False)
class Session:
    """What one connection's handlers share."""

    service: RabbitStreamService
    conn: Connection
    codec: rs.RabbitStreamServerCodec
    nursery: trio.Nursery
    host: str
    port: int
    state: State = State.CONNECTED
    user: User | None = None
    vhost: str = ""
    stream: str = ""  # the canonical stream of the virtual host
    stream_id: int | None = None
    heartbeat_s: int = 0
    deliver_v2: bool = False
    closing: bool = False
    last_received: float = field(default_factory=time.monotonic)
    publishers: dict[int, Publisher] = field(default_factory=dict)
    subscriptions: dict[int, Subscription] = field(default_factory=dict)
    pending: dict[int, trio.MemorySendChannel[rs.ConsumerUpdateResponse]] = field(
        default_factory=dict
    )
    ctx: RequestContext = field(default_factory=lambda: RequestContext(tr.PROTOCOL, ""))
    _correlation: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    @property
    def router(self) -> Router:
        return self.service.router

    @property
    def catalog(self) -> Catalog:
        return self.service.catalog

    def next_correlation(self) -> int:
        return next(self._correlation) & 0xFFFFFFFF

    async def send(self, frame: rs.Frame) -> None:
        await self.conn.send(self.codec.send(frame))

    def spawn(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> None:
        """Run ``fn`` in this connection's nursery (from any task, e.g. another connection's);
        nothing happens once the connection is closing."""
        if self.closing:
            return
        with contextlib.suppress(RuntimeError):  # the nursery is closed: the connection is gone
            self.nursery.start_soon(fn, *args)

    def require(self, action: Action, topic_id: int | None = None) -> None:
        """Checked against the user as it is now (permission changes apply to open sessions)."""
        if self.user is None:
            raise Unauthorized("not authenticated")
        try:
            self.user = self.service.users.get_user(self.user.id)
        except UnknownUser:
            raise Forbidden("the user was deleted") from None
        if not allowed(self.user, action, self.stream_id, topic_id):
            raise Forbidden(f"user {self.user.username!r} may not {action.replace('_', ' ')}")


FrameHandler = Callable[[Session, Any], Awaitable[rs.Frame | None]]

# Taken before Open (§7); the rest of the state machine is in the handlers.
_BEFORE_OPEN = frozenset(
    {
        rs.PeerProperties, rs.SaslHandshake, rs.SaslAuthenticate, rs.Tune, rs.Open,
        rs.Heartbeat, rs.Close, rs.CloseResponse,
    }
)  # fmt: skip
_WIRE_NAMES = {int(k): k.name.lower() for k in Key}


class RabbitStreamService:
    def __init__(self, router: Router, settings: RabbitStreamSettings, *, users: UserStore) -> None:
        self.router = router
        self.settings = settings
        self.users = users
        self.catalog = Catalog(router)
        self.active = ActiveConsumers()
        self.sessions: set[Session] = set()
        # (canonical stream, rabbit stream, reference) -> the live publisher with that reference
        self.references: dict[tuple[str, str, str], Publisher] = {}
        self.handlers: dict[type, FrameHandler] = {
            rs.PeerProperties: _peer_properties,
            rs.SaslHandshake: _sasl_handshake,
            rs.SaslAuthenticate: _sasl_authenticate,
            rs.Tune: _tune,
            rs.Open: _open,
            rs.Heartbeat: _heartbeat,
            rs.Close: _close,
            rs.CloseResponse: _close_response,
            rs.ExchangeCommandVersions: _exchange_command_versions,
            **rabbitmq_stream_streams.HANDLERS,
            **rabbitmq_stream_publish.HANDLERS,
            **rabbitmq_stream_consume.HANDLERS,
        }

    def handler(self) -> Handler:
        return self.handle

    def ensure_default_user(self) -> None:
        s = self.settings
        if s.default_user:
            self.users.ensure_user(s.default_user, s.default_password)

    async def handle(self, conn: Connection) -> None:
        s = self.settings
        codec = rs.RabbitStreamServerCodec(min(s.max_frame_bytes, s.frame_max))
        host, port = advertised_address(conn, s.advertised_host, s.advertised_port, 5552)
        async with trio.open_nursery() as nursery:
            session = Session(self, conn, codec, nursery, host, port)
            self.sessions.add(session)
            try:
                await self._serve(session)
            except Closed:
                pass
            finally:
                session.closing = True
                self.sessions.discard(session)
                rabbitmq_stream_publish.drop(session)
                rabbitmq_stream_consume.drop(session)
                nursery.cancel_scope.cancel()

    async def _serve(self, session: Session) -> None:
        conn, codec = session.conn, session.codec
        metrics = conn.metrics
        inflight = metrics.inflight_requests.labels(tr.PROTOCOL)
        while True:
            try:
                frame = codec.next_frame()
            except FrameTooLarge as exc:
                if session.state is not State.OPEN:
                    raise  # before Open: the socket is closed without a frame (§7)
                await self._refuse(session, ResponseCode.FRAME_TOO_LARGE, "frame too large", exc)
                metrics.connection_errors.labels(tr.PROTOCOL, "frame_too_large").inc()
                return
            except RemoteProtocolError as exc:
                if session.state is not State.OPEN:
                    raise  # before Open: the socket is closed without a frame (§7)
                code = exc.hint if isinstance(exc.hint, int) else ResponseCode.UNKNOWN_FRAME
                await self._refuse(session, code, str(exc), exc)
                metrics.connection_errors.labels(tr.PROTOCOL, "protocol_error").inc()
                return
            if frame is NEED_DATA:
                await conn.feed(codec)
                session.last_received = time.monotonic()
                continue
            if frame is rs.CONNECTION_CLOSED:
                return
            assert isinstance(frame, rs.Frame)
            handler = self.handlers.get(type(frame))
            if session.state is not State.OPEN and type(frame) not in _BEFORE_OPEN:
                conn.log.info("frame before open", frame=type(frame).__name__)
                metrics.connection_errors.labels(tr.PROTOCOL, "protocol_error").inc()
                return
            if handler is None:  # a frame only a server sends, or one not served
                await self._refuse(session, ResponseCode.UNKNOWN_FRAME, "unknown frame", None)
                metrics.connection_errors.labels(tr.PROTOCOL, "protocol_error").inc()
                return
            wire_command = _WIRE_NAMES.get(frame.KEY, "unknown")
            session.ctx = RequestContext(tr.PROTOCOL, wire_command)
            t0 = time.perf_counter()
            error_type = ""
            inflight.inc()
            try:
                reply = await handler(session, frame)
            except GatewayError as exc:
                reply, error_type = _failure(session, frame, exc), exc.error_type
            finally:
                inflight.dec()
            if reply is not None:
                await session.send(reply)
            elapsed = time.perf_counter() - t0
            if session.ctx.command_s == 0.0:
                metrics.observe_command(
                    tr.PROTOCOL, wire_command, wire_command, elapsed, error_type
                )
            metrics.gateway_overhead.labels(tr.PROTOCOL, wire_command).observe(
                max(0.0, elapsed - session.ctx.command_s)
            )

    async def _refuse(
        self, session: Session, code: int, reason: str, exc: Exception | None
    ) -> None:
        """Close(code) and wait (briefly) for the client's CloseResponse (§5 Close)."""
        session.conn.log.info("closing connection", code=code, error=str(exc or reason))
        await session.send(rs.Close(correlation_id=session.next_correlation(), code=code,
                                    reason=reason[:200]))  # fmt: skip
        if isinstance(exc, FrameTooLarge):
            return  # the rest of the stream cannot be parsed
        with trio.move_on_after(CLOSE_GRACE_S):
            while True:
                try:
                    frame = session.codec.next_frame()
                except RemoteProtocolError:
                    return
                if frame is NEED_DATA:
                    await session.conn.feed(session.codec)
                elif frame is rs.CONNECTION_CLOSED or isinstance(frame, rs.CloseResponse):
                    return


_FAILURES = {
    **rabbitmq_stream_streams.FAILURES,
    **rabbitmq_stream_publish.FAILURES,
    **rabbitmq_stream_consume.FAILURES,
}


def _failure(session: Session, frame: rs.Frame, exc: GatewayError) -> rs.Frame | None:
    session.conn.log.debug("rabbitmq stream command failed", frame=type(frame).__name__,
                           error=exc.message)  # fmt: skip
    code = tr.response_code(exc)
    respond = _FAILURES.get(type(frame))
    if respond is not None:
        return respond(frame, code)
    correlation = getattr(frame, "correlation_id", None)
    if correlation is None:
        return None
    return _code_response(frame, code)


def _code_response(frame: rs.Frame, code: int) -> rs.Frame:
    responses: dict[type, type[rs.CodeResponse]] = {
        rs.PeerProperties: rs.PeerPropertiesResponse,
        rs.SaslHandshake: rs.SaslHandshakeResponse,
        rs.SaslAuthenticate: rs.SaslAuthenticateResponse,
        rs.Open: rs.OpenResponse,
        rs.Close: rs.CloseResponse,
        rs.ExchangeCommandVersions: rs.ExchangeCommandVersionsResponse,
    }
    cls = responses[type(frame)]
    return cls(correlation_id=frame.correlation_id, code=code)  # type: ignore[attr-defined]


# --- connection handshake (§5 Connection, §7) ---------------------------------------------------


async def _peer_properties(s: Session, f: rs.PeerProperties) -> rs.Frame:
    props = dict(f.properties)
    s.conn.bind(client=props.get("connection_name") or props.get("product", ""))
    settings = s.service.settings
    from gateway import __version__

    return rs.PeerPropertiesResponse(
        correlation_id=f.correlation_id,
        code=ResponseCode.OK,
        properties=(
            ("cluster_name", settings.cluster_name),
            ("product", "RabbitMQ"),
            ("version", settings.server_version),
            ("platform", "streamgate"),
            ("information", f"streamgate {__version__}, a multi-protocol streaming gateway"),
            ("streamgate_version", __version__),
        ),
    )


async def _sasl_handshake(s: Session, f: rs.SaslHandshake) -> rs.Frame:
    return rs.SaslHandshakeResponse(
        correlation_id=f.correlation_id, code=ResponseCode.OK, mechanisms=MECHANISMS
    )


async def _sasl_authenticate(s: Session, f: rs.SaslAuthenticate) -> rs.Frame:
    settings = s.service.settings
    if s.state is not State.CONNECTED:
        return rs.SaslAuthenticateResponse(
            correlation_id=f.correlation_id, code=ResponseCode.SASL_CANNOT_CHANGE_USERNAME
        )  # re-authentication is not supported
    code = ResponseCode.OK
    if f.mechanism not in MECHANISMS:
        code = ResponseCode.SASL_MECHANISM_NOT_SUPPORTED
    else:
        parts = (f.data or b"").split(b"\0")
        if len(parts) != 3:
            code = ResponseCode.SASL_ERROR
        else:
            username = parts[1].decode("utf-8", "replace")
            password = parts[2].decode("utf-8", "replace")
            try:
                user = await s.service.users.login(username, password)
            except (InvalidCredentials, GatewayError):
                code = ResponseCode.AUTHENTICATION_FAILURE
            else:
                if (
                    settings.default_user_loopback_only
                    and username == settings.default_user
                    and not _loopback(s.conn.peer)
                ):
                    code = ResponseCode.SASL_AUTHENTICATION_FAILURE_LOOPBACK
                else:
                    s.user = user
                    s.conn.bind(user=username)
    reply = rs.SaslAuthenticateResponse(correlation_id=f.correlation_id, code=code)
    if code != ResponseCode.OK:
        await s.send(reply)
        s.conn.log.info("authentication failed", code=code)
        raise Closed  # the server closes right after a failed authentication (§5)
    await s.send(reply)
    s.state = State.AUTHENTICATED
    return rs.Tune(frame_max=settings.frame_max, heartbeat=settings.heartbeat_s)


def _loopback(peer: str) -> bool:
    host = peer.rpartition(":")[0].strip("[]")
    return host.startswith("127.") or host in ("::1", "localhost") or host.startswith("::ffff:127.")


async def _tune(s: Session, f: rs.Tune) -> None:
    if s.state is State.CONNECTED:
        raise Closed  # Tune before authentication
    settings = s.service.settings
    ours = min(settings.frame_max, settings.max_frame_bytes)
    frame_max = min(f.frame_max, ours) if f.frame_max else ours
    if frame_max < 64:
        raise Closed
    s.codec.max_frame_size = frame_max
    if s.state is State.AUTHENTICATED:
        s.state = State.TUNED
        s.heartbeat_s = f.heartbeat
        if f.heartbeat > 0:
            s.nursery.start_soon(_heartbeats, s)


async def _heartbeats(s: Session) -> None:
    """A Heartbeat every half interval (rbfly aborts when an interval passes without a frame,
    §7; half leaves room for both clocks' jitter); a client silent for three intervals is
    dropped, as the server does."""
    interval = s.heartbeat_s
    frame = s.codec.send(rs.Heartbeat())
    while True:
        await trio.sleep(interval / 2)
        if time.monotonic() - s.last_received > 3 * interval:
            raise IdleTimeout(f"no frame from the client for {3 * interval} s")
        await s.conn.send(frame)


async def _open(s: Session, f: rs.Open) -> rs.Frame:
    if s.state is State.CONNECTED:
        raise Closed
    if s.state is State.OPEN:
        raise Closed  # a second Open
    stream = tr.stream_of_vhost(f.virtual_host)
    stream_id = await _vhost_stream(s, stream)
    if stream_id is None:
        await s.send(rs.OpenResponse(correlation_id=f.correlation_id,
                                     code=ResponseCode.VIRTUAL_HOST_ACCESS_FAILURE))  # fmt: skip
        raise Closed  # as the server: the socket is closed after a refused Open (§4)
    s.state, s.vhost, s.stream, s.stream_id = State.OPEN, f.virtual_host, stream, stream_id
    s.conn.bind(vhost=f.virtual_host)
    return rs.OpenResponse(
        correlation_id=f.correlation_id,
        code=ResponseCode.OK,
        properties=(("advertised_host", s.host), ("advertised_port", str(s.port))),
    )


async def _vhost_stream(s: Session, stream: str) -> int | None:
    """The canonical stream's id; the default one is created on first use (``/`` always exists
    on a RabbitMQ server), any other must exist."""
    for attempt in range(2):
        streams = (await s.router.execute(ListStreams(), s.ctx)).streams
        for info in streams:
            if info.name == stream:
                return info.id
        if stream != tr.stream_of_vhost(tr.ROOT_VHOST) or attempt:
            return None
        with contextlib.suppress(StreamExists):
            await s.router.execute(CreateStream(stream=stream), s.ctx)
    return None


async def _heartbeat(s: Session, f: rs.Heartbeat) -> None:
    return None  # any frame is traffic (last_received); heartbeats are not answered


async def _close(s: Session, f: rs.Close) -> None:
    s.conn.log.debug("client closed", code=f.code, reason=f.reason)
    await s.send(rs.CloseResponse(correlation_id=f.correlation_id, code=ResponseCode.OK))
    raise Closed


async def _close_response(s: Session, f: rs.CloseResponse) -> None:
    raise Closed


# Ordered from DeclarePublisher on: rstream reads the answer by position (§5).
COMMAND_VERSIONS = (
    (Key.DECLARE_PUBLISHER, 1, 1), (Key.PUBLISH, 1, 2), (Key.QUERY_PUBLISHER_SEQUENCE, 1, 1),
    (Key.DELETE_PUBLISHER, 1, 1), (Key.SUBSCRIBE, 1, 1), (Key.DELIVER, 1, 2), (Key.CREDIT, 1, 1),
    (Key.STORE_OFFSET, 1, 1), (Key.QUERY_OFFSET, 1, 1), (Key.UNSUBSCRIBE, 1, 1),
    (Key.CREATE, 1, 1), (Key.DELETE, 1, 1), (Key.METADATA, 1, 1), (Key.HEARTBEAT, 1, 1),
    (Key.ROUTE, 1, 1), (Key.PARTITIONS, 1, 1), (Key.CONSUMER_UPDATE, 1, 1),
    (Key.EXCHANGE_COMMAND_VERSIONS, 1, 1), (Key.STREAM_STATS, 1, 1),
    (Key.CREATE_SUPER_STREAM, 1, 1), (Key.DELETE_SUPER_STREAM, 1, 1),
)  # fmt: skip


async def _exchange_command_versions(s: Session, f: rs.ExchangeCommandVersions) -> rs.Frame:
    for v in f.versions:
        if v.key == Key.DELIVER and v.max_version >= 2:
            s.deliver_v2 = True
    return rs.ExchangeCommandVersionsResponse(
        correlation_id=f.correlation_id,
        code=ResponseCode.OK,
        versions=tuple(
            rs.CommandVersion(key=k, min_version=lo, max_version=hi)
            for k, lo, hi in COMMAND_VERSIONS
        ),
    )


__all__ = ["RabbitStreamService", "RabbitStreamSettings", "Session", "State"]
