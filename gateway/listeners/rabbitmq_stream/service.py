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

import time

import structlog
import trio

from gateway.coordination import UserStore
from gateway.listeners.connection import Connection, Handler, advertised_address
from gateway.listeners.rabbitmq_stream import consume as rabbitmq_stream_consume
from gateway.listeners.rabbitmq_stream import handshake as rabbitmq_stream_handshake
from gateway.listeners.rabbitmq_stream import publish as rabbitmq_stream_publish
from gateway.listeners.rabbitmq_stream import streams as rabbitmq_stream_streams
from gateway.listeners.rabbitmq_stream.catalog import Catalog
from gateway.listeners.rabbitmq_stream.sac import (
    ActiveConsumers,
    BrokerActiveConsumers,
    Deciding,
)
from gateway.listeners.rabbitmq_stream.session import (
    CLOSE_GRACE_S,
    REFUSED_LINGER_S,
    Closed,
    FailureReply,
    FrameHandler,
    Publisher,
    RabbitStreamSettings,
    Refused,
    Session,
    State,
    Subscription,
)
from gateway.model import GatewayError
from gateway.router import Router
from gateway.translate.rabbitmq_stream import requests as tr
from protocols import rabbitmq_stream as rs
from protocols._wire import NEED_DATA, FrameTooLarge, RemoteProtocolError
from protocols.rabbitmq_stream import Key, ResponseCode

log = structlog.get_logger("streamgate.rabbitmq_stream")

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
        # Where groups are shared by every gateway on the backend (the Kafka broker's, or the
        # gateways' replicated ones), so is who is active; else this process decides.
        self.active: Deciding[Subscription]
        if router.groups_shared:
            self.active = BrokerActiveConsumers(router, rabbitmq_stream_consume.set_active)
        else:
            self.active = ActiveConsumers(rabbitmq_stream_consume.set_active)
        self.sessions: set[Session] = set()
        # (canonical stream, rabbit stream, reference) -> the live publisher with that reference
        self.references: dict[tuple[str, str, str], Publisher] = {}
        self.handlers: dict[type[rs.Frame], FrameHandler[rs.Frame]] = {
            **rabbitmq_stream_handshake.HANDLERS,
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
            except Refused:
                await self._linger(session)
            except Closed:
                pass
            finally:
                session.closing = True
                self.sessions.discard(session)
                session.drop_publishers()
                session.drop_subscriptions()
                nursery.cancel_scope.cancel()

    async def _serve(self, session: Session) -> None:
        conn, codec = session.conn, session.codec
        metrics = conn.metrics
        handlers = self.handlers
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
            handler = handlers.get(type(frame))
            if session.state is not State.OPEN and type(frame) not in _BEFORE_OPEN:
                conn.log.info("frame before open", frame=type(frame).__name__)
                metrics.connection_errors.labels(tr.PROTOCOL, "protocol_error").inc()
                return
            if handler is None:  # a frame only a server sends, or one not served
                await self._refuse(session, ResponseCode.UNKNOWN_FRAME, "unknown frame", None)
                metrics.connection_errors.labels(tr.PROTOCOL, "protocol_error").inc()
                return
            wire_command = _WIRE_NAMES.get(frame.KEY, "unknown")
            with conn.request(wire_command) as request:
                # Answered by the gateway itself (no canonical command): timed as this command.
                request.command = wire_command
                session.ctx = request.ctx
                # authorized as the logged-in user (None until then: anonymous)
                request.ctx.user = None if session.user is None else session.user.username
                try:
                    reply = await handler(session, frame)
                except GatewayError as exc:
                    reply, request.error_type = _failure(session, frame, exc), exc.error_type
                if reply is not None:
                    await session.send(reply)

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
            frame = await _closing_frame(session, rs.CloseResponse)
            del frame  # the client's CloseResponse, or the end of the connection

    @staticmethod
    async def _linger(session: Session) -> None:
        """After a refusal: answer the client's Close, if it sends one at once, then close."""
        with trio.move_on_after(REFUSED_LINGER_S):
            frame = await _closing_frame(session, rs.Close)
            if isinstance(frame, rs.Close):
                await session.send(rs.CloseResponse(correlation_id=frame.correlation_id,
                                                    code=ResponseCode.OK))  # fmt: skip


async def _closing_frame(session: Session, wanted: type[rs.Frame]) -> rs.Frame | None:
    """The next ``wanted`` frame of a connection that is being closed (anything else is
    dropped unanswered), or None once it ends or sends what cannot be parsed."""
    while True:
        try:
            frame = session.codec.next_frame()
        except RemoteProtocolError:
            return None
        if frame is NEED_DATA:
            await session.conn.feed(session.codec)
        elif isinstance(frame, wanted):
            return frame
        elif not isinstance(frame, rs.Frame):  # CONNECTION_CLOSED
            return None


_FAILURES: dict[type[rs.Frame], FailureReply[rs.Frame]] = {
    **rabbitmq_stream_handshake.FAILURES,
    **rabbitmq_stream_streams.FAILURES,
    **rabbitmq_stream_publish.FAILURES,
    **rabbitmq_stream_consume.FAILURES,
}


def _failure(session: Session, frame: rs.Frame, exc: GatewayError) -> rs.Frame | None:
    """The answer to a frame whose command failed: its response with the §4 code, or nothing
    for a frame that has no response (Publish answers with PublishError, StoreOffset never)."""
    session.conn.log.debug("rabbitmq stream command failed", frame=type(frame).__name__,
                           error=exc.message)  # fmt: skip
    respond = _FAILURES.get(type(frame))
    return None if respond is None else respond(frame, tr.response_code(exc))


__all__ = ["RabbitStreamService", "RabbitStreamSettings"]
