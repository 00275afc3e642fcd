"""Connections to an Iggy server for the Iggy backend: a small pool, kept healthy.

Iggy answers one request at a time per connection (iggy.md §1.1, §3.1), so concurrent commands
each take a connection of their own from the pool (at most ``size``, each logged in with its
own session) and give it back after the reply; an emulated long poll holds one only for each
poll's round trip. A connection whose request failed half way (transport error, timeout,
cancellation) is closed, never reused: its reply could still arrive.

``run`` keeps the pool healthy: every ``ping_interval_s`` (and at once after a request failed)
it pings each idle connection (the heartbeat an Iggy server expects of every client), and when
the server is gone marks the pool down, closes every connection and reconnects with backoff.
While down, commands fail at once with ``BackendUnavailable``.
"""

from __future__ import annotations

from contextlib import suppress
from dataclasses import dataclass, field

import structlog
import trio

from gateway import __version__
from gateway.backends.base import Retries
from gateway.backends.tls import TlsClient
from gateway.backends.watchdog import Watchdog
from gateway.gathered import QuickAck, unthrottle_sends
from gateway.model import (
    BackendUnavailable,
    GatewayError,
    InvalidRequest,
    MessageTooLarge,
    Timeout,
    Unauthorized,
)
from gateway.translate.iggy.errors import error_of
from protocols._wire import (
    CONNECTION_CLOSED,
    NEED_DATA,
    FrameTooLarge,
    LocalProtocolError,
    RemoteProtocolError,
)
from protocols.iggy import (
    DEFAULT_MAX_FRAME_SIZE,
    Command,
    IggyClientCodec,
    IggyReply,
    LoginRegister,
    LoginRegisterWithPersonalAccessToken,
    Ping,
    pack_protocol_version,
)
from protocols.iggy.status import Status

log = structlog.get_logger("streamgate.backends.iggy")

PROTOCOL_VERSION = pack_protocol_version(0, 11, 0)  # what apache-iggy 0.9.0 sends (§5.2)
_RECEIVE_BYTES = 256 << 10
_TRANSPORT_ERRORS = (OSError, trio.BrokenResourceError, trio.ClosedResourceError)


@dataclass(frozen=True, slots=True, kw_only=True)
class IggyTarget:
    host: str
    port: int = 8090
    username: str = "iggy"
    password: str = "iggy"
    token: str = ""  # a personal access token logs in instead of the username and password
    tls: TlsClient | None = field(default=None, compare=False)  # TLS to the server (backends.tls)

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


class _Lost(Exception):
    """The connection broke under a request (EOF, reset, garbage from the server)."""


class Connection:
    """One logged-in connection: a socket and the client role of the one Iggy codec."""

    def __init__(
        self, stream: trio.abc.Stream, socket: trio.socket.SocketType, max_frame_size: int
    ) -> None:
        self.stream = stream  # the TCP stream, or the TLS stream over it
        self.socket = socket
        self.codec = IggyClientCodec(max_frame_size=max_frame_size)
        self.generation = 0
        # An Iggy server leaves Nagle's algorithm on unless configured otherwise: the tail of
        # a reply would wait for the acknowledgement of what came before it.
        self._quick_ack = QuickAck(stream)

    async def call(self, command: Command) -> IggyReply:
        try:
            data = self.codec.send(command)
        except LocalProtocolError as exc:  # nothing was sent: the connection stays good
            raise InvalidRequest(f"iggy cannot carry this request: {exc}") from None
        try:
            await self.stream.send_all(data)
            while True:
                reply = self.codec.next_reply()
                if reply is NEED_DATA:
                    if self.codec.buffered:
                        self._quick_ack.now()
                    chunk = await self.stream.receive_some(_RECEIVE_BYTES)
                    if chunk:
                        self.codec.receive_data(bytes(chunk))
                    else:
                        self.codec.receive_eof()
                    continue
                if reply is CONNECTION_CLOSED:
                    raise _Lost("the server closed the connection")
                return reply
        except FrameTooLarge:
            raise
        except (*_TRANSPORT_ERRORS, RemoteProtocolError) as exc:
            raise _Lost(str(exc) or type(exc).__name__) from exc

    def close(self) -> None:
        """Synchronous, so that it also runs in a cancelled ``finally``."""
        self.socket.close()


async def open_connection(target: IggyTarget, max_frame_size: int) -> Connection:
    """Connect (TLS hand-shaken when ``target.tls`` asks for it) and log in (Register, §5.2);
    the caller bounds it all by its connect timeout. Transport failures are
    ``BackendUnavailable``; a refused login is the canonical error for its status (bad
    credentials are not retriable)."""
    try:
        tcp = await trio.open_tcp_stream(target.host, target.port)
    except OSError as exc:
        raise BackendUnavailable(f"iggy server {target} unreachable: {exc}") from None
    unthrottle_sends(tcp)  # a big send in one write
    conn = Connection(tcp, tcp.socket, max_frame_size)
    ok = False
    try:
        if target.tls is not None:
            conn.stream = await target.tls.wrap(tcp, target.host, target.port)
        login: Command
        if target.token:
            login = LoginRegisterWithPersonalAccessToken(
                protocol_version=PROTOCOL_VERSION,
                sdk_name="streamgate",
                sdk_version=__version__,
                token=target.token,
            )
        else:
            login = LoginRegister(
                protocol_version=PROTOCOL_VERSION,
                sdk_name="streamgate",
                sdk_version=__version__,
                username=target.username,
                password=target.password,
            )
        try:
            reply = await conn.call(login)
        except (_Lost, FrameTooLarge) as exc:
            raise BackendUnavailable(f"iggy server {target} dropped the login: {exc}") from None
        if reply.status != Status.OK:
            raise error_of(reply.status, f"login to {target} as {target.username!r}")
        ok = True
        return conn
    finally:
        if not ok:
            conn.close()


class Pool:
    def __init__(
        self,
        target: IggyTarget,
        *,
        size: int = 8,
        connect_timeout_s: float = 5.0,
        request_timeout_s: float = 30.0,
        ping_interval_s: float = 2.0,
        min_backoff_s: float = 0.05,
        max_backoff_s: float = 2.0,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
    ) -> None:
        self.target = target
        self.connect_timeout_s = connect_timeout_s
        self.request_timeout_s = request_timeout_s
        self.ping_interval_s = ping_interval_s
        self.min_backoff_s = min_backoff_s
        self.max_backoff_s = max_backoff_s
        self.max_frame_size = max_frame_size
        self.up = False
        self.why_down = "not connected yet"  # the last failure to connect, for errors
        self.retries = Retries()  # the backend's, once it hands it over
        self._attempted = False  # a connection attempt was made: the next ones are reconnects
        self._idle: list[Connection] = []
        self._slots = trio.Semaphore(size)
        self._generation = 0
        self._check = trio.Event()  # set: ping now (a request failed)
        self._watchdog = Watchdog()

    # --- health -------------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Connect (bad credentials end it here), report started, keep the pool healthy until
        cancelled. An unreachable server at start is not fatal: the pool starts down."""
        refused: GatewayError | None = None
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._watchdog.run)
                try:
                    self._idle.append(await self._open())
                    self.up = True
                except BackendUnavailable as exc:
                    self.why_down = exc.message
                    log.warning("iggy server unavailable at start", server=str(self.target),
                                error=str(exc))  # fmt: skip
                except GatewayError as exc:  # bad credentials: a configuration error
                    refused = exc
                    nursery.cancel_scope.cancel()
                if refused is None:
                    task_status.started()
                    await self._supervise()
        finally:
            self._mark_down()
        if refused is not None:
            raise refused

    async def _open(self) -> Connection:
        with self._watchdog.bound(self.connect_timeout_s) as scope:
            conn = await open_connection(self.target, self.max_frame_size)
            conn.generation = self._generation
            return conn
        assert scope.cancelled_caught
        raise BackendUnavailable(f"iggy server {self.target}: connect timed out")

    async def _supervise(self) -> None:
        backoff = 0.0
        while True:
            if self.up:
                with trio.move_on_after(self.ping_interval_s):
                    await self._check.wait()
                self._check = trio.Event()
                if await self._heartbeats():
                    continue
                try:  # no connection to ping, or one broke: is the server there?
                    await self.call(Ping(), safe=True)
                except GatewayError as exc:
                    if self.up:
                        log.warning("iggy server stopped answering", server=str(self.target),
                                    error=str(exc))  # fmt: skip
                        self.why_down = exc.message
                        self._mark_down()
                continue
            await trio.sleep(backoff)
            if self._attempted:
                self.retries("reconnect")
            self._attempted = True
            try:
                self._idle.append(await self._open())
                self.up = True
            except GatewayError as exc:
                self.why_down = exc.message
                backoff = min(self.max_backoff_s, max(self.min_backoff_s, backoff * 2))
                log.debug("iggy reconnect failed", server=str(self.target), error=str(exc))
                continue
            backoff = 0.0
            log.info("iggy server reachable", server=str(self.target))

    async def _heartbeats(self) -> bool:
        """Ping every idle connection, oldest first: an Iggy server drops a client that sends
        no heartbeat for a while (the SDK pings every 5 s, §1.1). False when there was none
        to ping or one broke."""
        pinged = 0
        for _ in range(len(self._idle)):
            if not self._idle or not self.up:
                return False
            conn = self._idle.pop(0)
            ok = False
            try:  # given back (or closed) when the pool is cancelled mid-ping too
                # A Ping answered with a frame above the limit is garbage too, not a crash.
                with (
                    self._watchdog.bound(self.request_timeout_s),
                    suppress(_Lost, FrameTooLarge, GatewayError),
                ):
                    ok = (await conn.call(Ping())).status == Status.OK
            finally:
                self._give_back(conn, ok)
            if not ok:
                return False
            pinged += 1
        return pinged > 0

    def _mark_down(self) -> None:
        self.up = False
        self._drop_idle()

    def _drop_idle(self) -> None:
        """Connections opened before now are suspect (a restarted server closed them all)."""
        self._generation += 1
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    # --- requests -----------------------------------------------------------------------------

    async def call(self, command: Command, *, safe: bool = False) -> IggyReply:
        """One request on a pooled connection. ``safe``: it changes nothing (a read), so when
        its connection turns out to be dead it is sent once more on a fresh one. A lost session
        (status 40: nothing was done) is retried once on a fresh login, whatever the command."""
        retries = 1
        while True:
            if not self.up:
                raise BackendUnavailable(
                    f"iggy server {self.target} is unavailable: {self.why_down}"
                )
            try:
                reply = await self._call_once(command)
            except _Lost as exc:
                self._drop_idle()
                self._check.set()
                if safe and retries:
                    retries -= 1
                    continue
                raise BackendUnavailable(f"iggy server {self.target}: {exc}") from None
            if reply.status == Status.UNAUTHENTICATED and retries:
                retries -= 1
                continue
            return reply

    async def _call_once(self, command: Command) -> IggyReply:
        with self._watchdog.bound(self.request_timeout_s) as scope:
            async with self._slots:
                conn = await self._take()
                ok = False
                try:
                    reply = await conn.call(command)
                    # A lost session (40) or an eviction ends the connection's use.
                    ok = reply.eviction is None and reply.status != Status.UNAUTHENTICATED
                    return reply
                except InvalidRequest:
                    ok = True  # refused before anything was sent
                    raise
                except FrameTooLarge as exc:
                    raise MessageTooLarge(f"iggy reply above {exc.maximum} bytes") from None
                finally:
                    self._give_back(conn, ok)
        assert scope.cancelled_caught
        self._check.set()
        raise Timeout(f"iggy server {self.target} did not answer in {self.request_timeout_s} s")

    async def _take(self) -> Connection:
        if self._idle:
            return self._idle.pop()
        try:
            return await self._open()
        except (BackendUnavailable, Unauthorized):
            # Unreachable, or credentials that worked before no longer do: check the server.
            self._check.set()
            raise

    def _give_back(self, conn: Connection, ok: bool) -> None:
        if ok and self.up and conn.generation == self._generation:
            self._idle.append(conn)
        else:
            conn.close()


__all__ = ["Connection", "IggyTarget", "Pool", "open_connection"]
