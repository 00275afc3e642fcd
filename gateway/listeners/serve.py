"""Where listeners accept: one port (or several, with SO_REUSEPORT) per protocol, a TLS
handshake first where configured, then one ``Connection`` and its writer task per client, the
connection limit, and the drain that stops accepting (gateway/listeners/connection.py runs each
connection)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import suppress
from dataclasses import dataclass

import structlog
import trio

from gateway.access_log import AccessLog
from gateway.gathered import WriteThrough, coalesced, send_gathered, socket_of
from gateway.listeners.connection import (
    AuthTimeout,
    Connection,
    Drain,
    Handler,
    IdleTimeout,
    Limits,
    MemoryPressure,
    RequestMeters,
    RequestTimeout,
)
from gateway.listeners.fd_guard import FD_GUARD, FdGuard, accept_loop
from gateway.metrics import CONNECTION_ERROR_REASONS, Metrics
from gateway.tls import ServerTls, TlsError
from protocols._wire import FrameTooLarge, Gather, Piece, ProtocolError

log = structlog.get_logger("streamgate.session")
_conn_ids = itertools.count(1)


@dataclass(frozen=True, slots=True)
class ListenerInfo:
    protocol: str
    addresses: tuple[tuple[str, int], ...]
    tls: bool = False


async def _writer(
    stream: trio.abc.Stream,
    channel: trio.MemoryReceiveChannel[bytes | Gather],
    through: WriteThrough | None = None,
) -> None:
    # A plain socket takes a frame in pieces (stored data is not copied into it); TLS is given
    # one joined write. ``through`` counts the frames still queued here (none: the connection
    # writes its next frame itself, gateway/gathered.py).
    sock = socket_of(stream)
    async with channel:
        async for data in channel:
            frames = [data]
            # Coalesce what is already queued into one write: fewer syscalls when pipelining.
            while True:
                try:
                    frames.append(channel.receive_nowait())
                except (trio.WouldBlock, trio.EndOfChannel):
                    break
            if sock is not None and any(isinstance(f, Gather) for f in frames):
                await send_gathered(sock, _buffers(frames))
            elif len(frames) == 1 and isinstance(data, bytes):
                await stream.send_all(data)
            else:
                await stream.send_all(b"".join(_pieces(frames)))
            if through is not None:
                through.queued -= len(frames)


def _pieces(frames: list[bytes | Gather]) -> Iterator[Piece]:
    for frame in frames:
        if isinstance(frame, Gather):
            yield from frame.pieces
        else:
            yield frame


def _buffers(frames: list[bytes | Gather]) -> list[Piece]:
    """The frames' pieces for one gathering write."""
    return coalesced(_pieces(frames))


def _local_of(stream: trio.abc.Stream) -> tuple[str, int] | None:
    try:
        local = stream.socket.getsockname()  # type: ignore[attr-defined]
        return str(local[0]), int(local[1])
    except (AttributeError, OSError, ValueError, IndexError):
        return None


def _peer_of(stream: trio.abc.Stream) -> str:
    try:
        host, port, *_ = stream.socket.getpeername()  # type: ignore[attr-defined]
        return f"{host}:{port}"
    except (AttributeError, OSError, ValueError):
        return "?"


class _Server:
    def __init__(
        self,
        protocol: str,
        handler: Handler,
        metrics: Metrics,
        limits: Limits,
        drain: Drain,
        access_log: AccessLog | None = None,
        tls: ServerTls | None = None,
        advertised_port: int | None = None,
        authenticates: bool = False,
    ) -> None:
        self.protocol = protocol
        self.authenticates = authenticates
        self.tls = tls
        self.advertised_port = advertised_port
        self.handler = handler
        self.metrics = metrics
        self.limits = limits
        self.drain = drain
        self.active = 0
        self.idle = trio.Event()
        self.idle.set()
        self._errors = {
            reason: metrics.connection_errors.labels(protocol, reason)
            for reason in CONNECTION_ERROR_REASONS
        }
        self._meters = RequestMeters(metrics, protocol, access_log)

    async def accept(
        self,
        listener: trio.abc.Listener[trio.SocketStream],
        nursery: trio.Nursery,
        guard: FdGuard,
    ) -> None:
        """Accept until cancelled; out of descriptors, refuse quietly (see fd_guard.py)."""

        def start(stream: trio.SocketStream) -> None:
            nursery.start_soon(self.session, stream)

        refused = self._errors["fd_exhausted"]
        await accept_loop(listener, start, guard, self.protocol, on_refused=refused.inc)

    async def session(self, stream: trio.abc.Stream) -> None:
        m = self.metrics
        if self.active >= self.limits.max_connections or self.drain.draining:
            self._errors["too_many_connections"].inc()
            await trio.aclose_forcefully(stream)
            return
        self.active += 1
        self.idle = trio.Event() if self.active == 1 else self.idle
        active = m.connections_active.labels(self.protocol)
        active.inc()
        m.connections.labels(self.protocol).inc()
        peer = _peer_of(stream)
        secure: trio.abc.Stream | None = None
        try:
            opened = await self._handshake(stream, peer)
            if opened is not None:
                secure, principal = opened
                await self._run(stream, secure, peer, principal)
        finally:
            self.active -= 1
            if not self.active:
                self.idle.set()
            active.dec()
            with trio.move_on_after(1) as cleanup:
                cleanup.shield = True
                if secure is not None and secure is not stream:
                    # close_notify first (RFC 8446 §6.1), then the socket.
                    with suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                        await secure.aclose()
                await trio.aclose_forcefully(stream)

    async def _handshake(
        self, stream: trio.abc.Stream, peer: str
    ) -> tuple[trio.abc.Stream, str | None] | None:
        """(the stream the protocol speaks over, the client certificate's user): on a TLS port
        after the handshake, None when it failed (counted and logged here; the caller closes)."""
        if self.tls is None:
            return stream, None
        try:
            tls_stream = await self.tls.handshake(stream)
        except TlsError as exc:
            self._errors["tls"].inc()
            log.info("tls handshake failed", protocol=self.protocol, peer=peer, error=str(exc))
            return None
        return tls_stream, self.tls.principal(tls_stream)

    async def _run(
        self, raw: trio.abc.Stream, stream: trio.abc.Stream, peer: str, principal: str | None
    ) -> None:
        send_channel, receive_channel = trio.open_memory_channel[bytes | Gather](
            self.limits.send_queue_frames
        )
        conn = Connection(
            stream,
            send_channel,
            protocol=self.protocol,
            conn_id=next(_conn_ids),
            peer=peer,
            metrics=self.metrics,
            limits=self.limits,
            meters=self._meters,
            local=_local_of(raw),
            tls_principal=principal,
            secure=self.tls is not None,
            advertised_port=self.advertised_port,
            authenticated=not self.authenticates,
        )
        self.drain.connections.add(conn)
        conn.log.debug("connection opened", tls=conn.secure, tls_principal=principal)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_writer, stream, receive_channel, conn.through)
                async with send_channel:
                    await self._handle(conn)
            conn.log.debug("connection closed")
        except* TlsError as eg:
            self._fail(conn, "tls", eg)
        except* FrameTooLarge as eg:
            authenticated = conn.is_authenticated
            self._fail(conn, "frame_too_large" if authenticated else "preauth_frame_too_large", eg)
        except* ProtocolError as eg:
            self._fail(conn, "protocol_error", eg)
        except* IdleTimeout as eg:
            self._fail(conn, "idle_timeout", eg)
        except* AuthTimeout as eg:
            self._fail(conn, "auth_timeout", eg)
        except* RequestTimeout as eg:
            self._fail(conn, "request_timeout", eg)
        except* MemoryPressure as eg:
            self._fail(conn, "memory", eg)
        except* (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as eg:
            self._fail(conn, "reset", eg)
        except* Exception as eg:
            self._errors["internal"].inc()
            conn.log.error("connection failed", exc_info=eg)
        finally:
            conn.release()
            self.drain.connections.discard(conn)

    async def _handle(self, conn: Connection) -> None:
        """The protocol handler, cut (AuthTimeout) when the client has not logged in by the
        deadline, whatever it is doing (sending, waiting for its answers, a login underway)."""
        timeout = self.limits.auth_timeout_s
        if conn.is_authenticated or timeout <= 0:
            await self.handler(conn)
            return
        with trio.move_on_after(timeout) as scope:
            conn._auth_scope = scope
            await self.handler(conn)
        conn._auth_scope = None
        if scope.cancelled_caught:
            raise AuthTimeout(f"not logged in after {timeout} s")

    def _fail(self, conn: Connection, reason: str, eg: BaseExceptionGroup[BaseException]) -> None:
        self._errors[reason].inc()
        exc: BaseException = eg
        while isinstance(exc, BaseExceptionGroup):  # a handler's own nursery nests one more
            exc = exc.exceptions[0]
        conn.log.info("connection closed", reason=reason, error=str(exc))


async def serve_protocol(
    protocol: str,
    handler: Handler,
    *,
    host: str,
    port: int,
    metrics: Metrics,
    limits: Limits,
    drain: Drain | None = None,
    reuse_port: bool = False,
    access_log: AccessLog | None = None,
    tls: ServerTls | None = None,
    advertised_port: int | None = None,
    authenticates: bool = False,
    fd_guard: FdGuard = FD_GUARD,
    task_status: trio.TaskStatus[ListenerInfo] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Accept connections for one protocol until cancelled or drained; with ``reuse_port``
    other processes (``--workers``) bind the same port and the kernel spreads connections;
    every command and self-answered request lands in ``access_log`` when there is one. With
    ``tls`` every connection is TLS; ``advertised_port`` replaces the port its discovery answers
    carry (0 = the port connected to: a TLS port beside a plaintext one). With
    ``authenticates`` a connection is held to the pre-login limits until its handler calls
    ``conn.authenticated()``."""
    drain = drain if drain is not None else Drain()
    server = _Server(
        protocol, handler, metrics, limits, drain, access_log, tls, advertised_port, authenticates
    )
    if reuse_port:
        listeners = await open_reuse_port_listeners(port, host=host)
    else:
        listeners = await trio.open_tcp_listeners(port, host=host)
    addresses = tuple(
        (str(sockaddr[0]), int(sockaddr[1]))
        for sockaddr in (lst.socket.getsockname() for lst in listeners)
    )
    async with trio.open_nursery() as connections:
        async with trio.open_nursery() as accepting:
            accepting.start_soon(_close_on_drain, drain, accepting.cancel_scope)
            for listener in listeners:
                accepting.start_soon(server.accept, listener, connections, fd_guard)
            task_status.started(ListenerInfo(protocol, addresses, tls=tls is not None))
        for listener in listeners:
            await listener.aclose()
        # Drain: connections finish their request and close; whoever lingers is cancelled.
        with trio.move_on_after(limits.drain_timeout_s):
            await server.idle.wait()
        connections.cancel_scope.cancel()


async def open_reuse_port_listeners(
    port: int, *, host: str, backlog: int = 1024
) -> list[trio.SocketListener]:
    """Like ``trio.open_tcp_listeners``, every socket with SO_REUSEPORT set: each process that
    binds the port this way gets a share of its connections (Linux hashes them)."""
    infos = await trio.socket.getaddrinfo(
        host, port, type=trio.socket.SOCK_STREAM, flags=trio.socket.AI_PASSIVE
    )
    listeners: list[trio.SocketListener] = []
    try:
        for family, kind, proto, _, sockaddr in infos:
            sock = trio.socket.socket(family, kind, proto)
            try:
                sock.setsockopt(trio.socket.SOL_SOCKET, trio.socket.SO_REUSEADDR, 1)
                sock.setsockopt(trio.socket.SOL_SOCKET, trio.socket.SO_REUSEPORT, 1)
                if family == trio.socket.AF_INET6:
                    sock.setsockopt(trio.socket.IPPROTO_IPV6, trio.socket.IPV6_V6ONLY, 1)
                await sock.bind(sockaddr)
                sock.listen(backlog)
            except BaseException:
                sock.close()
                raise
            listeners.append(trio.SocketListener(sock))
    except BaseException:
        for listener in listeners:
            listener.socket.close()
        raise
    return listeners


async def _close_on_drain(drain: Drain, scope: trio.CancelScope) -> None:
    await drain.event.wait()
    scope.cancel()


__all__ = ["ListenerInfo", "open_reuse_port_listeners", "serve_protocol"]
