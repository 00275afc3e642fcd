"""Single active consumer (rabbitmq-stream.md §5 ConsumerUpdate): the subscriptions that share a
consumer name on one partition stream form a group, and one of them at a time receives messages.

On a plain stream the oldest member is active; when it leaves (Unsubscribe, connection lost) the
next one is activated. Among the consumers of a super stream (Subscribe property ``super-stream``)
partition i goes to member ``i mod n``, so the partitions spread over the consumers and move when
one joins or leaves, as RabbitMQ does. Activation and deactivation are the subscription's business
(a ConsumerUpdate to its client, then delivery or not); this module only decides who.

``ActiveConsumers`` decides in this process: right for one gateway. ``BrokerActiveConsumers``
lets the backend's broker decide (a backend with native groups: Kafka), so the members behind
every gateway on that broker are one group: each subscription is a member of a broker group
(``__streamgate_sac.<stream>.<topic>.<partition>.<name>``) run through the router's JoinGroup,
SyncGroup, Heartbeat and LeaveGroup; the leader (a member on whichever gateway the broker picks)
assigns "active" to the member that joined first (or member ``i mod n`` of a super stream's
partition i). A member deactivates before it rejoins, and the broker completes a rebalance only
when every live member has rejoined, so two members are never active at once; a gateway that
dies stops heartbeating its members, and the broker hands their place on after their session
timeout.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable
from typing import Final, Generic, Protocol, TypeVar

import trio

from gateway.listeners.broker_membership import Membership, heartbeat, keep_joining
from gateway.model import (
    DEFAULT_STREAM,
    JoinGroup,
    MemberInfo,
    SyncGroup,
    Topic,
)
from gateway.router import RequestContext, Router

GroupKey = tuple[Topic, int, str]  # topic, partition, consumer name


class Member(Protocol):
    @property
    def group_key(self) -> GroupKey: ...

    @property
    def in_super_stream(self) -> bool: ...

    @property
    def active(self) -> bool: ...


M = TypeVar("M", bound=Member)
M_contra = TypeVar("M_contra", bound=Member, contravariant=True)


class Deciding(Protocol[M_contra]):
    """Who decides which member is active: ``ActiveConsumers`` or ``BrokerActiveConsumers``."""

    def join(self, member: M_contra) -> None: ...
    def leave(self, member: M_contra) -> None: ...


class ActiveConsumers(Generic[M]):
    """``set_active(member, active)`` (de)activates a member; it must update ``member.active``."""

    def __init__(self, set_active: Callable[[M, bool], None]) -> None:
        self.groups: dict[GroupKey, list[M]] = {}
        self._set_active = set_active

    def join(self, member: M) -> None:
        self.groups.setdefault(member.group_key, []).append(member)
        self._settle(member.group_key)

    def leave(self, member: M) -> None:
        key = member.group_key
        members = self.groups.get(key, [])
        if member in members:
            members.remove(member)
            if not members:
                del self.groups[key]
            self._settle(key)

    def members(self, key: GroupKey) -> list[M]:
        return list(self.groups.get(key, ()))

    def _settle(self, key: GroupKey) -> None:
        members = self.groups.get(key)
        if not members:
            return
        partition = key[1]
        chosen = partition % len(members) if members[0].in_super_stream else 0
        # Deactivate first: two members are never active at once.
        for i, m in enumerate(members):
            if m.active and i != chosen:
                self._set_active(m, False)
        if not members[chosen].active:
            self._set_active(members[chosen], True)


SESSION_TIMEOUT_MS: Final = 6000  # Kafka's group.min.session.timeout.ms: a dead gateway's
HEARTBEAT_S: Final = 1.0  # members hand over within about this
REBALANCE_TIMEOUT_MS: Final = 10_000
_PROTOCOL_TYPE: Final = "streamgate-sac"
_JOINED: Final = struct.Struct(">q")  # the member's metadata: when its subscription joined (ns)
_ACTIVE, _INACTIVE = b"\x01", b"\x00"


class BrokerMember(Member, Protocol):
    @property
    def nursery(self) -> trio.Nursery: ...


B = TypeVar("B", bound=BrokerMember)


def broker_group(key: GroupKey) -> str:
    topic, partition, name = key
    return f"__streamgate_sac.{topic.stream}.{topic.name}.{partition}.{name}"


def choose(members: tuple[MemberInfo, ...], partition: int, super_stream: bool) -> str:
    """The leader's pick: the member that joined first, or member ``partition mod n`` of a
    super stream's partition (ordered by when they joined)."""
    ordered = sorted(members, key=lambda m: (_JOINED.unpack_from(m.metadata)[0], m.member_id))
    return ordered[partition % len(ordered) if super_stream else 0].member_id


class BrokerActiveConsumers(Generic[B]):
    """``ActiveConsumers`` with the broker deciding, for every gateway on it."""

    def __init__(self, router: Router, set_active: Callable[[B, bool], None]) -> None:
        self.groups: dict[GroupKey, list[B]] = {}  # this gateway's members only
        self._router = router
        self._set_active = set_active
        self._scopes: dict[int, trio.CancelScope] = {}
        self._ctx = RequestContext("rabbitmq_stream", "single_active_consumer", system=True)

    def join(self, member: B) -> None:
        self.groups.setdefault(member.group_key, []).append(member)
        scope = self._scopes[id(member)] = trio.CancelScope()
        member.nursery.start_soon(self._run, member, scope)

    def leave(self, member: B) -> None:
        members = self.groups.get(member.group_key, [])
        if member in members:
            members.remove(member)
            if not members:
                del self.groups[member.group_key]
        scope = self._scopes.pop(id(member), None)
        if scope is not None:
            scope.cancel()  # it leaves the broker's group on its way out

    def members(self, key: GroupKey) -> list[B]:
        return list(self.groups.get(key, ()))

    async def _run(self, member: B, scope: trio.CancelScope) -> None:
        group = broker_group(member.group_key)
        joined = _JOINED.pack(time.time_ns())
        state = Membership()

        async def deactivate() -> None:  # before anything else: never two active at once
            if member.active:
                self._set_active(member, False)

        with scope:
            await keep_joining(
                self._router, self._ctx, group, state,
                lambda: self._round(member, group, joined, state), deactivate,
            )  # fmt: skip

    async def _round(self, member: B, group: str, joined: bytes, state: Membership) -> None:
        """One generation: join, sync, take the assignment, heartbeat until the broker starts
        another rebalance (the GroupError that ends it)."""
        execute = self._router.execute
        result = await execute(
            JoinGroup(group=group, stream=DEFAULT_STREAM, member_id=state.member_id,
                      session_timeout_ms=SESSION_TIMEOUT_MS,
                      rebalance_timeout_ms=REBALANCE_TIMEOUT_MS, protocol_type=_PROTOCOL_TYPE,
                      protocols=(("sac", joined),)),
            self._ctx,
        )  # fmt: skip
        state.member_id = result.member_id
        assignments: tuple[tuple[str, bytes], ...] = ()
        if result.leader == result.member_id and result.members:
            chosen = choose(result.members, member.group_key[1], member.in_super_stream)
            assignments = tuple(
                (m.member_id, _ACTIVE if m.member_id == chosen else _INACTIVE)
                for m in result.members
            )
        synced = await execute(
            SyncGroup(group=group, stream=DEFAULT_STREAM, generation=result.generation,
                      member_id=result.member_id, assignments=assignments),
            self._ctx,
        )  # fmt: skip
        if (synced.assignment == _ACTIVE) != member.active:
            self._set_active(member, synced.assignment == _ACTIVE)
        await heartbeat(self._router, self._ctx, group, result.generation, result.member_id,
                        HEARTBEAT_S)  # fmt: skip


__all__ = [
    "ActiveConsumers",
    "BrokerActiveConsumers",
    "BrokerMember",
    "Deciding",
    "GroupKey",
    "Member",
    "broker_group",
    "choose",
]
