"""Kafka's classic group coordinator (GroupCoordinator.scala), on one node, in memory.

Used for backends without native consumer groups. JoinGroup and SyncGroup are long-polls parked on
waiters; every deadline (sessions, the join phase, pending syncs) lives on trio's clock and is
served by the one alarm task in ``run``, so tests drive it all with ``autojump_clock``.
"""

from __future__ import annotations

import heapq
import math
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

from .group_state import Group, GroupKey, GroupState, JoinWaiter, Member
from .rebalance import Rebalancer, ids

log = structlog.get_logger("streamgate.coordination")

_EMPTY = GroupState.EMPTY
_PREPARING = GroupState.PREPARING_REBALANCE
_COMPLETING = GroupState.COMPLETING_REBALANCE
_STABLE = GroupState.STABLE


class GroupCoordinator:
    """Consumer groups keyed by (stream, group): one Kafka listener's virtual cluster cannot
    see another's groups of the same name."""

    def __init__(
        self,
        *,
        initial_rebalance_delay_ms: int = 3000,
        min_session_timeout_ms: int = 6000,
        max_session_timeout_ms: int = 1_800_000,
    ) -> None:
        # Defaults are Kafka's group.initial.rebalance.delay.ms, group.min.session.timeout.ms
        # and group.max.session.timeout.ms.
        self._rebalancer = Rebalancer(initial_delay_s=initial_rebalance_delay_ms / 1000)
        self._min_session_ms = min_session_timeout_ms
        self._max_session_ms = max_session_timeout_ms
        self._groups: dict[GroupKey, Group] = {}
        self._alarms: list[tuple[float, int, GroupKey]] = []  # heap; stale entries are skipped
        self._alarm_seq = 0
        self._wakeup = trio.Event()
        self._running = False

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Fire the groups' alarms until cancelled; JoinGroup refuses to park without it."""
        if self._running:
            raise RuntimeError("GroupCoordinator.run() is already running")
        self._running = True
        task_status.started()
        try:
            while True:
                self._fire_alarms(trio.current_time())
                self._wakeup = trio.Event()
                next_at = self._alarms[0][0] if self._alarms else math.inf
                with trio.move_on_at(next_at):
                    await self._wakeup.wait()
        finally:
            self._running = False

    # -- the commands ----------------------------------------------------------------------

    async def join_group(self, cmd: JoinGroup) -> JoinGroupResult:
        if not self._running:
            raise RuntimeError("GroupCoordinator.run() is not running")
        await trio.lowlevel.checkpoint()
        if not self._min_session_ms <= cmd.session_timeout_ms <= self._max_session_ms:
            raise InvalidSessionTimeout(
                f"session timeout {cmd.session_timeout_ms} ms is outside "
                f"[{self._min_session_ms}, {self._max_session_ms}] ms"
            )
        protocols: dict[str, bytes] = {}
        for name, metadata in cmd.protocols:
            protocols.setdefault(name, metadata)
        key = (cmd.stream, cmd.group)
        group = self._groups.get(key)
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
            group = self._groups[key] = probe
        now = trio.current_time()
        waiter = JoinWaiter()
        if not cmd.member_id:
            member = self._add_member(group, cmd, protocols, waiter, now)
        else:
            member = group.members[cmd.member_id]
            member.session_timeout_s = cmd.session_timeout_ms / 1000
            member.rebalance_timeout_s = cmd.rebalance_timeout_ms / 1000
            member.touch(now)
            current = self._rejoin(group, member, protocols, waiter, now)
            if current is not None:
                self._arm(group)  # its session runs again, maybe with a new timeout
                return current
        self._arm(group)
        try:
            return await waiter.wait()
        finally:
            if not waiter.answered:
                self._abandon_join(group, member, waiter)

    async def sync_group(self, cmd: SyncGroup) -> SyncGroupResult:
        await trio.lowlevel.checkpoint()
        group, member = self._current_member(cmd.stream, cmd.group, cmd.member_id, cmd.generation)
        if group.state is _PREPARING:
            raise RebalanceInProgress(f"group {cmd.group!r} is rebalancing")
        now = trio.current_time()
        member.touch(now)
        group.pending_sync.discard(member.member_id)
        if not group.pending_sync:
            group.sync_deadline = math.inf
        if group.state is _STABLE:
            return SyncGroupResult(assignment=member.assignment)
        if member.member_id == group.leader:
            self._rebalancer.set_assignments(group, dict(cmd.assignments))
            return SyncGroupResult(assignment=member.assignment)
        sync_round = group.sync_round
        member.syncs_waiting += 1
        try:
            assignments = await sync_round.wait()
        finally:
            member.syncs_waiting -= 1
            if member.syncs_waiting == 0 and group.members.get(member.member_id) is member:
                # Answered or abandoned, the member must heartbeat again from now on.
                member.touch(trio.current_time())
                self._arm(group)
        if assignments is None:
            raise RebalanceInProgress(f"group {cmd.group!r} started another rebalance")
        return SyncGroupResult(assignment=assignments.get(member.member_id, b""))

    async def heartbeat(self, cmd: Heartbeat) -> HeartbeatResult:
        await trio.lowlevel.checkpoint()
        group, member = self._current_member(cmd.stream, cmd.group, cmd.member_id, cmd.generation)
        # The session moves later only, so the queued alarm stays valid (it re-arms on firing).
        member.touch(trio.current_time())
        if group.state is _PREPARING:
            # How Kafka tells a member to rejoin; CompletingRebalance answers NONE since 2.x.
            raise RebalanceInProgress(f"group {cmd.group!r} is rebalancing; rejoin")
        return HeartbeatResult()

    async def leave_group(self, cmd: LeaveGroup) -> LeaveGroupResult:
        await trio.lowlevel.checkpoint()
        group = self._groups.get((cmd.stream, cmd.group))
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
            self._rebalancer.remove_member(group, member, trio.current_time(), reason="member left")
            self._arm(group)
        if unknown:
            # Kafka answers per member; the known ones above are gone either way.
            raise UnknownMember(f"not in group {cmd.group!r}: {', '.join(unknown)}")
        return LeaveGroupResult()

    async def describe_group(self, cmd: DescribeGroup) -> DescribeGroupResult:
        await trio.lowlevel.checkpoint()
        group = self._groups.get((cmd.stream, cmd.group))
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

    async def list_groups(self, cmd: ListGroups) -> ListGroupsResult:
        await trio.lowlevel.checkpoint()
        groups = tuple(
            GroupInfo(group=g.name, state=g.state.value, protocol_type=g.protocol_type)
            for key, g in sorted(self._groups.items())
            if cmd.stream is None or key[0] == cmd.stream
        )
        return ListGroupsResult(groups=groups)

    def check_commit(self, group: str, stream: str, generation: int, member_id: str) -> None:
        """Refuse an offset commit that the group's membership makes stale (Kafka's
        ``validateOffsetCommit``)."""
        if generation < 0 and not member_id:
            # A standalone commit (no group management, or another protocol) is always taken.
            # Kafka refuses one into a non-empty group; the gateway's other protocols commit
            # this way into groups its Kafka members may share.
            return
        g = self._groups.get((stream, group))
        if g is None:
            if generation < 0:
                return
            # Kafka: a generation for a group that does not exist comes from an older one.
            raise IllegalGeneration(f"group {group!r} has no generation {generation}")
        if generation < 0 and g.state is _EMPTY:
            return
        _, member = self._current_member(stream, group, member_id, generation)
        if g.state is _COMPLETING:
            # The member got its JoinGroup answer but has not synced yet.
            raise RebalanceInProgress(f"group {group!r} is completing a rebalance")
        # PreparingRebalance still takes commits: members commit before they rejoin (the
        # consumer's onJoinPrepare), and the heartbeat tells them about the rebalance.
        member.touch(trio.current_time())

    def delete_group(self, stream: str, group: str) -> None:
        """Kafka's DeleteGroups: only an Empty group can go."""
        g = self._groups.get((stream, group))
        if g is None:
            raise UnknownGroup(f"group {group!r} does not exist")
        if g.state is not _EMPTY:
            raise GroupNotEmpty(f"group {group!r} has {len(g.members)} members")
        del self._groups[(stream, group)]
        g.state = GroupState.DEAD

    # -- membership --------------------------------------------------------------------------

    def _current_member(
        self, stream: str, group_name: str, member_id: str, generation: int
    ) -> tuple[Group, Member]:
        group = self._groups.get((stream, group_name))
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None:
            raise UnknownMember(f"member {member_id!r} is not in group {group_name!r}")
        if generation != group.generation:
            raise IllegalGeneration(
                f"generation {generation} is not group {group_name!r}'s {group.generation}"
            )
        return group, member

    def _add_member(
        self,
        group: Group,
        cmd: JoinGroup,
        protocols: dict[str, bytes],
        waiter: JoinWaiter,
        now: float,
    ) -> Member:
        member = Member(
            member_id=f"{cmd.client_id}-{uuid4()}",
            client_id=cmd.client_id,
            client_host=cmd.client_host,
            group_instance_id=cmd.group_instance_id,
            session_timeout_s=cmd.session_timeout_ms / 1000,
            rebalance_timeout_s=cmd.rebalance_timeout_ms / 1000,
            protocols=protocols,
            join_waiter=waiter,
        )
        member.touch(now)
        if group.state is _EMPTY:
            group.protocol_type = cmd.protocol_type
        group.add(member)
        if group.state is _PREPARING:
            if group.initial_delay:
                group.new_member_added = True  # stretches the initial delay (InitialDelayedJoin)
            self._rebalancer.try_complete_join(group, now)
        else:
            self._rebalancer.prepare(group, now, reason="new member")
        return member

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
            self._rebalancer.try_complete_join(group, now)
        else:
            self._rebalancer.prepare(group, now, reason="member rejoined")
        return None

    def _abandon_join(self, group: Group, member: Member, waiter: JoinWaiter) -> None:
        """The JoinGroup caller went away (client disconnected) before the rebalance ended."""
        if member.join_waiter is not waiter or group.members.get(member.member_id) is not member:
            return
        member.join_waiter = None
        if member.is_new:
            # Its id never reached the client, which will join afresh: drop it now rather than
            # stall the rebalance (Kafka needed MEMBER_ID_REQUIRED, KIP-394, for this).
            log.info("group join abandoned", **ids(group), member=member.member_id)
            self._rebalancer.remove_member(
                group, member, trio.current_time(), reason="join abandoned"
            )
        else:
            # A known member may still rejoin; otherwise its session or the rebalance times out.
            member.touch(trio.current_time())
        self._arm(group)

    # -- alarms --------------------------------------------------------------------------------

    def _arm(self, group: Group) -> None:
        at = group.next_deadline()
        if at >= group.alarm_at:
            return
        if not self._alarms or at < self._alarms[0][0]:
            self._wakeup.set()
        group.alarm_at = at
        self._alarm_seq += 1
        heapq.heappush(self._alarms, (at, self._alarm_seq, group.key))

    def _fire_alarms(self, now: float) -> None:
        while self._alarms and self._alarms[0][0] <= now:
            at, _, key = heapq.heappop(self._alarms)
            group = self._groups.get(key)
            if group is None or group.alarm_at != at:
                continue  # superseded by an earlier alarm, or the group is gone
            group.alarm_at = math.inf
            self._rebalancer.on_deadlines(group, now)
            self._arm(group)


__all__ = ["GroupCoordinator"]
