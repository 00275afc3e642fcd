"""One authorization model for every protocol: each canonical command -> an action of the user
store's permissions (Iggy's model: global, per stream, per topic), checked by the router before
the command runs, so that no listener can forget it.

Kafka's ACLs are the reference for what a command needs: TOPIC READ (fetch, offsets), TOPIC
WRITE (produce), TOPIC DESCRIBE (metadata; implied by READ and WRITE), TOPIC CREATE/DELETE/ALTER
(manage), GROUP READ (membership; here: reading somewhere in the group's stream) and CLUSTER
(streams, idempotent producer ids, server statistics). The refusal names what was refused on
(``TopicForbidden``/``GroupForbidden``/``ClusterForbidden``) so every protocol answers its own
code. Permissions name streams and topics by their numeric ids; names are resolved through the
backend's stream list, cached briefly, and only for users whose global flags do not decide.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from gateway.config import ANONYMOUS_ACCESS, Config
from gateway.coordination import UserStore
from gateway.model import (
    AddToTransaction,
    Append,
    Authenticate,
    AwaitData,
    ClusterForbidden,
    Command,
    CommitOffset,
    CommitTransactionOffsets,
    CreatePartitions,
    CreateStream,
    CreateTopic,
    DeleteGroup,
    DeleteOffset,
    DeletePartitions,
    DeleteRecords,
    DeleteStream,
    DeleteTopic,
    DescribeGroup,
    DescribeTopic,
    EndTransaction,
    FetchOffset,
    Forbidden,
    GroupForbidden,
    Heartbeat,
    InitProducer,
    InitTransaction,
    JoinGroup,
    LeaveGroup,
    ListGroups,
    ListOffsets,
    ListStreams,
    ListStreamsResult,
    ListTopics,
    PublisherSequence,
    PurgeStream,
    PurgeTopic,
    Read,
    Stats,
    SyncGroup,
    Topic,
    TopicForbidden,
    UnknownUser,
    UpdateStream,
    UpdateTopic,
)
from gateway.model.permissions import (
    Action,
    GlobalPermissions,
    Permissions,
    StreamPermissions,
    grants,
)
from gateway.model.users import User, UserStatus, allowed

ANONYMOUS = "anonymous"
_LEVEL_FLAGS: dict[str, dict[str, bool]] = {
    "none": {},
    "read": {"read_streams": True},  # -> read_topics -> poll_messages
    "write": {"read_streams": True, "send_messages": True},
    "manage": {"manage_streams": True, "read_streams": True, "read_servers": True},
}

# The actions a Kafka DESCRIBE stands for: seeing a topic in Metadata. Kafka implies it from
# READ, WRITE and the topic admin operations; so does this.
_DESCRIBE: tuple[Action, ...] = ("read_topics", "poll_messages", "send_messages", "manage_topics")


def requiring_authentication(config: Config) -> tuple[str, ...]:
    """The enabled listeners an operator made authenticate where they need not: Kafka with
    SASL, any listener whose TLS requires a client certificate. (Iggy and RabbitMQ Stream always
    log in, with the built-in root at the least; that alone is not "authentication configured",
    or a gateway left at its defaults would lock out its Kafka and Rog clients.)"""
    listeners = config.listeners
    out: list[str] = []
    for name in ("kafka", "rabbitmq_stream", "iggy", "rog"):
        listener = getattr(listeners, name)
        if not listener.enabled:
            continue
        sasl = name == "kafka" and listeners.kafka.sasl
        tls = getattr(listener, "tls", None)
        mtls = tls is not None and tls.enabled and tls.client_auth == "required"
        if sasl or mtls:
            out.append(f"{name} ({'sasl' if sasl else 'tls client certificates'})")
    return tuple(out)


def anonymous_permissions(level: str, *, authentication_required: bool) -> Permissions:
    if level == "auto":
        return Permissions() if authentication_required else Permissions.all()
    if level not in _LEVEL_FLAGS:
        raise ValueError(f"auth.anonymous: one of {', '.join(ANONYMOUS_ACCESS)}, not {level!r}")
    return Permissions(global_permissions=GlobalPermissions(**_LEVEL_FLAGS[level]))


def anonymous_summary(level: str, required: tuple[str, ...]) -> str:
    """The one line ``streamgate run`` logs at start about unauthenticated access."""
    if level == "auto" and not required:
        return (
            "anonymous access: everything (no listener requires authentication; Rog and Kafka"
            " without SASL clients act as 'anonymous'; set auth.anonymous to restrict)"
        )
    if level in ("auto", "none"):
        why = f" ({', '.join(required)} requires authentication)" if required else ""
        return f"anonymous access denied{why}; grant it with auth.anonymous=read|write|manage"
    return f"anonymous access: {level} on every stream (auth.anonymous={level})"


def anonymous_line(level: str, required: tuple[str, ...], stored: User | None) -> str:
    """``anonymous_summary``, unless the store holds a user "anonymous", whose grants apply."""
    if stored is None:
        return anonymous_summary(level, required)
    return (
        f"anonymous access: the grants of the stored user '{ANONYMOUS}' (streamgate users list"
        " shows them); auth.anonymous does not apply while that user exists"
    )


def anonymous_user(permissions: Permissions) -> User:
    # id -1: never a stored user's (ids count from 0, the root).
    return User(
        id=-1,
        username=ANONYMOUS,
        status=UserStatus.ACTIVE,
        permissions=permissions,
        created_at_us=0,
    )


class Authorizer:
    """Decides whether a user may run a canonical command (``check`` raises, ``permits`` says)."""

    def __init__(
        self,
        users: UserStore,
        list_streams: Callable[[ListStreams], Awaitable[ListStreamsResult]],
        *,
        anonymous: Permissions,
        ttl_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.users = users
        self.anonymous = anonymous_user(anonymous)
        self._list_streams = list_streams
        self._ttl_s = ttl_s
        self._clock = clock
        self._ids: dict[str, tuple[int, dict[str, int]]] = {}  # stream -> (id, topic -> id)
        self._ids_at = -float("inf")

    def invalidate(self) -> None:
        """Streams or topics changed: resolve names afresh."""
        self._ids_at = -float("inf")

    def user(self, username: str | None) -> User:
        """The user as it is now: permission changes, deactivation and deletion apply at once
        to connections already authenticated (as Iggy's own sessions do). A name the store does
        not hold (deleted since it logged in; a TLS client certificate's principal that is no
        user) may do nothing, as a Kafka principal without ACLs."""
        if username is None:
            # A stored user named "anonymous" (granted per stream and topic with `streamgate
            # users grant anonymous ...`) overrides auth.anonymous, as Kafka's ACLs on
            # User:ANONYMOUS do.
            stored = self.users.find_user(ANONYMOUS)
            return self.anonymous if stored is None else stored
        try:
            return self.users.get_user(username)
        except UnknownUser:
            return User(
                id=-1,
                username=username,
                status=UserStatus.ACTIVE,
                permissions=Permissions(),
                created_at_us=0,
            )

    async def permits(self, cmd: Command[Any], username: str | None) -> bool:
        try:
            await self.check(cmd, username)
        except Forbidden:
            return False
        return True

    async def check(self, cmd: Command[Any], username: str | None) -> None:
        user = self.user(username)  # an inactive user is allowed nothing (``allowed``)
        match cmd:
            case Authenticate() | ListStreams() | ListTopics():
                # Logging in needs no permission; listings are filtered by the listener that
                # shows them (Kafka Metadata: topics the user may describe; Iggy: read_streams).
                return
            case Append() | PublisherSequence():
                await self._topic(user, cmd.topic, ("send_messages",), "send to")
            case Read() | CommitOffset() | FetchOffset() | DeleteOffset():
                await self._topic(user, cmd.topic, ("poll_messages",), "read from")
            case AwaitData():
                for topic in dict.fromkeys(t for t, _, _ in cmd.targets):
                    await self._topic(user, topic, ("poll_messages",), "read from")
            case ListOffsets() | DescribeTopic():
                await self._topic(user, cmd.topic, _DESCRIBE, "describe")
            case (
                DeleteTopic()
                | UpdateTopic()
                | CreatePartitions()
                | DeletePartitions()
                | PurgeTopic()
                | DeleteRecords()
            ):
                await self._topic(user, cmd.topic, ("manage_topics",), "manage")
            case CreateTopic():
                # on the stream it goes into; a stream that does not exist yet (Kafka's and
                # Rog's namespace, created with its first topic) needs the global flag
                sid = (await self._stream_id(user, cmd.topic.stream)) if _scoped(user) else None
                if not allowed(user, "manage_topics", sid):
                    raise TopicForbidden(_denied(user, "create", f"topic {cmd.topic}"))
            case CreateStream():
                if not allowed(user, "manage_streams"):
                    raise ClusterForbidden(_denied(user, "create", f"stream {cmd.stream!r}"))
            case DeleteStream() | UpdateStream() | PurgeStream():
                sid = (await self._stream_id(user, cmd.stream)) if _scoped(user) else None
                if not allowed(user, "manage_streams", sid):
                    raise ClusterForbidden(_denied(user, "manage", f"stream {cmd.stream!r}"))
            case JoinGroup():
                # GROUP READ: the subscribed topics must be readable (all of them: Kafka's
                # consumer fetches each); without topics, reading somewhere in the stream.
                if cmd.topics:
                    for topic in cmd.topics:
                        if not await self._may(user, topic, ("poll_messages",)):
                            raise GroupForbidden(
                                _denied(user, "join group", f"{cmd.group!r} to read {topic}")
                            )
                elif not await self._reads_in(user, cmd.stream):
                    raise GroupForbidden(_denied(user, "join group", repr(cmd.group)))
            case SyncGroup() | Heartbeat() | LeaveGroup() | DescribeGroup() | DeleteGroup():
                if not await self._reads_in(user, cmd.stream):
                    raise GroupForbidden(_denied(user, "use group", repr(cmd.group)))
            case ListGroups():
                if not await self._reads_in(user, cmd.stream):
                    raise ClusterForbidden(_denied(user, "list", "groups"))
            case AddToTransaction():
                # Kafka: WRITE on the transactional id (no such resource here: any user who
                # may send) and on each topic; a group's offsets need reading in its stream.
                for topic in dict.fromkeys(t for t, _ in cmd.partitions):
                    await self._topic(user, topic, ("send_messages",), "send to")
                if cmd.groups and not await self._reads_in(user, None):
                    raise GroupForbidden(_denied(user, "commit offsets of", repr(cmd.groups)))
                if not cmd.partitions and not cmd.groups:
                    await self._may_send(user)
            case CommitTransactionOffsets():
                for topic in dict.fromkeys(t for t, *_ in cmd.offsets):
                    await self._topic(user, topic, ("poll_messages",), "read from")
            case InitTransaction() | EndTransaction():
                await self._may_send(user)
            case InitProducer():
                await self._may_send(user)
            case Stats():
                if not allowed(user, "read_servers"):
                    raise ClusterForbidden(_denied(user, "read", "server statistics"))
            case _:
                # A command this table does not know is refused, not waved through.
                raise ClusterForbidden(_denied(user, "run", cmd.name))

    async def _may_send(self, user: User) -> None:
        # Kafka: IDEMPOTENT_WRITE on the cluster, implied by WRITE on any topic.
        active = user.status is UserStatus.ACTIVE
        if not (active and _anywhere(user.permissions, "send_messages")):
            raise ClusterForbidden(_denied(user, "get", "a producer id"))

    async def _topic(
        self, user: User, topic: Topic, actions: tuple[Action, ...], verb: str
    ) -> None:
        if not await self._may(user, topic, actions):
            raise TopicForbidden(_denied(user, verb, f"topic {topic}"))

    async def _may(self, user: User, topic: Topic, actions: Iterable[Action]) -> bool:
        actions = tuple(actions)
        if any(allowed(user, a) for a in actions):
            return True
        if not user.permissions.streams:
            return False
        ids = await self._resolve()
        found = ids.get(topic.stream)
        if found is None:
            return False
        sid, topics = found
        tid = topics.get(topic.name)
        return any(allowed(user, a, sid, tid) for a in actions)

    async def _stream_id(self, user: User, stream: str) -> int | None:
        found = (await self._resolve()).get(stream)
        return None if found is None else found[0]

    async def _reads_in(self, user: User, stream: str | None) -> bool:
        """Whether the user may read some topic of ``stream`` (any stream when None)."""
        if allowed(user, "poll_messages"):
            return True
        if user.status is not UserStatus.ACTIVE or not user.permissions.streams:
            return False
        if stream is None:
            return _anywhere(user.permissions, "poll_messages")
        sid = await self._stream_id(user, stream)
        if sid is None or sid not in user.permissions.streams:
            return False
        return _stream_has(sid, user.permissions.streams[sid], "poll_messages")

    async def _resolve(self) -> dict[str, tuple[int, dict[str, int]]]:
        now = self._clock()
        if now - self._ids_at >= self._ttl_s:
            streams = (await self._list_streams(ListStreams())).streams
            self._ids = {s.name: (s.id, {t.topic.name: t.id for t in s.topics}) for s in streams}
            self._ids_at = now
        return self._ids


def _scoped(user: User) -> bool:
    """Whether the user has stream- or topic-level grants (else the global flags decide)."""
    return bool(user.permissions.streams)


def _stream_has(sid: int, sp: StreamPermissions, action: Action) -> bool:
    one = Permissions(streams={sid: sp})
    if grants(one, action, sid):
        return True
    return any(grants(one, action, sid, tid) for tid in sp.topics)


def _anywhere(p: Permissions, action: Action) -> bool:
    if grants(p, action):
        return True
    return any(_stream_has(sid, sp, action) for sid, sp in p.streams.items())


def _denied(user: User, verb: str, what: str) -> str:
    return f"user {user.username!r} may not {verb} {what}"


__all__ = [
    "ANONYMOUS",
    "Authorizer",
    "anonymous_line",
    "anonymous_permissions",
    "anonymous_summary",
    "anonymous_user",
    "requiring_authentication",
]
