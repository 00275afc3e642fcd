"""The state one RabbitMQ Stream connection's handlers share (the listener is
``gateway.listeners.rabbitmq_stream.service``): settings, connection states, the Session."""

from __future__ import annotations

import contextlib
import enum
import itertools
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import trio

from gateway.listeners.connection import Connection
from gateway.listeners.rabbitmq_stream.catalog import Catalog
from gateway.model import Forbidden, Unauthorized, UnknownUser
from gateway.model.permissions import Action
from gateway.model.users import User, allowed
from gateway.router import RequestContext, Router
from gateway.translate.rabbitmq_stream import requests as tr
from protocols import rabbitmq_stream as rs

if TYPE_CHECKING:
    from gateway.listeners.rabbitmq_stream.consume import Subscription
    from gateway.listeners.rabbitmq_stream.publish import Publisher
    from gateway.listeners.rabbitmq_stream.service import RabbitStreamService

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


__all__ = ["CLOSE_GRACE_S", "MECHANISMS", "Closed", "RabbitStreamSettings", "Session", "State"]
