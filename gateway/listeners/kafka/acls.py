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

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from gateway.coordination import UserStore
from gateway.coordination.users import ROOT_ID
from gateway.listeners.kafka.acl_flags import (
    CLUSTER_NAME,
    CLUSTER_SCOPE,
    CLUSTER_WHY,
    MANAGE_ONE,
    NO_SUCH,
    TOPIC_WHY,
    WILDCARD,
    Acl,
    AclRefused,
    Namespace,
    Op,
    Pattern,
    Permission,
    Resource,
    Scope,
    bindings,
    enum_of,
    grant_ops,
    planned,
    with_flags,
)
from gateway.listeners.kafka.session import Session
from gateway.model import GatewayError, ListStreams
from gateway.model.permissions import Action
from gateway.model.users import User, allowed
from protocols.kafka.framing import KafkaRequest

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


async def _namespace(session: Session) -> Namespace:
    assert session.ctx is not None
    name = session.settings.stream
    result = await session.router.execute(ListStreams(), session.ctx)
    for stream in result.streams:
        if stream.name == name:
            return Namespace(name, stream.id, {t.id: t.topic.name for t in stream.topics})
    return Namespace(name, None, {})


def _users(store: UserStore) -> list[User]:
    """The store's users, root aside (every permission, like a Kafka super user)."""
    return [u for u in store.list_users() if u.id != ROOT_ID]


def _filter(f: Any) -> Callable[[Acl], bool]:
    """Kafka's AclBindingFilter.matches for a DescribeAcls request or a DeleteAcls filter."""
    rtype = enum_of(Resource, f.resource_type_filter)
    pattern = enum_of(Pattern, f.pattern_type_filter)
    op = enum_of(Op, f.operation)
    permission = enum_of(Permission, f.permission_type)
    if 0 in (rtype, pattern, op, permission):  # UNKNOWN is 0 in each
        raise AclRefused("the filter must not contain UNKNOWN elements")
    name, principal, host = f.resource_name_filter, f.principal_filter, f.host_filter

    def matches(acl: Acl) -> bool:
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
    except AclRefused as exc:
        return answer(exc.code, exc.message, [])
    ns = await _namespace(session)
    grouped: dict[tuple[Resource, str], list[Any]] = {}
    for acl in bindings(_users(_store(session)), ns):
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
    scope: Scope
    op: Op
    resource: str  # as messages name it: TOPIC 'orders'


def _creation(c: Any, users: Mapping[str, User], ns: Namespace) -> _Wanted:
    """What one AclCreation asks for in the model's terms, or AclRefused saying why not."""
    rtype = enum_of(Resource, c.resource_type)
    pattern = enum_of(Pattern, c.resource_pattern_type)
    op = enum_of(Op, c.operation)
    permission = enum_of(Permission, c.permission_type)
    if rtype in (Resource.UNKNOWN, Resource.ANY):
        raise AclRefused(f"invalid resource type {c.resource_type} for an ACL")
    if pattern not in (Pattern.LITERAL, Pattern.PREFIXED):
        raise AclRefused(f"invalid pattern type {c.resource_pattern_type} for an ACL")
    if op in (Op.UNKNOWN, Op.ANY):
        raise AclRefused(f"invalid operation {c.operation} for an ACL")
    if permission in (Permission.UNKNOWN, Permission.ANY):
        raise AclRefused(f"invalid permission type {c.permission_type} for an ACL")
    if not c.resource_name:
        raise AclRefused("an ACL needs a resource name")
    if permission is Permission.DENY:
        raise AclRefused("DENY ACLs are not supported: the gateway's permissions only allow")
    if pattern is Pattern.PREFIXED:
        raise AclRefused(
            "PREFIXED ACLs are not supported: the gateway grants on one topic or on every topic"
            " (LITERAL '*')"
        )
    if c.host != WILDCARD:
        raise AclRefused(f"host {c.host!r}: the gateway's permissions hold from any host ('*')")
    username = _principal(c.principal, users)
    name = c.resource_name
    what = f"{op.name} on {rtype.name} {name!r}"
    if rtype is Resource.CLUSTER:
        if name != CLUSTER_NAME:
            raise AclRefused(f"the only valid name for the CLUSTER resource is {CLUSTER_NAME}")
        if op not in (Op.ALTER, Op.DESCRIBE):
            raise AclRefused(f"{what} cannot be granted: {CLUSTER_WHY.get(op, NO_SUCH)}")
        return _Wanted(username, CLUSTER_SCOPE, op, f"CLUSTER {name!r}")
    if rtype is Resource.GROUP:
        raise AclRefused(
            f"{what} cannot be granted: the gateway has no group permissions; a group is"
            " authorized by its topics (joining needs READ on each subscribed topic, other group"
            " requests READ on some topic of the namespace), so grant TOPIC READ"
        )
    if rtype is not Resource.TOPIC:
        raise AclRefused(f"{rtype.name} ACLs are not supported: the gateway has no such resource")
    if name == WILDCARD:
        if op not in (Op.READ, Op.WRITE, Op.ALL):
            raise AclRefused(
                f"{what} cannot be granted alone: on every topic the gateway grants READ, WRITE"
                " or ALL (its manage_topics permission)"
            )
        if ns.sid is None:
            raise AclRefused(
                f"the Kafka namespace (stream {ns.stream!r}) does not exist yet: it is created"
                " with its first topic"
            )
        return _Wanted(username, Scope("stream", ns.sid), op, "TOPIC '*'")
    if op not in MANAGE_ONE:
        raise AclRefused(f"{what} cannot be granted: {TOPIC_WHY.get(op, NO_SUCH)}")
    tid = ns.topic_id(name)
    if tid is None:
        raise AclRefused(
            f"topic {name!r} does not exist: the gateway keeps a topic's ACLs by its id (they"
            " end with the topic), so create the topic first",
            ErrorCode.unknown_topic_or_partition,
        )
    return _Wanted(username, Scope("topic", ns.sid, tid), op, f"TOPIC {name!r}")


def _principal(principal: str, users: Mapping[str, User]) -> str:
    kind, sep, name = principal.partition(":")
    if not sep or kind != "User" or not name:
        raise AclRefused(f"principal {principal!r}: only User:<name> principals are supported")
    if name == WILDCARD:
        raise AclRefused("principal User:* is not supported: the gateway grants per user")
    user = users.get(name)
    if user is None:
        raise AclRefused(f"user {name!r} does not exist in the gateway's user store")
    if user.id == ROOT_ID:
        raise AclRefused(f"user {name!r} is the root user: it has every permission already")
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
    store: UserStore, creations: list[Any], ns: Namespace
) -> list[tuple[ErrorCode, str | None]]:
    """Each creation's outcome. The ACLs of one user on one resource are granted together when
    flags can say them together (manage_topic), else one by one, in order."""
    results: list[tuple[ErrorCode, str | None]] = [(ErrorCode.none, None)] * len(creations)
    users = {u.username: u for u in store.list_users()}
    groups: dict[tuple[str, Scope], list[tuple[int, _Wanted]]] = {}
    for i, c in enumerate(creations):
        try:
            wanted = _creation(c, users, ns)
        except AclRefused as exc:
            results[i] = (exc.code, exc.message)
            continue
        groups.setdefault((wanted.username, wanted.scope), []).append((i, wanted))
    for (username, scope), items in groups.items():
        try:
            if grant_ops(store, username, scope, {w.op for _, w in items}):
                continue
            for i, w in items:
                if not grant_ops(store, username, scope, {w.op}):
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


def _delete(store: UserStore, f: Any, ns: Namespace) -> dict[str, Any]:
    """One filter: every ACL it matches is removed, or none is and the filter's error says why
    (the clients ignore DeleteAcls' per-ACL errors, so a partial deletion would look whole)."""

    def failed(code: ErrorCode, message: str) -> dict[str, Any]:
        return {"error_code": code, "error_message": message, "matching_acls": []}

    try:
        matches = _filter(f)
    except AclRefused as exc:
        return failed(exc.code, exc.message)
    matched = {acl: where for acl, where in bindings(_users(store), ns).items() if matches(acl)}
    problems: list[str] = []
    removals: dict[tuple[str, Scope], list[Acl]] = {}
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
    plan: list[tuple[str, Scope, frozenset[str]]] = []
    for (username, scope), acls in removals.items():
        flags = planned(who[username], scope, set(), {a.op for a in acls})
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
            store.update_permissions(user.id, with_flags(user.permissions, scope, flags))
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
