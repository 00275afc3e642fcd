"""The state one RabbitMQ Stream connection's handlers share: settings, connection states, the
publishers and subscriptions a connection holds, the Session, and the typed handler table entries.
The listener (``service``) imports the handlers; they import only this."""

from __future__ import annotations

import contextlib
import enum
import itertools
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeAlias, TypeVar, cast

import trio

from gateway.coordination import UserStore
from gateway.listeners.connection import Connection
from gateway.listeners.rabbitmq_stream.catalog import Catalog, Target
from gateway.listeners.rabbitmq_stream.sac import Deciding, GroupKey
from gateway.model import Forbidden, Unauthorized, UnknownUser
from gateway.model.permissions import Action
from gateway.model.users import User, allowed
from gateway.router import RequestContext, Router
from gateway.translate.rabbitmq_stream import requests as tr
from gateway.translate.rabbitmq_stream.notes import Filter
from protocols import rabbitmq_stream as rs
from protocols.rabbitmq_stream import ResponseCode

MECHANISMS = ("PLAIN",)
CLOSE_GRACE_S = 5.0  # how long a Close waits for the client's CloseResponse
REFUSED_LINGER_S = 1.0  # how long a refused connection waits for the client's own Close
# How long a request waits for a subscription's delivery to settle: RabbitMQ reads the chunks
# a Subscribe or Credit allows before it reads the next frame, however long that takes, and
# clients (the RabbitMQ backend's barrier) rely on it; the bound only keeps a stuck backend from
# holding the connection forever (a read fails long before: the router's timeouts).
SETTLE_WAIT_S = 60.0


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
    # False where this process is one of several serving the port (``--workers``) and the
    # backend does not deduplicate publishers itself: a reference's sequence would be split
    # between processes, so deduplicating publishers are refused.
    gateway_dedup: bool = True


class State(enum.IntEnum):
    CONNECTED = 0
    AUTHENTICATED = 1  # Tune sent
    TUNED = 2
    OPEN = 3


class Closed(Exception):
    """The connection ends normally (Close exchanged, or the client asked)."""


class Refused(Closed):
    """A refusal (a failed login, an unknown virtual host) was answered and the connection ends.
    The client may still send its Close at once (rstream does, closing its half-made client):
    for ``REFUSED_LINGER_S`` it is answered, so the client reads a CloseResponse, not a reset
    from a socket already closed (which rstream raised instead of the refusal)."""


class Service(Protocol):
    """What handlers use of the listener every connection shares (``RabbitStreamService``)."""

    @property
    def router(self) -> Router: ...

    @property
    def settings(self) -> RabbitStreamSettings: ...

    @property
    def users(self) -> UserStore: ...

    @property
    def catalog(self) -> Catalog: ...

    @property
    def active(self) -> Deciding[Subscription]: ...

    @property
    def sessions(self) -> set[Session]: ...

    # (canonical stream, rabbit stream, reference) -> the live publisher with that reference
    @property
    def references(self) -> dict[tuple[str, str, str], Publisher]: ...


@dataclass(slots=True, eq=False)
class Publisher:
    id: int
    reference: str
    target: Target
    last: int = 0  # the highest publishing id stored (references only)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.target.topic.stream, self.target.name, self.reference)


@dataclass(slots=True, eq=False)
class Subscription:
    """One Subscribe: where it delivers from, its credit, and (for a single active consumer) its
    place in the group; ``consume.set_active`` is what (de)activates it."""

    session: Session
    id: int
    target: Target
    spec: rs.OffsetSpec
    credit: int
    name: str = ""  # the consumer name (offset reference), "" = none
    sac: bool = False
    super_stream: str = ""
    only: Filter | None = None  # ``filter.N`` / ``match-unfiltered``: the chunks it gets
    active: bool = False
    generation: int = 0  # bumped on every (de)activation: a stale activation gives up
    wake: trio.Event = field(default_factory=trio.Event)
    scope: trio.CancelScope | None = None
    # Set once its delivery has sent what the credit allows of what is there (or it does not
    # deliver): a request after a Subscribe or Credit is answered only then, as RabbitMQ does
    # (clients take such an answer as a barrier behind the Deliver frames).
    settled: trio.Event = field(default_factory=trio.Event)
    delivering: bool = False

    @property
    def group_key(self) -> GroupKey:
        return (self.target.topic, self.target.partition, self.name)

    @property
    def in_super_stream(self) -> bool:
        return bool(self.super_stream)

    @property
    def nursery(self) -> trio.Nursery:
        """Where its single-active-consumer membership runs: the connection's."""
        return self.session.nursery

    @property
    def live(self) -> bool:
        return self.session.subscriptions.get(self.id) is self

    def add_credit(self, credit: int) -> None:
        self.credit = min(self.credit + credit, 0xFFFF)
        self.wake.set()

    def unsettle(self) -> None:
        """Its delivery has new room: what it sends next comes before the next answer."""
        if self.settled.is_set():
            self.settled = trio.Event()

    async def caught_up(self) -> None:
        """Until its delivery settled (bounded by SETTLE_WAIT_S, logged when it elapses)."""
        if self.delivering and not self.settled.is_set():
            with trio.move_on_after(SETTLE_WAIT_S):
                await self.settled.wait()
                return
            self.session.conn.log.warning("delivery did not settle", subscription=self.id)

    def stop(self) -> None:
        if self.scope is not None:
            self.scope.cancel()
        if self.sac:
            self.session.service.active.leave(self)


@dataclass(slots=True, eq=False)
class Session:
    """What one connection's handlers share."""

    service: Service
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

    async def deliveries_written(self) -> None:
        """Until every subscription's delivery sent what it already has to send: the answer to
        a request after this never overtakes Deliver frames of chunks already read (RabbitMQ's
        order on one connection)."""
        for sub in list(self.subscriptions.values()):
            await sub.caught_up()

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

    def forget(self, publisher: Publisher) -> None:
        """``publisher`` no longer holds its reference (deleted, or its connection is gone)."""
        references = self.service.references
        if publisher.reference and references.get(publisher.key) is publisher:
            del references[publisher.key]

    def drop_publishers(self, stream_name: str | None = None) -> int:
        """Forget this connection's publishers (of ``stream_name`` only, when given)."""
        gone = [p for p in self.publishers.values() if stream_name in (None, p.target.name)]
        for publisher in gone:
            del self.publishers[publisher.id]
            self.forget(publisher)
        return len(gone)

    def drop_subscriptions(self, stream_name: str | None = None) -> int:
        """End this connection's subscriptions (of ``stream_name`` only, when given)."""
        gone = [x for x in self.subscriptions.values() if stream_name in (None, x.target.name)]
        for sub in gone:
            del self.subscriptions[sub.id]
            sub.stop()
        return len(gone)

    async def stream_gone(self, name: str) -> None:
        """The stream ``name`` no longer exists: drop what used it and tell the client (§5)."""
        if self.drop_publishers(name) + self.drop_subscriptions(name):
            await self.send(rs.MetadataUpdate(code=ResponseCode.STREAM_NOT_AVAILABLE, stream=name))


F = TypeVar("F", bound=rs.Frame)
# A handler of one frame class: the answer to send, or None (answered already, or never).
FrameHandler: TypeAlias = Callable[[Session, F], Awaitable[rs.Frame | None]]
# What answers a frame of one class whose command failed with a §4 response code.
FailureReply: TypeAlias = Callable[[F, int], rs.Frame]
HandlerEntry: TypeAlias = tuple[type[rs.Frame], FrameHandler[rs.Frame]]
FailureEntry: TypeAlias = tuple[type[rs.Frame], FailureReply[rs.Frame]]


def handles(cls: type[F], handler: FrameHandler[F]) -> HandlerEntry:
    """One entry of a handler table, where mypy checks that ``handler`` takes a ``cls``. The
    table hands each handler only frames of its own class (it is looked up by ``type(frame)``),
    which is what makes the widening to ``rs.Frame`` sound."""
    return cls, cast("FrameHandler[rs.Frame]", handler)


def fails(cls: type[F], reply: FailureReply[F]) -> FailureEntry:
    """One entry of a failure table (checked like ``handles``)."""
    return cls, cast("FailureReply[rs.Frame]", reply)


class _Correlated(Protocol):
    @property
    def correlation_id(self) -> int: ...


def code_reply(cls: type[rs.CodeResponse]) -> Callable[[_Correlated, int], rs.Frame]:
    """The failure answer of a request whose response carries nothing but the code."""
    return lambda f, code: cls(correlation_id=f.correlation_id, code=code)


__all__ = [
    "CLOSE_GRACE_S", "MECHANISMS", "Closed", "FailureEntry", "FailureReply", "FrameHandler",
    "HandlerEntry", "Publisher", "RabbitStreamSettings", "Service", "Session", "State",
    "Subscription", "code_reply", "fails", "handles",
]  # fmt: skip
