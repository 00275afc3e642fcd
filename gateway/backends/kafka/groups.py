"""Consumer groups of the Kafka backend: the broker's group coordinator runs them.

Every gateway in front of one broker forwards JoinGroup, SyncGroup, Heartbeat and LeaveGroup to
the group's coordinator (FindCoordinator on the broker, cached per group) with member ids,
generations, static instance ids and the members' opaque protocol metadata and assignments
intact, so members that joined through different gateways are one group and the broker fences
their commits (``offsets``). JoinGroup and SyncGroup park at the broker until the rebalance
completes, and a broker answers one request of a connection at a time: each goes on a connection
of its own (leased from the coordinator's pool), never on the shared one that the data path and
heartbeats use.

JoinGroup v4+ answers a member without an id MEMBER_ID_REQUIRED with the id it should use; the
backend rejoins with it at once, as a Kafka client does, so the listener's own version (the
client may speak JoinGroup v0) does not matter. A coordinator that moved or is loading is
``BackendUnavailable``, which the Kafka listener answers COORDINATOR_NOT_AVAILABLE (the client
finds the coordinator again and retries); the cached address is dropped.
"""

from __future__ import annotations

from typing import Any, Final

from kio.schema.errors import ErrorCode

from gateway.backends.kafka.cluster import (
    DELETE_GROUPS,
    DESCRIBE_GROUPS,
    HEARTBEAT,
    JOIN_GROUP,
    LEAVE_GROUP,
    LIST_GROUPS,
    SYNC_GROUP,
    Api,
    Cluster,
)
from gateway.model import (
    DEFAULT_STREAM,
    DeleteGroup,
    DeleteGroupResult,
    DescribeGroup,
    DescribeGroupResult,
    GroupInfo,
    Heartbeat,
    HeartbeatResult,
    JoinGroup,
    JoinGroupResult,
    LeaveGroup,
    LeaveGroupResult,
    ListGroups,
    ListGroupsResult,
    MemberIdRequired,
    MemberInfo,
    SyncGroup,
    SyncGroupResult,
    UnknownGroup,
    Unsupported,
)
from gateway.translate.kafka.errors import gateway_error

COORDINATOR_MOVED: Final = frozenset(
    (ErrorCode.not_coordinator, ErrorCode.coordinator_not_available,
     ErrorCode.coordinator_load_in_progress)
)  # fmt: skip
# Kafka's group.max.session.timeout.ms default: how long a SyncGroup may wait for the leader's
# assignment when the member's rebalance timeout is not known here (it joined elsewhere).
_DEFAULT_REBALANCE_S: Final = 300.0


def _group_name(group: str, stream: str) -> str:
    if stream != DEFAULT_STREAM:
        raise Unsupported(
            f"stream {stream!r}: the Kafka backend has one namespace, the stream "
            f"{DEFAULT_STREAM!r}, so its groups are the broker's"
        )
    return group


class BrokerGroups:
    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        # The longest rebalance timeout a member joined with, per group: how long a SyncGroup
        # may park at the broker.
        self._rebalance_s: dict[str, float] = {}

    def _check(self, group: str, code: ErrorCode, what: str) -> None:
        if code in COORDINATOR_MOVED:
            self.cluster.forget_coordinator(group)
        if code is not ErrorCode.none:
            raise gateway_error(code, f"group {group!r}: {what}")

    async def _parked(self, group: str, api: Api, values: dict[str, Any], wait_s: float) -> Any:
        """A request the coordinator may hold until a rebalance completes, alone on a
        connection."""
        pool = await self.cluster.coordinator_pool(group)
        async with pool.lease() as conn:
            return await self.cluster.request(api, values, conn=conn, extra_timeout_s=wait_s)

    async def _quick(self, group: str, api: Api, values: dict[str, Any]) -> Any:
        conn = await self.cluster.coordinator(group)
        return await self.cluster.request(api, values, conn=conn)

    # --- membership ------------------------------------------------------------------------------

    async def join(self, cmd: JoinGroup) -> JoinGroupResult:
        group = _group_name(cmd.group, cmd.stream)
        if cmd.topics:
            raise Unsupported("server-assigned groups (Iggy) do not run on a Kafka broker")
        rebalance_s = cmd.rebalance_timeout_ms / 1000
        self._rebalance_s[group] = max(self._rebalance_s.get(group, 0.0), rebalance_s)
        values: dict[str, Any] = {
            "group_id": group, "session_timeout": cmd.session_timeout_ms,
            "rebalance_timeout": cmd.rebalance_timeout_ms, "member_id": cmd.member_id,
            "group_instance_id": cmd.group_instance_id, "protocol_type": cmd.protocol_type,
            "protocols": [{"name": n, "metadata": m} for n, m in cmd.protocols],
        }  # fmt: skip
        answer = await self._parked(group, JOIN_GROUP, values, rebalance_s)
        if answer.error_code is ErrorCode.member_id_required and not cmd.member_id:
            values["member_id"] = answer.member_id
            answer = await self._parked(group, JOIN_GROUP, values, rebalance_s)
        if answer.error_code is ErrorCode.member_id_required:  # twice: tell the client
            raise MemberIdRequired(
                "the coordinator requires a member id", member_id=answer.member_id
            )
        self._check(group, answer.error_code, "join")
        return JoinGroupResult(
            generation=answer.generation_id,
            protocol_name=answer.protocol_name or "",
            leader=answer.leader,
            member_id=answer.member_id,
            members=tuple(
                MemberInfo(
                    member_id=m.member_id,
                    group_instance_id=getattr(m, "group_instance_id", None),
                    metadata=bytes(m.metadata),
                )
                for m in answer.members
            ),
        )

    async def sync(self, cmd: SyncGroup) -> SyncGroupResult:
        group = _group_name(cmd.group, cmd.stream)
        answer = await self._parked(
            group, SYNC_GROUP,
            {"group_id": group, "generation_id": cmd.generation, "member_id": cmd.member_id,
             "group_instance_id": None, "protocol_type": None, "protocol_name": None,
             "assignments": [{"member_id": m, "assignment": a} for m, a in cmd.assignments]},
            self._rebalance_s.get(group, _DEFAULT_REBALANCE_S),
        )  # fmt: skip
        self._check(group, answer.error_code, "sync")
        return SyncGroupResult(assignment=bytes(answer.assignment))

    async def heartbeat(self, cmd: Heartbeat) -> HeartbeatResult:
        group = _group_name(cmd.group, cmd.stream)
        answer = await self._quick(
            group, HEARTBEAT,
            {"group_id": group, "generation_id": cmd.generation, "member_id": cmd.member_id,
             "group_instance_id": None},
        )  # fmt: skip
        self._check(group, answer.error_code, "heartbeat")
        return HeartbeatResult()

    async def leave(self, cmd: LeaveGroup) -> LeaveGroupResult:
        group = _group_name(cmd.group, cmd.stream)
        instances = cmd.group_instance_ids or (None,) * len(cmd.member_ids)
        conn = await self.cluster.coordinator(group)  # bootstraps: the versions are known after
        if self.cluster.version(LEAVE_GROUP) >= 3:
            values: dict[str, Any] = {"group_id": group, "members": [
                {"member_id": m, "group_instance_id": i, "reason": None}
                for m, i in zip(cmd.member_ids, instances, strict=True)]}  # fmt: skip
            answer = await self.cluster.request(LEAVE_GROUP, values, conn=conn)
            self._check(group, answer.error_code, "leave")
            for member in answer.members:
                self._check(group, member.error_code, f"leave of {member.member_id!r}")
            return LeaveGroupResult()
        for member_id in cmd.member_ids:  # v0-v2: one member a request
            answer = await self.cluster.request(
                LEAVE_GROUP, {"group_id": group, "member_id": member_id}, conn=conn
            )
            self._check(group, answer.error_code, "leave")
        return LeaveGroupResult()

    # --- inspection ------------------------------------------------------------------------------

    async def describe(self, cmd: DescribeGroup) -> DescribeGroupResult:
        group = _group_name(cmd.group, cmd.stream)
        answer = await self._quick(
            group, DESCRIBE_GROUPS, {"groups": [group], "include_authorized_operations": False}
        )
        [g] = answer.groups
        self._check(group, g.error_code, "describe")
        if g.group_state == "Dead":
            raise UnknownGroup(f"group {group!r} does not exist")
        return DescribeGroupResult(
            info=GroupInfo(
                group=group,
                state=g.group_state,
                protocol_type=g.protocol_type,
                protocol=g.protocol_data,
                members=tuple(
                    MemberInfo(
                        member_id=m.member_id,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        group_instance_id=getattr(m, "group_instance_id", None),
                        metadata=bytes(m.member_metadata),
                        assignment=bytes(m.member_assignment),
                    )
                    for m in g.members
                ),
            )
        )

    async def delete(self, cmd: DeleteGroup) -> DeleteGroupResult:
        # The broker's DeleteGroups: an Empty group goes with its committed offsets.
        group = _group_name(cmd.group, cmd.stream)
        answer = await self._quick(group, DELETE_GROUPS, {"groups_names": [group]})
        [result] = answer.results
        self._check(group, result.error_code, "delete")
        return DeleteGroupResult()

    async def list(self, cmd: ListGroups) -> ListGroupsResult:
        if cmd.stream not in (None, DEFAULT_STREAM):
            return ListGroupsResult(groups=())
        groups: dict[str, GroupInfo] = {}
        nodes: list[int | None] = [*sorted(self.cluster.brokers)] or [None]
        for node in nodes:  # each broker lists the groups it coordinates
            answer = await self.cluster.request(LIST_GROUPS, {"states_filter": []}, node=node)
            if answer.error_code is not ErrorCode.none:
                raise gateway_error(answer.error_code, "list groups")
            for g in answer.groups:
                groups[g.group_id] = GroupInfo(
                    group=g.group_id,
                    state=getattr(g, "group_state", "") or "",
                    protocol_type=g.protocol_type,
                )
        return ListGroupsResult(groups=tuple(groups[name] for name in sorted(groups)))


__all__ = ["COORDINATOR_MOVED", "BrokerGroups"]
