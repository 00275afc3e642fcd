"""Opening a connection to RabbitMQ's stream port (rabbitmq-stream.md §7): PeerProperties, SASL
PLAIN, Tune (the smaller of our and the broker's frame_max and heartbeat, or the non-zero one
when a side says 0, as the Java client does), Open of the backend's virtual host, after the TLS
handshake when ``settings.tls`` asks for one. Bounded by ``connect_timeout_s`` (TLS included);
every failure is ``BackendUnavailable``, or ``InvalidCredentials`` / ``Forbidden`` when the
broker refuses us."""

from __future__ import annotations

import structlog
import trio

from gateway.backends.rabbitmq_stream.conn import (
    READ_SIZE,
    RECEIVE_LIMIT,
    Connection,
    Settings,
    check,
)
from gateway.backends.watchdog import Watchdog
from gateway.gathered import unthrottle_sends
from gateway.model import BackendUnavailable, InvalidCredentials
from protocols import rabbitmq_stream as rs
from protocols._wire import RemoteProtocolError

log = structlog.get_logger("streamgate.backend.rabbitmq_stream")


def _negotiate(ours: int, theirs: int) -> int:
    """Tune: the smaller value, or the non-zero one when a side says 0 (unlimited / none)."""
    if not ours or not theirs:
        return ours or theirs
    return min(ours, theirs)


async def _next(stream: trio.abc.Stream, codec: rs.RabbitStreamClientCodec) -> rs.Frame:
    while True:
        frame = codec.next_frame()
        if frame is rs.CONNECTION_CLOSED:
            raise BackendUnavailable("RabbitMQ closed the connection during the handshake")
        if frame is not rs.NEED_DATA:
            assert isinstance(frame, rs.Frame)
            if not isinstance(frame, rs.Heartbeat):
                return frame
            continue
        data = await stream.receive_some(READ_SIZE)
        if data:
            codec.receive_data(bytes(data))
        else:
            codec.receive_eof()


async def _ask(
    stream: trio.abc.Stream, codec: rs.RabbitStreamClientCodec, request: rs.Request, what: str
) -> rs.Frame:
    await stream.send_all(codec.send(request))
    reply = await _next(stream, codec)
    if getattr(reply, "correlation_id", None) != request.correlation_id:
        raise BackendUnavailable(f"RabbitMQ answered {what} with {type(reply).__name__}")
    return check(reply, what)


async def connect(settings: Settings, watchdog: Watchdog, name: str = "streamgate") -> Connection:
    """Open and hand-shake a connection (§7), bounded by ``connect_timeout_s`` (real time)."""
    try:
        with watchdog.bound(settings.connect_timeout_s):
            tcp = await trio.open_tcp_stream(settings.host, settings.port)
            unthrottle_sends(tcp)  # a big Publish in one write
            stream: trio.abc.Stream = tcp
            try:
                if settings.tls is not None:
                    stream = await settings.tls.wrap(tcp, settings.host, settings.port)
                return await _handshake(stream, settings, watchdog, name)
            except BaseException:
                await trio.aclose_forcefully(stream)
                raise
    except (OSError, trio.BrokenResourceError, RemoteProtocolError) as exc:
        where = f"{settings.host}:{settings.port}"
        raise BackendUnavailable(f"cannot connect to RabbitMQ at {where}: {exc}") from None
    raise BackendUnavailable(
        f"RabbitMQ at {settings.host}:{settings.port}: handshake not done within "
        f"{settings.connect_timeout_s} s"
    )


async def _handshake(
    stream: trio.abc.Stream, s: Settings, watchdog: Watchdog, name: str
) -> Connection:
    codec = rs.RabbitStreamClientCodec(max_frame_size=RECEIVE_LIMIT)
    props = (("product", "streamgate"), ("connection_name", name))
    peer = await _ask(stream, codec, rs.PeerProperties(correlation_id=1, properties=props),
                      "PeerProperties")  # fmt: skip
    assert isinstance(peer, rs.PeerPropertiesResponse)
    mechanisms = await _ask(stream, codec, rs.SaslHandshake(correlation_id=2), "SaslHandshake")
    assert isinstance(mechanisms, rs.SaslHandshakeResponse)
    if "PLAIN" not in mechanisms.mechanisms:
        raise InvalidCredentials(f"RabbitMQ offers no PLAIN ({mechanisms.mechanisms})")
    data = b"\0" + s.username.encode() + b"\0" + s.password.encode()
    await _ask(stream, codec, rs.SaslAuthenticate(correlation_id=3, mechanism="PLAIN", data=data),
               "authentication")  # fmt: skip
    proposed = await _next(stream, codec)
    if not isinstance(proposed, rs.Tune):
        raise BackendUnavailable(f"RabbitMQ sent {type(proposed).__name__} instead of Tune")
    tune = rs.Tune(
        frame_max=_negotiate(s.frame_max, proposed.frame_max),
        heartbeat=_negotiate(s.heartbeat_s, proposed.heartbeat),
    )
    await stream.send_all(codec.send(tune))
    await _ask(stream, codec, rs.Open(correlation_id=4, virtual_host=s.vhost),
               f"Open of virtual host {s.vhost!r}")  # fmt: skip
    server = dict(peer.properties)
    log.info("connected to RabbitMQ", host=s.host, port=s.port, vhost=s.vhost,
             version=server.get("version"), frame_max=tune.frame_max,
             heartbeat=tune.heartbeat)  # fmt: skip
    return Connection(stream, codec, s, tune, server, watchdog)


__all__ = ["connect"]
