"""State of one consumer group and its members, after Kafka's GroupMetadata and MemberMetadata.

Everything here is plain bookkeeping without a clock of its own: the coordinator passes trio's
current time in, mutates groups between checkpoints (trio runs one task at a time, so no locks),
and parks long-polls on the waiters defined at the bottom.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum

import trio

from gateway.model import GroupError, JoinGroupResult, MemberInfo


class GroupState(StrEnum):
    """Kafka's classic group states, spelled as DescribeGroups/ListGroups report them."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


GroupKey = tuple[str, str]  # (stream, group)


class JoinWaiter:
    """A JoinGroup parked until its rebalance completes (Kafka's awaitingJoinCallback)."""

    __slots__ = ("_done", "_error", "_result")

    def __init__(self) -> None:
        self._done = trio.Event()
        self._result: JoinGroupResult | None = None
        self._error: GroupError | None = None

    @property
    def answered(self) -> bool:
        return self._done.is_set()

    def answer(self, result: JoinGroupResult) -> None:
        self._result = result
        self._done.set()

    def refuse(self, error: GroupError) -> None:
        self._error = error
        self._done.set()

    async def wait(self) -> JoinGroupResult:
        await self._done.wait()
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result


class SyncRound:
    """The followers' wait for the leader's SyncGroup in one generation.

    Ends with the leader's assignments, or aborted (``None``) when a new rebalance starts first:
    Kafka then answers every parked SyncGroup with REBALANCE_IN_PROGRESS
    (``resetAndPropagateAssignmentError``).
    """

    __slots__ = ("_done", "assignments")

    def __init__(self) -> None:
        self._done = trio.Event()
        self.assignments: dict[str, bytes] | None = None

    def complete(self, assignments: dict[str, bytes]) -> None:
        self.assignments = assignments
        self._done.set()

    def abort(self) -> None:
        self._done.set()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    async def wait(self) -> dict[str, bytes] | None:
        await self._done.wait()
        return self.assignments


@dataclass(slots=True, eq=False, kw_only=True)
class Member:
    member_id: str
    client_id: str
    client_host: str
    group_instance_id: str | None
    session_timeout_s: float
    rebalance_timeout_s: float
    protocols: dict[str, bytes]  # protocol name -> metadata, in the member's preference order
    deadline: float = math.inf  # session expiry on trio's clock
    # True until a JoinGroup answer carried the id to the client (Kafka's MemberMetadata.isNew).
    is_new: bool = True
    join_waiter: JoinWaiter | None = None
    syncs_waiting: int = 0
    assignment: bytes = b""

    @property
    def kept_alive(self) -> bool:
        # A member parked in JoinGroup or SyncGroup cannot heartbeat, so its session does not
        # run meanwhile (Kafka's MemberMetadata.hasSatisfiedHeartbeat).
        return self.join_waiter is not None or self.syncs_waiting > 0

    def touch(self, now: float) -> None:
        self.deadline = now + self.session_timeout_s

    def matches(self, protocols: dict[str, bytes]) -> bool:
        # Kafka's MemberMetadata.matches: same protocols, same metadata, same order.
        return list(self.protocols.items()) == list(protocols.items())

    def info(self, protocol: str, *, with_assignment: bool = False) -> MemberInfo:
        return MemberInfo(
            member_id=self.member_id,
            client_id=self.client_id,
            client_host=self.client_host,
            group_instance_id=self.group_instance_id,
            metadata=self.protocols.get(protocol, b"") if protocol else b"",
            assignment=self.assignment if with_assignment else b"",
        )


@dataclass(slots=True, eq=False, kw_only=True)
class Group:
    stream: str
    name: str
    state: GroupState = GroupState.EMPTY
    generation: int = 0
    protocol_type: str = ""
    protocol: str = ""
    leader: str = ""
    members: dict[str, Member] = field(default_factory=dict)  # join order: first = next leader
    # PreparingRebalance: when the join phase ends (Kafka's DelayedJoin / InitialDelayedJoin).
    rebalance_deadline: float = math.inf
    initial_delay: bool = False
    initial_remaining_s: float = 0.0
    new_member_added: bool = False
    # CompletingRebalance and after: members whose SyncGroup has not arrived yet, removed when
    # the rebalance timeout passes (Kafka 3.x's DelayedSync / pendingSyncMembers).
    pending_sync: set[str] = field(default_factory=set)
    sync_deadline: float = math.inf
    sync_round: SyncRound = field(default_factory=SyncRound)
    alarm_at: float = math.inf  # earliest alarm the coordinator has queued for this group

    @property
    def key(self) -> GroupKey:
        return (self.stream, self.name)

    def add(self, member: Member) -> None:
        self.members[member.member_id] = member
        if not self.leader:
            self.leader = member.member_id

    def remove(self, member_id: str) -> None:
        del self.members[member_id]
        self.pending_sync.discard(member_id)
        if self.leader == member_id:
            # Kafka's GroupMetadata.remove: the leadership passes to a remaining member.
            self.leader = next(iter(self.members), "")

    def by_instance_id(self, group_instance_id: str) -> Member | None:
        return next(
            (m for m in self.members.values() if m.group_instance_id == group_instance_id), None
        )

    def supports(self, protocol_type: str, names: Iterable[str], *, joining: str = "") -> bool:
        """Kafka's GroupMetadata.supportsProtocols for a member (re)joining with ``names``."""
        wanted = set(names)
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(wanted)
        if protocol_type != self.protocol_type:
            return False
        for member in self.members.values():
            if member.member_id != joining:
                wanted &= member.protocols.keys()
        return bool(wanted)

    def select_protocol(self) -> str:
        """Kafka's GroupMetadata.selectProtocol: among the protocols every member supports, each
        member votes for the first in its own preference order; most votes wins. Kafka leaves a
        tie to hash order; here it goes to the vote cast first (members in join order)."""
        members = list(self.members.values())
        candidates = set(members[0].protocols).intersection(*(m.protocols for m in members[1:]))
        votes = Counter(next(p for p in m.protocols if p in candidates) for m in members)
        return votes.most_common(1)[0][0]  # equal counts keep first-encountered order

    def rebalance_timeout_s(self) -> float:
        return max((m.rebalance_timeout_s for m in self.members.values()), default=0.0)

    def all_joined(self) -> bool:
        return all(m.join_waiter is not None for m in self.members.values())

    def next_deadline(self) -> float:
        at = min((m.deadline for m in self.members.values() if not m.kept_alive), default=math.inf)
        if self.state is GroupState.PREPARING_REBALANCE:
            at = min(at, self.rebalance_deadline)
        if self.pending_sync:
            at = min(at, self.sync_deadline)
        return at

    def join_result(self, member: Member) -> JoinGroupResult:
        # Only the leader gets the members' metadata: it computes the assignment client-side.
        members: tuple[MemberInfo, ...] = ()
        if member.member_id == self.leader:
            members = tuple(m.info(self.protocol) for m in self.members.values())
        return JoinGroupResult(
            generation=self.generation,
            protocol_name=self.protocol,
            leader=self.leader,
            member_id=member.member_id,
            members=members,
        )


__all__ = ["Group", "GroupKey", "GroupState", "JoinWaiter", "Member", "SyncRound"]
