"""Members arriving in a classic group without a member id: a new member, or a static member
(KIP-345, ``group.instance.id``) coming back after a restart. Transitions of ``GroupTable.join``
(``groups``), kept apart so that module stays one screenful of state machine."""

from __future__ import annotations

import structlog

from gateway.model import JoinGroup, JoinGroupResult, UnknownMember

from .group_state import Group, GroupState, JoinWaiter, Member
from .rebalance import Rebalancer, ids

log = structlog.get_logger("streamgate.coordination")

_EMPTY = GroupState.EMPTY
_PREPARING = GroupState.PREPARING_REBALANCE
_STABLE = GroupState.STABLE


def add_member(
    rebalancer: Rebalancer,
    group: Group,
    cmd: JoinGroup,
    member_id: str,
    protocols: dict[str, bytes],
    waiter: JoinWaiter,
    now: float,
) -> Member:
    member = Member(
        member_id=member_id,
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
        rebalancer.try_complete_join(group, now)
    else:
        rebalancer.prepare(group, now, reason="new member")
    return member


def replace_static(
    rebalancer: Rebalancer,
    group: Group,
    member: Member,
    cmd: JoinGroup,
    new_member_id: str,
    protocols: dict[str, bytes],
    waiter: JoinWaiter,
    now: float,
) -> JoinGroupResult | JoinWaiter:
    """Kafka's updateStaticMemberAndRebalance: the member keeps its place, assignment and
    leadership under a new member id (the old id is fenced: it is no longer in the group).
    A Stable group whose protocol choice still holds answers at once with the current
    generation and no rebalance; the leader named is the one before the swap, so a restarted
    leader does not compute an assignment a Stable group would never hand out."""
    old_id, leader_before = member.member_id, group.leader
    if member.join_waiter is not None:
        member.join_waiter.refuse(UnknownMember(f"member {old_id!r} was replaced"))
        member.join_waiter = None
    group.members = {
        (new_member_id if k == old_id else k): m for k, m in group.members.items()
    }  # join order kept: the member keeps its place in line for leadership
    member.member_id = new_member_id
    if group.leader == old_id:
        group.leader = new_member_id
    if old_id in group.pending_sync:
        group.pending_sync.discard(old_id)
        group.pending_sync.add(new_member_id)
    member.client_id, member.client_host = cmd.client_id, cmd.client_host
    member.session_timeout_s = cmd.session_timeout_ms / 1000
    member.rebalance_timeout_s = cmd.rebalance_timeout_ms / 1000
    member.protocols = protocols
    member.touch(now)
    log.info("static member rejoined", **ids(group), member=new_member_id, replaced=old_id,
             instance=cmd.group_instance_id)  # fmt: skip
    if group.state is _STABLE and group.select_protocol() == group.protocol:
        member.is_new = False
        return JoinGroupResult(
            generation=group.generation,
            protocol_name=group.protocol,
            leader=leader_before,
            member_id=new_member_id,
        )
    member.join_waiter = waiter
    if group.state is _PREPARING:
        rebalancer.try_complete_join(group, now)
    else:  # Stable with a protocol change, or CompletingRebalance: the member needs news
        rebalancer.prepare(group, now, reason="static member rejoined")
    return waiter


__all__ = ["add_member", "replace_static"]
