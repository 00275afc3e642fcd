"""What one Iggy connection's handlers share: the listener's settings, the Session, and the typed
handler table entries. The listener (``service``) imports the handlers; they import only this."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol, TypeAlias, TypeVar, cast

from gateway.coordination import UserStore
from gateway.listeners.connection import Connection
from gateway.listeners.iggy.catalog import Catalog
from gateway.listeners.iggy.group_store import IggyGroups
from gateway.model import Forbidden, Unauthorized, UnknownUser
from gateway.model.permissions import Action
from gateway.model.users import User, allowed
from gateway.router import RequestContext, Router
from gateway.translate.iggy import requests as tr
from protocols.iggy import Command, Era, ReplyBody


@dataclass(frozen=True, slots=True, kw_only=True)
class IggySettings:
    advertised_host: str = ""  # "" = the address the client connected to
    advertised_port: int = 0
    cluster_name: str = "streamgate"
    max_frame_bytes: int = 64 << 20
    max_poll_bytes: int = 32 << 20
    # False where this process is one of several serving the port (``--workers``) and its
    # consumer groups live in its own memory: they are refused rather than split.
    consumer_groups: bool = True
    # The first client id. Gateways sharing groups start at random points (a member is listed by
    # its client id, through every gateway), so that two clients are unlikely to share one.
    first_client_id: int = 1


@dataclass(slots=True)
class ClientState:
    """One connection as GetMe/GetClient(s) describe it."""

    client_id: int
    address: str
    user_id: int | None = None
    session: int = 0


class Service(Protocol):
    """What handlers use of the listener every connection shares (``IggyService``)."""

    @property
    def router(self) -> Router: ...

    @property
    def settings(self) -> IggySettings: ...

    @property
    def users(self) -> UserStore: ...

    @property
    def groups(self) -> IggyGroups: ...

    @property
    def catalog(self) -> Catalog: ...

    @property
    def clients(self) -> dict[int, ClientState]: ...

    @property
    def group_ids(self) -> dict[tuple[str, str], tuple[int, int]]: ...

    @property
    def started_us(self) -> int: ...

    def new_session_number(self) -> int: ...


@dataclass(slots=True)
class Session:
    """What one connection's handlers share."""

    service: Service
    conn: Connection
    client: ClientState
    host: str
    port: int
    era: Era = Era.C
    user: User | None = None
    ctx: RequestContext = field(default_factory=lambda: RequestContext(tr.PROTOCOL, ""))

    @property
    def router(self) -> Router:
        return self.service.router

    @property
    def catalog(self) -> Catalog:
        return self.service.catalog

    @property
    def users(self) -> UserStore:
        return self.service.users

    @property
    def groups(self) -> IggyGroups:
        return self.service.groups

    @property
    def legacy(self) -> bool:
        return self.era is not Era.C

    @property
    def partition_shift(self) -> int:
        """Era A numbers partitions from 1 (§9.3); everyone else from 0."""
        return 1 if self.era is Era.A else 0

    def require(self, action: Action, stream: int | None = None, topic: int | None = None) -> None:
        """Checked against the user as it is now: permission changes, deactivation and deletion
        apply to sessions already logged in, as on the real server."""
        if self.user is None:
            raise Unauthorized("not logged in")
        try:
            self.user = self.users.get_user(self.user.id)
        except UnknownUser:
            self.log_out()
            raise Unauthorized("the user was deleted") from None
        if not allowed(self.user, action, stream, topic):
            raise Forbidden(f"user {self.user.username!r} may not {action.replace('_', ' ')}")

    def log_in(self, user: User) -> None:
        self.user = user
        self.client.user_id = user.id
        self.conn.bind(user=user.username)
        self.conn.authenticated()

    def log_out(self) -> None:
        self.user = None
        self.client.user_id = None
        self.groups.leave_all(self.client.client_id)


C = TypeVar("C", bound=Command)
# A handler of one command class; None = an empty OK body.
CommandHandler: TypeAlias = Callable[[Session, C], Awaitable[ReplyBody | None]]
HandlerEntry: TypeAlias = tuple[type[Command], CommandHandler[Command]]


def handles(cls: type[C], handler: CommandHandler[C]) -> HandlerEntry:
    """One entry of a handler table, where mypy checks that ``handler`` takes a ``cls``. The
    table hands each handler only commands of its own class (it is looked up by
    ``type(command)``), which is what makes the widening to ``Command`` sound."""
    # (``type[C]`` is a ``type[Command]``; mypy does not see it through the union bound.)
    return cast("type[Command]", cls), cast("CommandHandler[Command]", handler)


__all__ = [
    "ClientState", "CommandHandler", "HandlerEntry", "IggySettings", "Service", "Session",
    "handles",
]  # fmt: skip
