"""Kafka's classic group coordinator (GroupCoordinator.scala), in memory.

``GroupTable`` is the state machine: every command and every passing deadline is one synchronous
transition at a time the caller gives (``now``), so the same inputs at the same times give the
same groups. Two drivers run it:

* ``GroupCoordinator``: one gateway's groups, on trio's clock. JoinGroup and SyncGroup are
  long-polls parked on waiters; the deadlines are served by the one alarm task in ``run``, so
  tests drive it all with ``autojump_clock``.
* ``coordination.shared_groups.SharedGroups``: every gateway on one backend runs a table and
  feeds it the same commands, in the order and at the times of a log on the backend.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from uuid import uuid4

import structlog
import trio

from gateway.model import (
    DescribeGroup,
    DescribeGroupResult,
    GroupInfo,
    GroupNotEmpty,
    Heartbeat,
    HeartbeatResult,
    IllegalGeneration,
    InconsistentGroupProtocol,
    InvalidSessionTimeout,
    JoinGroup,
    JoinGroupResult,
    LeaveGroup,
    LeaveGroupResult,
    ListGroups,
    ListGroupsResult,
    RebalanceInProgress,
    SyncGroup,
    SyncGroupResult,
    UnknownGroup,
    UnknownMember,
)

from .group_state import Group, GroupKey, GroupState, JoinWaiter, Member, SyncRound
from .members import add_member, replace_static
from .rebalance import Rebalancer, ids

log = structlog.get_logger("streamgate.coordination")

_EMPTY = GroupState.EMPTY
_PREPARING = GroupState.PREPARING_REBALANCE
_COMPLETING = GroupState.COMPLETING_REBALANCE
_STABLE = GroupState.STABLE


class GroupTable:
    """Consumer groups keyed by (stream, group): one Kafka listener's virtual cluster cannot
    see another's groups of the same name. Never waits and never reads a clock."""

    def __init__(
        self,
        *,
        initial_rebalance_delay_ms: int = 3000,
        min_session_timeout_ms: int = 6000,
        max_session_timeout_ms: int = 1_800_000,
        on_earlier_alarm: Callable[[], None] = lambda: None,
    ) -> None:
        # Defaults are Kafka's group.initial.rebalance.delay.ms, group.min.session.timeout.ms
        # and group.max.session.timeout.ms.
        self.rebalancer = Rebalancer(initial_delay_s=initial_rebalance_delay_ms / 1000)
        self.min_session_ms = min_session_timeout_ms
        self.max_session_ms = max_session_timeout_ms
        self.groups: dict[GroupKey, Group] = {}
        self._alarms: list[tuple[float, int, GroupKey]] = []  # heap; stale entries are skipped
        self._alarm_seq = 0
        self._on_earlier_alarm = on_earlier_alarm
        # SyncGroups parked on a round: (member, its round), released when the round ends.
        self.parked_syncs: list[tuple[Group, Member, SyncRound]] = []

    # -- the commands, each one transition ---------------------------------------------------

    def check_session_timeout(self, cmd: JoinGroup) -> None:
        if not self.min_session_ms <= cmd.session_timeout_ms <= self.max_session_ms:
            raise InvalidSessionTimeout(
                f"session timeout {cmd.session_timeout_ms} ms is outside "
                f"[{self.min_session_ms}, {self.max_session_ms}] ms"
            )

    def join(
        self, cmd: JoinGroup, now: float, *, new_member_id: str
    ) -> JoinGroupResult | JoinWaiter:
        """An answer now, or the waiter the JoinGroup parks on. A member joining without an id
        gets ``new_member_id``."""
        self.check_session_timeout(cmd)
        protocols: dict[str, bytes] = {}
        for name, metadata in cmd.protocols:
            protocols.setdefault(name, metadata)
        key = (cmd.stream, cmd.group)
        group = self.groups.get(key)
        if cmd.member_id and (group is None or cmd.member_id not in group.members):
            # Kafka: a member id the group does not know must start over with an empty one.
            raise UnknownMember(f"member {cmd.member_id!r} is not in group {cmd.group!r}")
        probe = group if group is not None else Group(stream=cmd.stream, name=cmd.group)
        if not probe.supports(cmd.protocol_type, protocols, joining=cmd.member_id):
            raise InconsistentGroupProtocol(
                f"protocol type {cmd.protocol_type!r} with {sorted(protocols)} does not match "
                f"group {cmd.group!r}"
            )
        if group is None:
            group = self.groups[key] = probe
        waiter = JoinWaiter()
        static = group.by_instance_id(cmd.group_instance_id) if cmd.group_instance_id else None
        if not cmd.member_id and static is not None:
            # KIP-345: a static member back without its member id (a restarted client).
            answer = replace_static(
                self.rebalancer, group, static, cmd, new_member_id, protocols, waiter, now
            )
            self._settle(group, now)
            return answer
        if not cmd.member_id:
            add_member(self.rebalancer, group, cmd, new_member_id, protocols, waiter, now)
        else:
            member = group.members[cmd.member_id]
            member.session_timeout_s = cmd.session_timeout_ms / 1000
            member.rebalance_timeout_s = cmd.rebalance_timeout_ms / 1000
            member.touch(now)
            current = self._rejoin(group, member, protocols, waiter, now)
            if current is not None:
                self._settle(group, now)  # its session runs again, maybe with a new timeout
                return current
        self._settle(group, now)
        return waiter

    def sync(self, cmd: SyncGroup, now: float) -> SyncGroupResult | SyncRound:
        """An answer now, or the round a follower's SyncGroup parks on (``assignment_from``)."""
        group, member = self.current_member(cmd.stream, cmd.group, cmd.member_id, cmd.generation)
        if group.state is _PREPARING:
            raise RebalanceInProgress(f"group {cmd.group!r} is rebalancing")
        member.touch(now)
        group.pending_sync.discard(member.member_id)
        if not group.pending_sync:
            group.sync_deadline = math.inf
        if group.state is _STABLE:
            return SyncGroupResult(assignment=member.assignment)
        if member.member_id == group.leader:
            self.rebalancer.set_assignments(group, dict(cmd.assignments))
            self._settle(group, now)
            return SyncGroupResult(assignment=member.assignment)
        sync_round = group.sync_round
        member.syncs_waiting += 1
        self.parked_syncs.append((group, member, sync_round))
        self._settle(group, now)
        return sync_round

    def heartbeat(self, cmd: Heartbeat, now: float) -> HeartbeatResult:
        group, member = self.current_member(cmd.stream, cmd.group, cmd.member_id, cmd.generation)
        # The session moves later only, so the queued alarm stays valid (it re-arms on firing).
        member.touch(now)
        if group.state is _PREPARING:
            # How Kafka tells a member to rejoin; CompletingRebalance answers NONE since 2.x.
            raise RebalanceInProgress(f"group {cmd.group!r} is rebalancing; rejoin")
        return HeartbeatResult()

    def leave(self, cmd: LeaveGroup, now: float) -> LeaveGroupResult:
        group = self.groups.get((cmd.stream, cmd.group))
        instance_ids = cmd.group_instance_ids or (None,) * len(cmd.member_ids)
        unknown: list[str] = []
        for member_id, instance_id in zip(cmd.member_ids, instance_ids, strict=False):
            member = None
            if group is not None:
                member = group.members.get(member_id)
                if member is None and not member_id and instance_id is not None:
                    member = group.by_instance_id(instance_id)  # KIP-345 batch leave
            if group is None or member is None:
                unknown.append(member_id or str(instance_id))
                continue
            log.info("group member left", **ids(group), member=member.member_id)
            self.rebalancer.remove_member(group, member, now, reason="member left")
            self._settle(group, now)
        if unknown:
            # Kafka answers per member; the known ones above are gone either way.
            raise UnknownMember(f"not in group {cmd.group!r}: {', '.join(unknown)}")
        return LeaveGroupResult()

    def describe(self, cmd: DescribeGroup) -> DescribeGroupResult:
        group = self.groups.get((cmd.stream, cmd.group))
        if group is None:
            # Kafka (DescribeGroups < v6) describes an unknown group as Dead, without an error.
            info = GroupInfo(group=cmd.group, state=GroupState.DEAD.value, protocol_type="")
            return DescribeGroupResult(info=info)
        # Kafka's GroupMetadata.summary: protocol, metadata and assignments only when Stable.
        stable = group.state is _STABLE
        protocol = group.protocol if stable else ""
        members = tuple(m.info(protocol, with_assignment=stable) for m in group.members.values())
        info = GroupInfo(
            group=group.name,
            state=group.state.value,
            protocol_type=group.protocol_type,
            protocol=protocol,
            members=members,
        )
        return DescribeGroupResult(info=info)

    def list(self, cmd: ListGroups) -> ListGroupsResult:
        groups = tuple(
            GroupInfo(group=g.name, state=g.state.value, protocol_type=g.protocol_type)
            for key, g in sorted(self.groups.items())
            if cmd.stream is None or key[0] == cmd.stream
        )
        return ListGroupsResult(groups=groups)

    def check_commit(
        self, group: str, stream: str, generation: int, member_id: str, now: float | None
    ) -> None:
        """Refuse an offset commit that the group's membership makes stale (Kafka's
        ``validateOffsetCommit``); a valid one counts as the member's heartbeat at ``now``
        (None: it does not)."""
        if generation < 0 and not member_id:
            # A standalone commit (no group management, or another protocol) is always taken.
            # Kafka refuses one into a non-empty group; the gateway's other protocols commit
            # this way into groups its Kafka members may share.
            return
        g = self.groups.get((stream, group))
        if g is None:
            if generation < 0:
                return
            # Kafka: a generation for a group that does not exist comes from an older one.
            raise IllegalGeneration(f"group {group!r} has no generation {generation}")
        if generation < 0 and g.state is _EMPTY:
            return
        _, member = self.current_member(stream, group, member_id, generation)
        if g.state is _COMPLETING:
            # The member got its JoinGroup answer but has not synced yet.
            raise RebalanceInProgress(f"group {group!r} is completing a rebalance")
        # PreparingRebalance still takes commits: members commit before they rejoin (the
        # consumer's onJoinPrepare), and the heartbeat tells them about the rebalance.
        if now is not None:
            member.touch(now)

    def delete_group(self, stream: str, group: str) -> None:
        """Kafka's DeleteGroups: only an Empty group can go."""
        g = self.groups.get((stream, group))
        if g is None:
            raise UnknownGroup(f"group {group!r} does not exist")
        if g.state is not _EMPTY:
            raise GroupNotEmpty(f"group {group!r} has {len(g.members)} members")
        del self.groups[(stream, group)]
        g.state = GroupState.DEAD

    def abandon_join(self, stream: str, group_name: str, waiter: JoinWaiter, now: float) -> None:
        """The JoinGroup parked on ``waiter`` went away (client disconnected) unanswered."""
        group = self.groups.get((stream, group_name))
        member = next(
            (m for m in group.members.values() if m.join_waiter is waiter), None
        ) if group is not None else None  # fmt: skip
        if group is None or member is None or waiter.answered:
            return
        member.join_waiter = None
        if member.is_new:
            # Its id never reached the client, which will join afresh: drop it now rather than
            # stall the rebalance (Kafka needed MEMBER_ID_REQUIRED, KIP-394, for this).
            log.info("group join abandoned", **ids(group), member=member.member_id)
            self.rebalancer.remove_member(group, member, now, reason="join abandoned")
        else:
            # A known member may still rejoin; otherwise its session or the rebalance times out.
            member.touch(now)
        self._settle(group, now)

    def abandon_sync(self, sync_round: SyncRound, member_id: str, now: float) -> None:
        """A SyncGroup parked on ``sync_round`` went away unanswered: the member must heartbeat
        from now on."""
        for i, (group, member, parked) in enumerate(self.parked_syncs):
            if parked is sync_round and member.member_id == member_id:
                del self.parked_syncs[i]
                self._unpark(group, member, now)
                self._settle(group, now)
                return

    @staticmethod
    def assignment_from(sync_round: SyncRound, member_id: str, group: str) -> SyncGroupResult:
        """A parked follower's answer once its round ended."""
        if sync_round.assignments is None:
            raise RebalanceInProgress(f"group {group!r} started another rebalance")
        return SyncGroupResult(assignment=sync_round.assignments.get(member_id, b""))

    # -- deadlines -----------------------------------------------------------------------------

    def next_alarm(self) -> float:
        """When ``fire`` has something to do next (inf: nothing queued)."""
        while self._alarms:
            at, _, key = self._alarms[0]
            group = self.groups.get(key)
            if group is not None and group.alarm_at == at:
                return at
            heapq.heappop(self._alarms)  # superseded by an earlier alarm, or the group is gone
        return math.inf

    def fire(self, now: float) -> None:
        """Every deadline up to ``now``, in deadline order."""
        while self._alarms and self._alarms[0][0] <= now:
            at, _, key = heapq.heappop(self._alarms)
            group = self.groups.get(key)
            if group is None or group.alarm_at != at:
                continue
            group.alarm_at = math.inf
            self.rebalancer.on_deadlines(group, now)
            self._settle(group, now)

    # -- membership --------------------------------------------------------------------------

    def current_member(
        self, stream: str, group_name: str, member_id: str, generation: int
    ) -> tuple[Group, Member]:
        group = self.groups.get((stream, group_name))
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None:
            raise UnknownMember(f"member {member_id!r} is not in group {group_name!r}")
        if generation != group.generation:
            raise IllegalGeneration(
                f"generation {generation} is not group {group_name!r}'s {group.generation}"
            )
        return group, member

    def _rejoin(
        self,
        group: Group,
        member: Member,
        protocols: dict[str, bytes],
        waiter: JoinWaiter,
        now: float,
    ) -> JoinGroupResult | None:
        """A known member's JoinGroup: park it, or answer at once (Kafka's doJoinGroup)."""
        unchanged = member.matches(protocols)
        if group.state is _COMPLETING and unchanged:
            # It probably lost the JoinGroup answer; send the current generation again.
            return group.join_result(member)
        if group.state is _STABLE and unchanged and member.member_id != group.leader:
            # A follower with nothing new proceeds to SyncGroup; the leader rejoining forces a
            # rebalance, which is how it reacts to topic changes its metadata does not show.
            return group.join_result(member)
        member.protocols = protocols
        if member.join_waiter is not None:
            # A retry from the same member supersedes its earlier, presumably lost, request.
            member.join_waiter.refuse(RebalanceInProgress("superseded by a newer JoinGroup"))
        member.join_waiter = waiter
        if group.state is _PREPARING:
            self.rebalancer.try_complete_join(group, now)
        else:
            self.rebalancer.prepare(group, now, reason="member rejoined")
        return None

    def _unpark(self, group: Group, member: Member, now: float) -> None:
        member.syncs_waiting -= 1
        if member.syncs_waiting == 0 and group.members.get(member.member_id) is member:
            # Answered or abandoned, the member must heartbeat again from now on.
            member.touch(now)

    def _settle(self, group: Group, now: float) -> None:
        """After a transition: release the SyncGroups whose round ended, queue the alarm."""
        if self.parked_syncs:
            ended = [p for p in self.parked_syncs if p[2].done]
            if ended:
                self.parked_syncs = [p for p in self.parked_syncs if not p[2].done]
                for g, member, _ in ended:
                    self._unpark(g, member, now)
                    self._arm(g)
        self._arm(group)

    def rearm(self, group: Group) -> None:
        """Queue ``group``'s alarm afresh (a group restored from a snapshot)."""
        group.alarm_at = math.inf
        self._arm(group)

    def _arm(self, group: Group) -> None:
        at = group.next_deadline()
        if at >= group.alarm_at:
            return
        if not self._alarms or at < self._alarms[0][0]:
            self._on_earlier_alarm()
        group.alarm_at = at
        self._alarm_seq += 1
        heapq.heappush(self._alarms, (at, self._alarm_seq, group.key))


class GroupCoordinator:
    """One gateway's groups (backends without shared group state), on trio's clock."""

    def __init__(
        self,
        *,
        initial_rebalance_delay_ms: int = 3000,
        min_session_timeout_ms: int = 6000,
        max_session_timeout_ms: int = 1_800_000,
    ) -> None:
        self.table = GroupTable(
            initial_rebalance_delay_ms=initial_rebalance_delay_ms,
            min_session_timeout_ms=min_session_timeout_ms,
            max_session_timeout_ms=max_session_timeout_ms,
            on_earlier_alarm=self._wake,
        )
        self._wakeup = trio.Event()
        self._running = False

    def _wake(self) -> None:
        self._wakeup.set()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Fire the groups' alarms until cancelled; JoinGroup refuses to park without it."""
        if self._running:
            raise RuntimeError("GroupCoordinator.run() is already running")
        self._running = True
        task_status.started()
        try:
            while True:
                self.table.fire(trio.current_time())
                self._wakeup = trio.Event()
                with trio.move_on_at(self.table.next_alarm()):
                    await self._wakeup.wait()
        finally:
            self._running = False

    # -- the commands ----------------------------------------------------------------------

    async def join_group(self, cmd: JoinGroup) -> JoinGroupResult:
        if not self._running:
            raise RuntimeError("GroupCoordinator.run() is not running")
        await trio.lowlevel.checkpoint()
        outcome = self.table.join(
            cmd, trio.current_time(), new_member_id=f"{cmd.client_id}-{uuid4()}"
        )
        if isinstance(outcome, JoinGroupResult):
            return outcome
        try:
            return await outcome.wait()
        finally:
            if not outcome.answered:
                self.table.abandon_join(cmd.stream, cmd.group, outcome, trio.current_time())

    async def sync_group(self, cmd: SyncGroup) -> SyncGroupResult:
        await trio.lowlevel.checkpoint()
        outcome = self.table.sync(cmd, trio.current_time())
        if isinstance(outcome, SyncGroupResult):
            return outcome
        try:
            await outcome.wait()
        finally:
            if not outcome.done:
                self.table.abandon_sync(outcome, cmd.member_id, trio.current_time())
        return self.table.assignment_from(outcome, cmd.member_id, cmd.group)

    async def heartbeat(self, cmd: Heartbeat) -> HeartbeatResult:
        await trio.lowlevel.checkpoint()
        return self.table.heartbeat(cmd, trio.current_time())

    async def leave_group(self, cmd: LeaveGroup) -> LeaveGroupResult:
        await trio.lowlevel.checkpoint()
        return self.table.leave(cmd, trio.current_time())

    async def describe_group(self, cmd: DescribeGroup) -> DescribeGroupResult:
        await trio.lowlevel.checkpoint()
        return self.table.describe(cmd)

    async def list_groups(self, cmd: ListGroups) -> ListGroupsResult:
        await trio.lowlevel.checkpoint()
        return self.table.list(cmd)

    def check_commit(self, group: str, stream: str, generation: int, member_id: str) -> None:
        self.table.check_commit(group, stream, generation, member_id, trio.current_time())

    def delete_group(self, stream: str, group: str) -> None:
        self.table.delete_group(stream, group)


__all__ = ["GroupCoordinator", "GroupTable"]
