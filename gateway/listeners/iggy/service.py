"""Iggy listener (default port 8090): the server side of Iggy's binary TCP protocol, both
framings on one port (iggy.md §0.3): the 256-byte VSR headers of apache-iggy 0.9 and the
classic ``[length][code][payload]`` framing of older clients (§9).

One request at a time per connection, as every Iggy client sends them (§1.1). Only Ping and the
login commands are answered before a login; anything else gets status 40 and nothing else. A
body that cannot be decoded is answered with its Iggy status (the connection goes on, as with
the real server); a broken frame (bad header, oversized, EOF inside a frame) closes it.
Failures of a command are Iggy status codes on the status channel (§3.7), which every client
era reads; a refused VSR login is an Eviction frame, as the real server sends.
"""

from __future__ import annotations

import itertools
import time

from gateway.coordination import UserStore
from gateway.listeners.connection import Connection, Handler, advertised_address
from gateway.listeners.iggy import data as iggy_data
from gateway.listeners.iggy import groups as iggy_groups
from gateway.listeners.iggy import streams as iggy_streams
from gateway.listeners.iggy import system as iggy_system
from gateway.listeners.iggy.catalog import Catalog
from gateway.listeners.iggy.group_store import IggyGroups, LocalGroups
from gateway.listeners.iggy.session import (
    ClientState,
    CommandHandler,
    IggySettings,
    Session,
)
from gateway.model import GatewayError, UnknownStream, UnknownTopic
from gateway.router import Router
from gateway.translate.iggy import requests as tr
from gateway.translate.iggy.errors import eviction_of
from protocols._wire import NEED_DATA, Gather, RemoteProtocolError
from protocols.iggy import (
    CONNECTION_CLOSED,
    Command,
    CommandCode,
    Framing,
    IggyRequest,
    IggyServerCodec,
    Operation,
)
from protocols.iggy import frames_messages as fm
from protocols.iggy import frames_system as fs
from protocols.iggy.status import EvictionReason, Status

_BEFORE_LOGIN = frozenset(
    {
        CommandCode.PING,
        CommandCode.LOGIN_USER,
        CommandCode.LOGIN_REGISTER,
        CommandCode.LOGIN_WITH_PERSONAL_ACCESS_TOKEN,
        CommandCode.LOGIN_REGISTER_WITH_PERSONAL_ACCESS_TOKEN,
    }
)
_LOGINS = _BEFORE_LOGIN - {CommandCode.PING}
_WIRE_NAMES = {int(code): code.name.lower() for code in CommandCode}


class IggyService:
    def __init__(
        self,
        router: Router,
        settings: IggySettings,
        *,
        users: UserStore,
        groups: IggyGroups | None = None,
    ) -> None:
        self.router = router
        self.settings = settings
        self.users = users
        self.groups: IggyGroups = groups if groups is not None else LocalGroups()
        self.catalog = Catalog(router)
        self.clients: dict[int, ClientState] = {}
        # (stream, topic) names -> their Iggy ids, for ClientDetails' group memberships.
        self.group_ids: dict[tuple[str, str], tuple[int, int]] = {}
        self.started_us = time.time_ns() // 1000
        self._client_ids = itertools.count(settings.first_client_id)
        self._sessions = itertools.count(1)
        # Built per service from the modules' tables, so a test may patch one entry first.
        self.handlers: dict[type[Command], CommandHandler[Command]] = {
            **iggy_system.HANDLERS,
            **iggy_streams.HANDLERS,
            **iggy_data.HANDLERS,
            **iggy_groups.HANDLERS,
        }

    def handler(self) -> Handler:
        return self.handle

    def new_session_number(self) -> int:
        return next(self._sessions)

    def _address(self, conn: Connection) -> tuple[str, int]:
        s = self.settings
        return advertised_address(conn, s.advertised_host, s.advertised_port, 8090)

    async def handle(self, conn: Connection) -> None:
        codec = IggyServerCodec(self.settings.max_frame_bytes)
        client = ClientState(client_id=next(self._client_ids), address=conn.peer)
        host, port = self._address(conn)
        session = Session(self, conn, client, host, port)
        self.clients[client.client_id] = client
        conn.bind(client_id=client.client_id)
        try:
            await self._serve(session, codec)
        finally:
            self.clients.pop(client.client_id, None)
            self.groups.leave_all(client.client_id)

    async def _serve(self, session: Session, codec: IggyServerCodec) -> None:
        conn = session.conn
        metrics = conn.metrics
        while True:
            try:
                req = codec.next_request()
            except RemoteProtocolError as exc:
                if codec.rejected is None:
                    raise
                # A frame whose body is malformed: answer its status, keep the connection.
                status = (
                    exc.hint if isinstance(exc.hint, int) and exc.hint else Status.INVALID_FORMAT
                )
                conn.log.info("malformed iggy request", code=codec.rejected.code, error=str(exc))
                metrics.observe_command(
                    tr.PROTOCOL, "malformed", _WIRE_NAMES.get(codec.rejected.code, "unknown"),
                    0.0, "invalid_request",
                )  # fmt: skip
                await conn.send(_refusal(codec, codec.rejected, status))
                continue
            if req is NEED_DATA:
                await conn.feed(codec)
                continue
            if req is CONNECTION_CLOSED:
                return
            session.era = req.era
            wire_command = _WIRE_NAMES.get(req.code, "unknown")
            with conn.request(wire_command) as request:
                # Answered by the gateway itself (users, groups, system): timed as this command.
                request.command = wire_command
                session.ctx = request.ctx
                # authorized as the logged-in user (None until then: anonymous)
                request.ctx.user = None if session.user is None else session.user.username
                reply, request.error_type = await self._answer(session, codec, req)
                await conn.send(reply)

    async def _answer(
        self, session: Session, codec: IggyServerCodec, req: IggyRequest
    ) -> tuple[bytes | Gather, str]:
        command = req.command
        if session.user is None and req.code not in _BEFORE_LOGIN:
            return codec.send_error(req, Status.UNAUTHENTICATED), "unauthorized"
        if isinstance(command, fs.UnknownCommand):
            # A code (or VSR operation) this framing does not define: the real server's
            # command parser answers InvalidCommand (§8).
            return codec.send_error(req, Status.INVALID_COMMAND), "invalid_request"
        handler = self.handlers.get(type(command))
        if handler is None:
            # A command Iggy defines that this gateway does not serve (GetSnapshot,
            # DeleteSegments): the feature is unavailable here, not the command invalid.
            return codec.send_error(req, Status.FEATURE_UNAVAILABLE), "unsupported"
        try:
            body = await handler(session, command)
        except GatewayError as exc:
            session.conn.log.debug("iggy command failed", code=req.code, error=exc.message)
            status = tr.status_of(exc, by_name=_named(command, exc))
            if req.code in _LOGINS and req.framing is Framing.VSR:
                return self._evict(codec, req, status), exc.error_type
            return codec.send_error(req, status), exc.error_type
        if isinstance(body, fs.LoginRegisterResponse):
            session.client.session = body.session
        if isinstance(body, fm.PolledMessages) and body.batches:
            return codec.send_polled(req, body), ""  # stored batches sent from where they are
        return codec.send_ok(req, body), ""

    @staticmethod
    def _evict(codec: IggyServerCodec, req: IggyRequest, status: int) -> bytes:
        return codec.send_eviction(req, eviction_of(status))


def _refusal(codec: IggyServerCodec, req: IggyRequest, status: int) -> bytes:
    header = req.header
    if req.framing is Framing.VSR and header is not None and header.operation == Operation.REGISTER:
        return codec.send_eviction(req, EvictionReason.MALFORMED_LOGIN)  # as the real server
    return codec.send_error(req, status)


def _named(command: Command, exc: GatewayError) -> bool:
    """Did the request name what was not found by a string identifier? (*NameNotFound)"""
    # Not groups: the real server says "Consumer group with ID: ... was not found" (5000)
    # however the group was named.
    attr = {UnknownStream: "stream_id", UnknownTopic: "topic_id"}
    for cls, name in attr.items():
        if isinstance(exc, cls):
            return isinstance(getattr(command, name, None), str)
    return False


__all__ = ["IggyService", "IggySettings"]
