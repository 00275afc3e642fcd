"""Kafka's ACL APIs (KIP-140: DescribeAcls 29, CreateAcls 30, DeleteAcls 31) on the gateway's one
authorization model (gateway/authorization.py): an ACL is stored as the user store's allow-only
permission flags, and the ACLs described are derived from every user's flags as they are now,
whoever set them (Kafka, Iggy's UpdatePermissions, ``streamgate users grant``).

Kafka's namespace is the listener's stream (``default``). TOPIC '*' is that stream's
stream-level flags (every topic of it, present and future, as Kafka's wildcard); TOPIC <name> is
the flags of that topic, kept by its numeric id; CLUSTER 'kafka-cluster' is the global
manage_users (ALTER: create and delete ACLs, manage users) and read_users (DESCRIBE: describe
ACLs) flags. What each flag grants, as the router checks commands (Kafka implies DESCRIBE from
READ, WRITE, DELETE and ALTER, DESCRIBE_CONFIGS from ALTER_CONFIGS; so does the gateway, and
neither Kafka nor this lists the implied operations):

  TOPIC <name>  poll_messages, read_topic                READ
                send_messages                            WRITE
                manage_topic                             READ WRITE DELETE ALTER ALTER_CONFIGS
  TOPIC '*'     poll_messages, read_topics, read_stream  READ
                send_messages                            WRITE
                manage_topics, manage_stream             ALL (topic creation included)
  CLUSTER       manage_users ALTER, read_users DESCRIBE

The global data flags (poll_messages ... manage_streams) are listed as TOPIC '*' too, but they
hold on every stream of every protocol, so DeleteAcls does not remove them. An ACL is accepted
only when the user's operations on that resource, with it, are exactly what some set of flags
grants: one CreateAcls may create READ, WRITE, DELETE, ALTER and ALTER_CONFIGS on one topic
together (manage_topic), never DELETE alone. A DeleteAcls filter that matches an ACL it cannot
remove that way (a global flag's, or part of manage_topic's five) deletes nothing and answers
INVALID_REQUEST for the filter with the reason: librdkafka and kafka-python ignore the per-ACL
errors, so a partial deletion would look whole to them.

Refused with INVALID_REQUEST and the reason (Kafka itself accepts some of them; accepting them
here would store an ACL that is not enforced as written): DENY (the model only allows),
PREFIXED patterns, hosts other than '*', principals other than User:<a user of the store>
(User:* too: grants are per user), the root user (it has every permission, like a Kafka super
user, and is never listed), GROUP (a group is authorized by its topics: a user who may read a
topic of the namespace may use every group; grant TOPIC READ), TRANSACTIONAL_ID,
DELEGATION_TOKEN and USER resources, and operations no flag grants on their own (DESCRIBE or
DESCRIBE_CONFIGS alone, CREATE or ALL on one topic: topic creation is granted namespace-wide
only; CLUSTER CREATE, IDEMPOTENT_WRITE (implied by WRITE on any topic, as in Kafka 3),
CLUSTER_ACTION, ALL and the static broker configs). An ACL on a topic that does not exist is
refused with UNKNOWN_TOPIC_OR_PARTITION: Kafka keeps ACLs by name, the model by topic id (a
deleted topic's grants go with it, so a later topic given the same id starts with none, where
Kafka would keep the ACLs of the name). Without a user store or authorizer the three APIs answer
SECURITY_DISABLED, as Kafka without an authorizer does.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final, Literal, TypeVar

from kio.schema.errors import ErrorCode

from gateway.coordination import UserStore
from gateway.coordination.users import ROOT_ID
from gateway.listeners.kafka.session import Session
from gateway.model import GatewayError, ListStreams
from gateway.model.permissions import Action, Permissions, StreamPermissions, TopicPermissions
from gateway.model.users import User, allowed
from protocols.kafka.framing import KafkaRequest


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
_MANAGE_ONE: Final = frozenset({Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.ALTER_CONFIGS})
_READ, _WRITE, _ALL = frozenset({Op.READ}), frozenset({Op.WRITE}), frozenset({Op.ALL})
# flag -> the Kafka operations it grants on its level's resource (module docstring). Of flags
# granting the same, the first is the one an ACL adds.
_FLAGS: Final[Mapping[Level, Mapping[str, frozenset[Op]]]] = {
    "topic": {"manage_topic": _MANAGE_ONE, "poll_messages": _READ, "read_topic": _READ,
              "send_messages": _WRITE},
    "stream": {"manage_topics": _ALL, "manage_stream": _ALL, "poll_messages": _READ,
               "read_topics": _READ, "read_stream": _READ, "send_messages": _WRITE},
    "global": {"manage_topics": _ALL, "manage_streams": _ALL, "poll_messages": _READ,
               "read_topics": _READ, "read_streams": _READ, "send_messages": _WRITE},
    "cluster": {"manage_users": frozenset({Op.ALTER}), "read_users": frozenset({Op.DESCRIBE})},
}  # fmt: skip

# Why an operation cannot be granted on one topic, or on the cluster.
_NO_SUCH: Final = "the gateway has no such permission"
_TOPIC_WHY: Final = {
    Op.ALL: "ALL includes CREATE, which the gateway grants only on every topic (ALL on '*')",
    Op.CREATE: "the gateway grants topic creation only on every topic (ALL on '*')",
    Op.DESCRIBE: "it is implied by READ and WRITE; the gateway has no describe-only permission",
    Op.DESCRIBE_CONFIGS: "it is implied by READ and WRITE (describing a topic shows its configs)",
}
_CLUSTER_WHY: Final = {
    Op.CREATE: "topic creation is granted with ALL on TOPIC '*'",
    Op.IDEMPOTENT_WRITE: "it is implied by WRITE on any topic, as in Kafka 3",
    Op.DESCRIBE_CONFIGS: "broker configs are static and shown to every client",
    Op.ALTER_CONFIGS: "broker configs are static",
    Op.CLUSTER_ACTION: "a gateway has no inter-broker requests",
    Op.ALL: "grant ALTER (ACLs and users) and DESCRIBE instead",
}


class _Refused(Exception):
    def __init__(self, message: str, code: ErrorCode = ErrorCode.invalid_request) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class _Scope:
    """Where flags are held: the cluster's and the global data flags, the namespace stream's,
    or one of its topics'."""

    level: Level
    sid: int | None = None
    tid: int | None = None


_CLUSTER, _GLOBAL = _Scope("cluster"), _Scope("global")


@dataclass(frozen=True, slots=True, order=True)
class _Acl:
    """One ACL as Kafka shows it: always ALLOW, LITERAL, host '*'."""

    resource: Resource
    name: str
    principal: str
    op: Op


@dataclass(frozen=True, slots=True)
class _Namespace:
    """The Kafka listener's stream: its id (None until its first topic) and its topics' ids."""

    stream: str
    sid: int | None
    names: Mapping[int, str]  # topic id -> name

    def topic_id(self, name: str) -> int | None:
        return next((tid for tid, n in self.names.items() if n == name), None)


def _enum(cls: type[_E], value: int) -> _E:
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


def _current(user: User, scope: _Scope) -> frozenset[str]:
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


def _scopes(user: User, ns: _Namespace) -> list[_Scope]:
    """Where the user may hold flags Kafka can see (not topics that no longer exist)."""
    scopes = [_CLUSTER, _GLOBAL]
    sp = user.permissions.streams.get(ns.sid) if ns.sid is not None else None
    if sp is not None:
        scopes.append(_Scope("stream", ns.sid))
        scopes += [_Scope("topic", ns.sid, tid) for tid in sorted(sp.topics) if tid in ns.names]
    return scopes


def _resource(scope: _Scope, ns: _Namespace) -> tuple[Resource, str]:
    if scope.level == "cluster":
        return Resource.CLUSTER, CLUSTER_NAME
    if scope.level == "topic":
        assert scope.tid is not None
        return Resource.TOPIC, ns.names[scope.tid]
    return Resource.TOPIC, WILDCARD


def _bindings(users: Iterable[User], ns: _Namespace) -> dict[_Acl, list[tuple[User, _Scope]]]:
    """Every ACL the users' flags stand for, with the scopes it comes from, sorted."""
    found: dict[_Acl, list[tuple[User, _Scope]]] = {}
    for user in users:
        for scope in _scopes(user, ns):
            resource, name = _resource(scope, ns)
            for op in _ops(scope.level, _current(user, scope)):
                acl = _Acl(resource, name, f"User:{user.username}", op)
                found.setdefault(acl, []).append((user, scope))
    return dict(sorted(found.items()))


def _with_flags(p: Permissions, scope: _Scope, flags: frozenset[str]) -> Permissions:
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


def _planned(user: User, scope: _Scope, add: set[Op], remove: set[Op]) -> frozenset[str] | None:
    """The user's flags on the scope with ``add`` granted and ``remove`` revoked, if flags can
    say exactly the result; None when they cannot."""
    current = _current(user, scope)
    return _express(scope.level, current, (_ops(scope.level, current) | add) - remove)


def _grant(store: UserStore, username: str, scope: _Scope, ops: set[Op]) -> bool:
    """Grants ``ops`` if flags can say exactly the result (False: nothing changed). No
    checkpoint between reading the user and writing it."""
    user = store.get_user(username)
    flags = _planned(user, scope, ops, set())
    if flags is None:
        return False
    if flags != _current(user, scope):
        store.update_permissions(user.id, _with_flags(user.permissions, scope, flags))
    return True


# --- the three APIs ------------------------------------------------------------------------------


def _store(session: Session) -> UserStore:
    store = session.service.users
    assert store is not None
    return store


def _api_refusal(session: Session, action: Action) -> tuple[ErrorCode, str] | None:
    """Why this request may not use the ACL APIs at all, or None."""
    authorizer = session.router.authorizer
    if session.service.users is None or authorizer is None:
        return ErrorCode.security_disabled, "no authorizer: the gateway runs without a user store"
    assert session.ctx is not None
    user = authorizer.user(session.ctx.user)
    if allowed(user, action):
        return None
    what = (
        "alter ACLs (CLUSTER ALTER"
        if action == "manage_users"
        else "describe ACLs (CLUSTER DESCRIBE"
    )
    return (
        ErrorCode.cluster_authorization_failed,
        f"user {user.username!r} may not {what}, the gateway's {action} permission)",
    )


async def _namespace(session: Session) -> _Namespace:
    assert session.ctx is not None
    name = session.settings.stream
    result = await session.router.execute(ListStreams(), session.ctx)
    for stream in result.streams:
        if stream.name == name:
            return _Namespace(name, stream.id, {t.id: t.topic.name for t in stream.topics})
    return _Namespace(name, None, {})


def _users(store: UserStore) -> list[User]:
    """The store's users, root aside (every permission, like a Kafka super user)."""
    return [u for u in store.list_users() if u.id != ROOT_ID]


def _filter(f: Any) -> Callable[[_Acl], bool]:
    """Kafka's AclBindingFilter.matches for a DescribeAcls request or a DeleteAcls filter."""
    rtype = _enum(Resource, f.resource_type_filter)
    pattern = _enum(Pattern, f.pattern_type_filter)
    op = _enum(Op, f.operation)
    permission = _enum(Permission, f.permission_type)
    if 0 in (rtype, pattern, op, permission):  # UNKNOWN is 0 in each
        raise _Refused("the filter must not contain UNKNOWN elements")
    name, principal, host = f.resource_name_filter, f.principal_filter, f.host_filter

    def matches(acl: _Acl) -> bool:
        if rtype is not Resource.ANY and rtype != acl.resource:
            return False
        if pattern not in (Pattern.ANY, Pattern.MATCH, Pattern.LITERAL):
            return False  # every ACL here is LITERAL
        # MATCH also takes the ACLs that apply to the name: a LITERAL '*'
        wildcard = pattern is Pattern.MATCH and acl.name == WILDCARD
        if name is not None and acl.name != name and not wildcard:
            return False
        return (
            (principal is None or principal == acl.principal)
            and (host is None or host == WILDCARD)
            and op in (Op.ANY, acl.op)
            and permission in (Permission.ANY, Permission.ALLOW)
        )

    return matches


async def describe_acls(session: Session, req: KafkaRequest) -> Any:
    def answer(code: ErrorCode, message: str | None, resources: list[Any]) -> Any:
        return session.respond(
            req,
            {"throttle_time": 0, "error_code": code, "error_message": message,
             "resources": resources},
        )  # fmt: skip

    refusal = _api_refusal(session, "read_users")
    if refusal is not None:
        return answer(*refusal, [])
    try:
        matches = _filter(req.body)
    except _Refused as exc:
        return answer(exc.code, exc.message, [])
    ns = await _namespace(session)
    grouped: dict[tuple[Resource, str], list[Any]] = {}
    for acl in _bindings(_users(_store(session)), ns):
        if matches(acl):
            grouped.setdefault((acl.resource, acl.name), []).append(
                {"principal": acl.principal, "host": WILDCARD, "operation": acl.op,
                 "permission_type": Permission.ALLOW}
            )  # fmt: skip
    resources = [
        {"resource_type": rtype, "resource_name": name, "pattern_type": Pattern.LITERAL,
         "acls": acls}
        for (rtype, name), acls in grouped.items()
    ]  # fmt: skip
    return answer(ErrorCode.none, None, resources)


@dataclass(frozen=True, slots=True)
class _Wanted:
    username: str
    scope: _Scope
    op: Op
    resource: str  # as messages name it: TOPIC 'orders'


def _creation(c: Any, users: Mapping[str, User], ns: _Namespace) -> _Wanted:
    """What one AclCreation asks for in the model's terms, or _Refused saying why not."""
    rtype = _enum(Resource, c.resource_type)
    pattern = _enum(Pattern, c.resource_pattern_type)
    op = _enum(Op, c.operation)
    permission = _enum(Permission, c.permission_type)
    if rtype in (Resource.UNKNOWN, Resource.ANY):
        raise _Refused(f"invalid resource type {c.resource_type} for an ACL")
    if pattern not in (Pattern.LITERAL, Pattern.PREFIXED):
        raise _Refused(f"invalid pattern type {c.resource_pattern_type} for an ACL")
    if op in (Op.UNKNOWN, Op.ANY):
        raise _Refused(f"invalid operation {c.operation} for an ACL")
    if permission in (Permission.UNKNOWN, Permission.ANY):
        raise _Refused(f"invalid permission type {c.permission_type} for an ACL")
    if not c.resource_name:
        raise _Refused("an ACL needs a resource name")
    if permission is Permission.DENY:
        raise _Refused("DENY ACLs are not supported: the gateway's permissions only allow")
    if pattern is Pattern.PREFIXED:
        raise _Refused(
            "PREFIXED ACLs are not supported: the gateway grants on one topic or on every topic"
            " (LITERAL '*')"
        )
    if c.host != WILDCARD:
        raise _Refused(f"host {c.host!r}: the gateway's permissions hold from any host ('*')")
    username = _principal(c.principal, users)
    name = c.resource_name
    what = f"{op.name} on {rtype.name} {name!r}"
    if rtype is Resource.CLUSTER:
        if name != CLUSTER_NAME:
            raise _Refused(f"the only valid name for the CLUSTER resource is {CLUSTER_NAME}")
        if op not in (Op.ALTER, Op.DESCRIBE):
            raise _Refused(f"{what} cannot be granted: {_CLUSTER_WHY.get(op, _NO_SUCH)}")
        return _Wanted(username, _CLUSTER, op, f"CLUSTER {name!r}")
    if rtype is Resource.GROUP:
        raise _Refused(
            f"{what} cannot be granted: the gateway has no group permissions; a group is"
            " authorized by its topics (joining needs READ on each subscribed topic, other group"
            " requests READ on some topic of the namespace), so grant TOPIC READ"
        )
    if rtype is not Resource.TOPIC:
        raise _Refused(f"{rtype.name} ACLs are not supported: the gateway has no such resource")
    if name == WILDCARD:
        if op not in (Op.READ, Op.WRITE, Op.ALL):
            raise _Refused(
                f"{what} cannot be granted alone: on every topic the gateway grants READ, WRITE"
                " or ALL (its manage_topics permission)"
            )
        if ns.sid is None:
            raise _Refused(
                f"the Kafka namespace (stream {ns.stream!r}) does not exist yet: it is created"
                " with its first topic"
            )
        return _Wanted(username, _Scope("stream", ns.sid), op, "TOPIC '*'")
    if op not in _MANAGE_ONE:
        raise _Refused(f"{what} cannot be granted: {_TOPIC_WHY.get(op, _NO_SUCH)}")
    tid = ns.topic_id(name)
    if tid is None:
        raise _Refused(
            f"topic {name!r} does not exist: the gateway keeps a topic's ACLs by its id (they"
            " end with the topic), so create the topic first",
            ErrorCode.unknown_topic_or_partition,
        )
    return _Wanted(username, _Scope("topic", ns.sid, tid), op, f"TOPIC {name!r}")


def _principal(principal: str, users: Mapping[str, User]) -> str:
    kind, sep, name = principal.partition(":")
    if not sep or kind != "User" or not name:
        raise _Refused(f"principal {principal!r}: only User:<name> principals are supported")
    if name == WILDCARD:
        raise _Refused("principal User:* is not supported: the gateway grants per user")
    user = users.get(name)
    if user is None:
        raise _Refused(f"user {name!r} does not exist in the gateway's user store")
    if user.id == ROOT_ID:
        raise _Refused(f"user {name!r} is the root user: it has every permission already")
    return name


def _inexact(w: _Wanted) -> str:
    if w.scope.level == "topic":
        return (
            f"{w.op.name} on {w.resource} cannot be granted alone: the gateway grants DELETE,"
            " ALTER and ALTER_CONFIGS on one topic only all together and with READ and WRITE"
            " (its manage_topic permission); create those five ACLs in one request"
        )
    return f"{w.op.name} on {w.resource}: no set of the gateway's permissions grants it exactly"


async def create_acls(session: Session, req: KafkaRequest) -> Any:
    creations = list(req.body.creations)
    refusal = _api_refusal(session, "manage_users")
    results: list[tuple[ErrorCode, str | None]]
    if refusal is not None:
        results = [refusal] * len(creations)
    else:
        results = _create(_store(session), creations, await _namespace(session))
    return session.respond(
        req,
        {"throttle_time": 0, "results": [
            {"error_code": code, "error_message": message} for code, message in results
        ]},
    )  # fmt: skip


def _create(
    store: UserStore, creations: list[Any], ns: _Namespace
) -> list[tuple[ErrorCode, str | None]]:
    """Each creation's outcome. The ACLs of one user on one resource are granted together when
    flags can say them together (manage_topic), else one by one, in order."""
    results: list[tuple[ErrorCode, str | None]] = [(ErrorCode.none, None)] * len(creations)
    users = {u.username: u for u in store.list_users()}
    groups: dict[tuple[str, _Scope], list[tuple[int, _Wanted]]] = {}
    for i, c in enumerate(creations):
        try:
            wanted = _creation(c, users, ns)
        except _Refused as exc:
            results[i] = (exc.code, exc.message)
            continue
        groups.setdefault((wanted.username, wanted.scope), []).append((i, wanted))
    for (username, scope), items in groups.items():
        try:
            if _grant(store, username, scope, {w.op for _, w in items}):
                continue
            for i, w in items:
                if not _grant(store, username, scope, {w.op}):
                    results[i] = (ErrorCode.invalid_request, _inexact(w))
        except GatewayError as exc:  # the user was deleted meanwhile, say
            for i, _ in items:
                results[i] = (ErrorCode.invalid_request, exc.message)
    return results


async def delete_acls(session: Session, req: KafkaRequest) -> Any:
    filters = list(req.body.filters)
    refusal = _api_refusal(session, "manage_users")
    if refusal is not None:
        results = [
            {"error_code": refusal[0], "error_message": refusal[1], "matching_acls": []}
            for _ in filters
        ]
    else:
        store, ns = _store(session), await _namespace(session)
        results = [_delete(store, f, ns) for f in filters]
    return session.respond(req, {"throttle_time": 0, "filter_results": results})


def _delete(store: UserStore, f: Any, ns: _Namespace) -> dict[str, Any]:
    """One filter: every ACL it matches is removed, or none is and the filter's error says why
    (the clients ignore DeleteAcls' per-ACL errors, so a partial deletion would look whole)."""

    def failed(code: ErrorCode, message: str) -> dict[str, Any]:
        return {"error_code": code, "error_message": message, "matching_acls": []}

    try:
        matches = _filter(f)
    except _Refused as exc:
        return failed(exc.code, exc.message)
    matched = {acl: where for acl, where in _bindings(_users(store), ns).items() if matches(acl)}
    problems: list[str] = []
    removals: dict[tuple[str, _Scope], list[_Acl]] = {}
    who: dict[str, User] = {}  # as read just now, with no checkpoint since
    for acl, where in matched.items():
        if any(scope.level == "global" for _, scope in where):
            problems.append(
                f"{acl.principal} has {acl.op.name} on every topic through global permissions,"
                " which hold on every stream of every protocol: revoke them with Iggy's"
                " UpdatePermissions or `streamgate users revoke`"
            )
            continue
        for user, scope in where:
            removals.setdefault((user.username, scope), []).append(acl)
            who[user.username] = user
    plan: list[tuple[str, _Scope, frozenset[str]]] = []
    for (username, scope), acls in removals.items():
        flags = _planned(who[username], scope, set(), {a.op for a in acls})
        if flags is None:
            problems.append(
                f"deleting {' '.join(a.op.name for a in acls)} on {acls[0].resource.name}"
                f" {acls[0].name!r} for {acls[0].principal} would leave operations no set of"
                " the gateway's permissions grants exactly (DELETE, ALTER and ALTER_CONFIGS on"
                " one topic go together, with READ and WRITE): delete them together"
            )
            continue
        plan.append((username, scope, flags))
    if problems:
        more = f"; and {len(problems) - 3} more" if len(problems) > 3 else ""
        return failed(
            ErrorCode.invalid_request, "nothing deleted: " + "; ".join(problems[:3]) + more
        )
    try:
        for username, scope, flags in plan:  # no checkpoint since the plan was made
            user = store.get_user(username)
            store.update_permissions(user.id, _with_flags(user.permissions, scope, flags))
    except GatewayError as exc:  # another gateway sharing the store changed the user
        return failed(ErrorCode.invalid_request, exc.message)
    return {
        "error_code": ErrorCode.none,
        "error_message": None,
        "matching_acls": [
            {"error_code": ErrorCode.none, "error_message": None, "resource_type": acl.resource,
             "resource_name": acl.name, "pattern_type": Pattern.LITERAL,
             "principal": acl.principal, "host": WILDCARD, "operation": acl.op,
             "permission_type": Permission.ALLOW}
            for acl in matched
        ],
    }  # fmt: skip


__all__ = ["create_acls", "delete_acls", "describe_acls"]
