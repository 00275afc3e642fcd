"""Kafka ACLs <-> the gateway's permission flags, for the ACL APIs (``acls``): the operations each
flag grants on its level's resource (the table in ``acls``' docstring), the ACL bindings a user's
flags stand for, and the flags that grant exactly a wanted set of operations, if any do."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final, Literal, TypeVar

from kio.schema.errors import ErrorCode

from gateway.coordination import UserStore
from gateway.model.permissions import Permissions, StreamPermissions, TopicPermissions
from gateway.model.users import User


class Resource(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class Op(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class Permission(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


class Pattern(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


CLUSTER_NAME: Final = "kafka-cluster"
WILDCARD: Final = "*"
_E = TypeVar("_E", bound=enum.IntEnum)

Level = Literal["topic", "stream", "global", "cluster"]
MANAGE_ONE: Final = frozenset({Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.ALTER_CONFIGS})
_READ, _WRITE, _ALL = frozenset({Op.READ}), frozenset({Op.WRITE}), frozenset({Op.ALL})
# flag -> the Kafka operations it grants on its level's resource (module docstring). Of flags
# granting the same, the first is the one an ACL adds.
_FLAGS: Final[Mapping[Level, Mapping[str, frozenset[Op]]]] = {
    "topic": {"manage_topic": MANAGE_ONE, "poll_messages": _READ, "read_topic": _READ,
              "send_messages": _WRITE},
    "stream": {"manage_topics": _ALL, "manage_stream": _ALL, "poll_messages": _READ,
               "read_topics": _READ, "read_stream": _READ, "send_messages": _WRITE},
    "global": {"manage_topics": _ALL, "manage_streams": _ALL, "poll_messages": _READ,
               "read_topics": _READ, "read_streams": _READ, "send_messages": _WRITE},
    "cluster": {"manage_users": frozenset({Op.ALTER}), "read_users": frozenset({Op.DESCRIBE})},
}  # fmt: skip

# Why an operation cannot be granted on one topic, or on the cluster.
NO_SUCH: Final = "the gateway has no such permission"
TOPIC_WHY: Final = {
    Op.ALL: "ALL includes CREATE, which the gateway grants only on every topic (ALL on '*')",
    Op.CREATE: "the gateway grants topic creation only on every topic (ALL on '*')",
    Op.DESCRIBE: "it is implied by READ and WRITE; the gateway has no describe-only permission",
    Op.DESCRIBE_CONFIGS: "it is implied by READ and WRITE (describing a topic shows its configs)",
}
CLUSTER_WHY: Final = {
    Op.CREATE: "topic creation is granted with ALL on TOPIC '*'",
    Op.IDEMPOTENT_WRITE: "it is implied by WRITE on any topic, as in Kafka 3",
    Op.DESCRIBE_CONFIGS: "broker configs are static and shown to every client",
    Op.ALTER_CONFIGS: "broker configs are static",
    Op.CLUSTER_ACTION: "a gateway has no inter-broker requests",
    Op.ALL: "grant ALTER (ACLs and users) and DESCRIBE instead",
}


class AclRefused(Exception):
    def __init__(self, message: str, code: ErrorCode = ErrorCode.invalid_request) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class Scope:
    """Where flags are held: the cluster's and the global data flags, the namespace stream's,
    or one of its topics'."""

    level: Level
    sid: int | None = None
    tid: int | None = None


CLUSTER_SCOPE, GLOBAL_SCOPE = Scope("cluster"), Scope("global")


@dataclass(frozen=True, slots=True, order=True)
class Acl:
    """One ACL as Kafka shows it: always ALLOW, LITERAL, host '*'."""

    resource: Resource
    name: str
    principal: str
    op: Op


@dataclass(frozen=True, slots=True)
class Namespace:
    """The Kafka listener's stream: its id (None until its first topic) and its topics' ids."""

    stream: str
    sid: int | None
    names: Mapping[int, str]  # topic id -> name

    def topic_id(self, name: str) -> int | None:
        return next((tid for tid, n in self.names.items() if n == name), None)


def enum_of(cls: type[_E], value: int) -> _E:
    try:
        return cls(value)
    except ValueError:
        return cls(0)  # UNKNOWN, as Kafka reads a code it does not know


def _ops(level: Level, flags: Iterable[str]) -> frozenset[Op]:
    table = _FLAGS[level]
    return frozenset(op for f in flags for op in table[f])


def _express(level: Level, current: frozenset[str], target: frozenset[Op]) -> frozenset[str] | None:
    """Flags that grant exactly ``target`` on a resource of ``level``, keeping those of
    ``current`` that grant nothing beyond it; None when no set of flags does."""
    table = _FLAGS[level]
    kept = {f for f in current if table[f] <= target}
    need = set(target - _ops(level, kept))
    for flag in sorted(table, key=lambda f: -len(table[f])):  # the widest first: fewest flags
        if need & table[flag] and table[flag] <= target:
            kept.add(flag)
            need -= table[flag]
    return None if need else frozenset(kept)


def _flags_of(obj: Any, level: Level) -> frozenset[str]:
    return frozenset(f for f in _FLAGS[level] if getattr(obj, f))


def _current(user: User, scope: Scope) -> frozenset[str]:
    p = user.permissions
    if scope.level in ("cluster", "global"):
        return _flags_of(p.global_permissions, scope.level)
    sp = p.streams.get(scope.sid) if scope.sid is not None else None
    if sp is None:
        return frozenset()
    if scope.level == "stream":
        return _flags_of(sp, "stream")
    tp = sp.topics.get(scope.tid) if scope.tid is not None else None
    return frozenset() if tp is None else _flags_of(tp, "topic")


def _scopes(user: User, ns: Namespace) -> list[Scope]:
    """Where the user may hold flags Kafka can see (not topics that no longer exist)."""
    scopes = [CLUSTER_SCOPE, GLOBAL_SCOPE]
    sp = user.permissions.streams.get(ns.sid) if ns.sid is not None else None
    if sp is not None:
        scopes.append(Scope("stream", ns.sid))
        scopes += [Scope("topic", ns.sid, tid) for tid in sorted(sp.topics) if tid in ns.names]
    return scopes


def _resource(scope: Scope, ns: Namespace) -> tuple[Resource, str]:
    if scope.level == "cluster":
        return Resource.CLUSTER, CLUSTER_NAME
    if scope.level == "topic":
        assert scope.tid is not None
        return Resource.TOPIC, ns.names[scope.tid]
    return Resource.TOPIC, WILDCARD


def bindings(users: Iterable[User], ns: Namespace) -> dict[Acl, list[tuple[User, Scope]]]:
    """Every ACL the users' flags stand for, with the scopes it comes from, sorted."""
    found: dict[Acl, list[tuple[User, Scope]]] = {}
    for user in users:
        for scope in _scopes(user, ns):
            resource, name = _resource(scope, ns)
            for op in _ops(scope.level, _current(user, scope)):
                acl = Acl(resource, name, f"User:{user.username}", op)
                found.setdefault(acl, []).append((user, scope))
    return dict(sorted(found.items()))


def with_flags(p: Permissions, scope: Scope, flags: frozenset[str]) -> Permissions:
    values: dict[str, Any] = {f: f in flags for f in _FLAGS[scope.level]}
    if scope.level in ("cluster", "global"):
        return replace(p, global_permissions=replace(p.global_permissions, **values))
    assert scope.sid is not None
    streams = dict(p.streams)
    sp = streams.get(scope.sid, StreamPermissions())
    if scope.level == "stream":
        sp = replace(sp, **values)
    else:
        assert scope.tid is not None
        topics = dict(sp.topics)
        topics[scope.tid] = replace(topics.get(scope.tid, TopicPermissions()), **values)
        if topics[scope.tid] == TopicPermissions():
            del topics[scope.tid]
        sp = replace(sp, topics=topics)
    streams[scope.sid] = sp
    if sp == StreamPermissions():
        del streams[scope.sid]
    return replace(p, streams=streams)


def planned(user: User, scope: Scope, add: set[Op], remove: set[Op]) -> frozenset[str] | None:
    """The user's flags on the scope with ``add`` granted and ``remove`` revoked, if flags can
    say exactly the result; None when they cannot."""
    current = _current(user, scope)
    return _express(scope.level, current, (_ops(scope.level, current) | add) - remove)


def grant_ops(store: UserStore, username: str, scope: Scope, ops: set[Op]) -> bool:
    """Grants ``ops`` if flags can say exactly the result (False: nothing changed). No
    checkpoint between reading the user and writing it."""
    user = store.get_user(username)
    flags = planned(user, scope, ops, set())
    if flags is None:
        return False
    if flags != _current(user, scope):
        store.update_permissions(user.id, with_flags(user.permissions, scope, flags))
    return True


__all__ = [
    "CLUSTER_NAME",
    "CLUSTER_SCOPE",
    "CLUSTER_WHY",
    "GLOBAL_SCOPE",
    "MANAGE_ONE",
    "NO_SUCH",
    "TOPIC_WHY",
    "WILDCARD",
    "Acl",
    "AclRefused",
    "Level",
    "Namespace",
    "Op",
    "Pattern",
    "Permission",
    "Resource",
    "Scope",
    "bindings",
    "enum_of",
    "grant_ops",
    "planned",
    "with_flags",
]
