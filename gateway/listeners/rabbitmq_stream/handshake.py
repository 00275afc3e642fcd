"""RabbitMQ Stream connection frames (rabbitmq-stream.md §5 Connection, §7): PeerProperties,
SASL PLAIN against the gateway's users (through the router, like every login), Tune (frame_max
negotiated and enforced) and the gateway's heartbeats, Open of a virtual host, Heartbeat, Close,
ExchangeCommandVersions."""

from __future__ import annotations

import contextlib
import time

import trio

from gateway import __version__
from gateway.listeners.connection import IdleTimeout
from gateway.listeners.rabbitmq_stream.session import (
    MECHANISMS,
    Closed,
    FailureReply,
    FrameHandler,
    Refused,
    Session,
    State,
    code_reply,
    fails,
    handles,
)
from gateway.model import Authenticate, CreateStream, GatewayError, ListStreams, StreamExists
from gateway.translate.rabbitmq_stream import requests as tr
from protocols import rabbitmq_stream as rs
from protocols._wire import MalformedPlain, PlainNotUtf8, parse_plain
from protocols.rabbitmq_stream import Key, ResponseCode


async def _peer_properties(s: Session, f: rs.PeerProperties) -> rs.Frame:
    props = dict(f.properties)
    s.conn.bind(client=props.get("connection_name") or props.get("product", ""))
    settings = s.service.settings
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
    if f.mechanism not in MECHANISMS:
        code: int = ResponseCode.SASL_MECHANISM_NOT_SUPPORTED
    else:
        code = await _log_in(s, f.data or b"")
    reply = rs.SaslAuthenticateResponse(correlation_id=f.correlation_id, code=code)
    if code != ResponseCode.OK:
        await s.send(reply)
        s.conn.log.info("authentication failed", code=code)
        raise Refused  # the server closes right after a failed authentication (§5)
    await s.send(reply)
    s.state = State.AUTHENTICATED
    return rs.Tune(frame_max=settings.frame_max, heartbeat=settings.heartbeat_s)


async def _log_in(s: Session, token: bytes) -> int:
    """SASL PLAIN: OK (and the session's user set) or the §4 code of the refusal."""
    settings = s.service.settings
    try:
        creds = parse_plain(token)
    except PlainNotUtf8:
        # Names and passwords are UTF-8: such a token matches no user (a failed login).
        return ResponseCode.AUTHENTICATION_FAILURE
    except MalformedPlain:
        return ResponseCode.SASL_ERROR
    username = creds.authcid
    try:
        result = await s.router.execute(
            Authenticate(
                mechanism="PLAIN",
                username=username,
                secret=creds.passwd.encode(),
                peer=s.conn.peer,
            ),
            s.ctx,
        )
        user = s.service.users.get_user(result.user_id)
    except GatewayError:
        return ResponseCode.AUTHENTICATION_FAILURE
    if (
        settings.default_user_loopback_only
        and username == settings.default_user
        and not _loopback(s.conn.peer)
    ):
        return ResponseCode.SASL_AUTHENTICATION_FAILURE_LOOPBACK
    s.user = user
    s.conn.bind(user=username)
    return ResponseCode.OK


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
        raise Refused  # as the server: the socket is closed after a refused Open (§4)
    s.state, s.vhost, s.stream, s.stream_id = State.OPEN, f.virtual_host, stream, stream_id
    s.conn.bind(vhost=f.virtual_host)
    s.conn.authenticated()
    return rs.OpenResponse(
        correlation_id=f.correlation_id,
        code=ResponseCode.OK,
        properties=(("advertised_host", s.host), ("advertised_port", str(s.port))),
    )


async def _vhost_stream(s: Session, stream: str) -> int | None:
    """The canonical stream's id; the default one is created on first use (``/`` always exists
    on a RabbitMQ server), any other must exist."""
    for attempt in range(2):
        streams = (await s.router.execute(ListStreams(internal=True), s.ctx)).streams
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


HANDLERS: dict[type[rs.Frame], FrameHandler[rs.Frame]] = dict(
    [
        handles(rs.PeerProperties, _peer_properties),
        handles(rs.SaslHandshake, _sasl_handshake),
        handles(rs.SaslAuthenticate, _sasl_authenticate),
        handles(rs.Tune, _tune),
        handles(rs.Open, _open),
        handles(rs.Heartbeat, _heartbeat),
        handles(rs.Close, _close),
        handles(rs.CloseResponse, _close_response),
        handles(rs.ExchangeCommandVersions, _exchange_command_versions),
    ]
)

FAILURES: dict[type[rs.Frame], FailureReply[rs.Frame]] = dict(
    [
        fails(rs.PeerProperties, code_reply(rs.PeerPropertiesResponse)),
        fails(rs.SaslHandshake, code_reply(rs.SaslHandshakeResponse)),
        fails(rs.SaslAuthenticate, code_reply(rs.SaslAuthenticateResponse)),
        fails(rs.Open, code_reply(rs.OpenResponse)),
        fails(rs.Close, code_reply(rs.CloseResponse)),
        fails(rs.ExchangeCommandVersions, code_reply(rs.ExchangeCommandVersionsResponse)),
    ]
)

__all__ = ["COMMAND_VERSIONS", "FAILURES", "HANDLERS"]
