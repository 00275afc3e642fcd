"""Kafka's classic group state machine: the transitions of GroupCoordinator.scala.

Empty -> PreparingRebalance (join phase) -> CompletingRebalance (waiting for the leader's
SyncGroup) -> Stable, and back to PreparingRebalance whenever membership changes. The coordinator
calls these with trio's current time; they never wait, so every transition is atomic.
"""

from __future__ import annotations

import math

import structlog

from gateway.model import UnknownMember

from .group_state import Group, GroupState, Member, SyncRound

log = structlog.get_logger("streamgate.coordination")

_EMPTY = GroupState.EMPTY
_PREPARING = GroupState.PREPARING_REBALANCE
_COMPLETING = GroupState.COMPLETING_REBALANCE
_STABLE = GroupState.STABLE


class Rebalancer:
    def __init__(self, *, initial_delay_s: float) -> None:
        self.initial_delay_s = initial_delay_s  # Kafka's group.initial.rebalance.delay.ms

    def remove_member(self, group: Group, member: Member, now: float, *, reason: str) -> None:
        """Kafka's removeMemberAndUpdateGroup."""
        if member.join_waiter is not None:
            member.join_waiter.refuse(UnknownMember(f"member {member.member_id!r} was removed"))
            member.join_waiter = None
        group.remove(member.member_id)
        if group.state in (_STABLE, _COMPLETING):
            self.prepare(group, now, reason=reason)
        elif group.state is _PREPARING:
            self.try_complete_join(group, now)

    def set_assignments(self, group: Group, assignments: dict[str, bytes]) -> None:
        for member in group.members.values():
            member.assignment = assignments.get(member.member_id, b"")
        group.sync_round.complete({m.member_id: m.assignment for m in group.members.values()})
        group.state = _STABLE
        log.info("group assignment received", **ids(group), generation=group.generation)

    def prepare(self, group: Group, now: float, *, reason: str) -> None:
        """Kafka's prepareRebalance: start the join phase (from Empty, Stable, Completing)."""
        if group.state is _COMPLETING:
            group.sync_round.abort()  # parked SyncGroups answer RebalanceInProgress
        group.pending_sync.clear()
        group.sync_deadline = math.inf
        timeout_s = group.rebalance_timeout_s()
        if group.state is _EMPTY:
            # InitialDelayedJoin: let consumers that start together land in one generation.
            group.initial_delay = True
            group.new_member_added = False
            group.initial_remaining_s = max(timeout_s - self.initial_delay_s, 0.0)
            group.rebalance_deadline = now + self.initial_delay_s
        else:
            group.initial_delay = False
            group.rebalance_deadline = now + timeout_s
        group.state = _PREPARING
        log.info(
            "group rebalance started",
            **ids(group),
            generation=group.generation,
            members=len(group.members),
            reason=reason,
        )
        self.try_complete_join(group, now)

    def try_complete_join(self, group: Group, now: float) -> None:
        # DelayedJoin completes once every member has rejoined; InitialDelayedJoin only when its
        # delay is over (or nobody is left to wait for).
        if group.state is not _PREPARING or not group.all_joined():
            return
        if group.initial_delay and group.members:
            return
        self.complete_join(group, now)

    def complete_join(self, group: Group, now: float) -> None:
        """Kafka's onCompleteJoin: drop who did not rejoin, start the next generation."""
        for member in [m for m in group.members.values() if m.join_waiter is None]:
            log.info("group member dropped", **ids(group), member=member.member_id)
            group.remove(member.member_id)
        group.generation += 1
        group.initial_delay = False
        group.rebalance_deadline = math.inf
        if not group.members:
            group.state = _EMPTY
            group.protocol = ""
            log.info("group empty", **ids(group), generation=group.generation)
            return
        group.protocol = group.select_protocol()
        group.state = _COMPLETING
        group.sync_round = SyncRound()
        group.pending_sync = set(group.members)
        group.sync_deadline = now + group.rebalance_timeout_s()
        for member in group.members.values():
            waiter = member.join_waiter
            assert waiter is not None
            member.join_waiter = None
            member.is_new = False
            member.touch(now)
            waiter.answer(group.join_result(member))
        log.info(
            "group rebalance completed",
            **ids(group),
            generation=group.generation,
            members=len(group.members),
            leader=group.leader,
            protocol=group.protocol,
        )

    # -- deadlines ----------------------------------------------------------------------------

    def on_deadlines(self, group: Group, now: float) -> None:
        """Act on whatever of ``group.next_deadline()`` has passed; the rest waits."""
        for member in [m for m in group.members.values() if not m.kept_alive]:
            if member.deadline <= now and group.members.get(member.member_id) is member:
                log.info("group member expired", **ids(group), member=member.member_id)
                self.remove_member(group, member, now, reason="session timeout")
        if group.state is _PREPARING and group.rebalance_deadline <= now:
            window = min(self.initial_delay_s, group.initial_remaining_s)
            if group.initial_delay and group.new_member_added and window > 0:
                # Someone joined during the delay: wait once more, within the rebalance timeout.
                group.initial_remaining_s -= window
                group.new_member_added = False
                group.rebalance_deadline = now + window
            else:
                self.complete_join(group, now)
        if group.pending_sync and group.sync_deadline <= now:
            # Kafka 3.x onExpirePendingSync: who has not synced within the rebalance timeout
            # goes, and the rest rebalance without it.
            for member_id in sorted(group.pending_sync):
                log.info("group member dropped", **ids(group), member=member_id)
                group.remove(member_id)
            self.prepare(group, now, reason="members did not sync")


def ids(group: Group) -> dict[str, str]:
    """The log fields naming a group."""
    return {"stream": group.stream, "group": group.name}


__all__ = ["Rebalancer", "ids"]
