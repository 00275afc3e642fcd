"""Kafka group APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
OffsetFetch, DescribeGroups, ListGroups. The gateway answers FindCoordinator with its own address
for every group; membership runs where the router sends it: the broker's coordinator on a backend
with native groups (Kafka), else ``gateway.coordination``. Committed offsets (the NEXT offset to
read, as Kafka's) are kept by the backend (DESIGN.md §3)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from gateway.listeners.kafka.session import Session
from gateway.model import (
    CommitOffset,
    DeleteGroup,
    DescribeGroup,
    FetchOffset,
    Forbidden,
    GatewayError,
    Heartbeat,
    InitTransaction,
    JoinGroup,
    LeaveGroup,
    ListGroups,
    ListTopics,
    MemberIdRequired,
    NotFound,
    SyncGroup,
    Topic,
)
from gateway.translate.kafka import requests as tr
from protocols.kafka.framing import KafkaRequest

_INT32_MIN = -(2**31)  # "authorized operations not requested" (kafka.md §1.4 trap 6)


def _generation(body: Any) -> int:
    for name in ("generation_id", "generation_id_or_member_epoch"):
        if hasattr(body, name):
            return int(getattr(body, name))
    return -1


async def find_coordinator(session: Session, req: KafkaRequest) -> Any:
    key_type = getattr(req.body, "key_type", 0)
    if key_type == 1 and session.router.supports(InitTransaction):
        key_type = 0  # a transaction coordinator: this gateway too
    if key_type != 0:
        # A transaction coordinator (1) on a backend without transactions (README). The
        # retriable COORDINATOR_NOT_AVAILABLE had clients ask again for ever (librdkafka until
        # init_transactions() timed out, 17,628 requests in one run); this error is fatal to a
        # transactional producer in librdkafka (rd_kafka_txn_handle_FindCoordinator), the Java
        # client and kafka-python alike, and is what InitProducerId answers the same producer.
        code = ErrorCode.transactional_id_authorization_failed
        if key_type != 1:  # no other coordinator type is served either
            code = ErrorCode.invalid_request
        session.conn.log.info("transaction coordinator refused", key=req.body.key)
        return session.respond(
            req, {"throttle_time": 0, "error_code": code, "node_id": -1, "host": "", "port": -1,
                  "error_message": "transactions are not supported by this gateway"},
        )  # fmt: skip
    return session.respond(
        req,
        {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None,
         "node_id": session.settings.node_id, "host": session.host, "port": session.port},
    )  # fmt: skip


async def join_group(session: Session, req: KafkaRequest) -> Any:
    assert session.ctx is not None
    b = req.body
    session_timeout = tr.millis(b.session_timeout)
    cmd = JoinGroup(
        group=b.group_id,
        stream=session.settings.stream,
        member_id=b.member_id,
        group_instance_id=getattr(b, "group_instance_id", None),
        client_id=session.client_id,
        client_host=session.peer_host,
        session_timeout_ms=session_timeout,
        rebalance_timeout_ms=tr.millis(getattr(b, "rebalance_timeout", session_timeout)),
        protocol_type=b.protocol_type,
        protocols=tuple((p.name, bytes(p.metadata)) for p in b.protocols),
    )
    try:
        result = await session.router.execute(cmd, session.ctx)
    except GatewayError as exc:
        member = exc.member_id if isinstance(exc, MemberIdRequired) else b.member_id
        return session.respond(
            req, {"throttle_time": 0, "error_code": tr.error_code(exc, group=True),
                  "generation_id": -1, "protocol_name": "", "leader": "", "member_id": member,
                  "members": []},
        )  # fmt: skip
    return session.respond(
        req,
        {
            "throttle_time": 0,
            "error_code": ErrorCode.none,
            "generation_id": result.generation,
            "protocol_name": result.protocol_name,
            "leader": result.leader,
            "member_id": result.member_id,
            "members": [
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "metadata": m.metadata,
                }
                for m in result.members
            ],
        },
    )


async def sync_group(session: Session, req: KafkaRequest) -> Any:
    assert session.ctx is not None
    b = req.body
    cmd = SyncGroup(
        group=b.group_id,
        stream=session.settings.stream,
        generation=b.generation_id,
        member_id=b.member_id,
        assignments=tuple((a.member_id, bytes(a.assignment)) for a in b.assignments),
    )
    try:
        result = await session.router.execute(cmd, session.ctx)
    except GatewayError as exc:
        return session.respond(
            req,
            {"throttle_time": 0, "error_code": tr.error_code(exc, group=True), "assignment": b""},
        )
    return session.respond(
        req, {"throttle_time": 0, "error_code": ErrorCode.none, "assignment": result.assignment}
    )


async def heartbeat(session: Session, req: KafkaRequest) -> Any:
    assert session.ctx is not None
    b = req.body
    cmd = Heartbeat(
        group=b.group_id,
        stream=session.settings.stream,
        generation=b.generation_id,
        member_id=b.member_id,
    )
    try:
        await session.router.execute(cmd, session.ctx)
    except GatewayError as exc:
        return session.respond(
            req, {"throttle_time": 0, "error_code": tr.error_code(exc, group=True)}
        )
    return session.respond(req, {"throttle_time": 0, "error_code": ErrorCode.none})


async def leave_group(session: Session, req: KafkaRequest) -> Any:
    assert session.ctx is not None
    b = req.body
    cmd = LeaveGroup(group=b.group_id, stream=session.settings.stream, member_ids=(b.member_id,))
    try:
        await session.router.execute(cmd, session.ctx)
    except GatewayError as exc:
        return session.respond(
            req, {"throttle_time": 0, "error_code": tr.error_code(exc, group=True)}
        )
    return session.respond(req, {"throttle_time": 0, "error_code": ErrorCode.none})


async def offset_commit(session: Session, req: KafkaRequest) -> Any:
    assert session.ctx is not None
    b = req.body
    stream = session.settings.stream
    generation, member_id = _generation(b), b.member_id
    topics = []
    for t in b.topics:
        parts = []
        for p in t.partitions:
            code = ErrorCode.none
            try:
                await session.router.execute(
                    CommitOffset(
                        group=b.group_id,
                        topic=Topic(stream, t.name),
                        partition=p.partition_index,
                        offset=p.committed_offset,
                        metadata=p.committed_metadata or "",
                        leader_epoch=getattr(p, "committed_leader_epoch", -1),  # v6+
                        generation=generation,
                        member_id=member_id,
                    ),
                    session.ctx,
                )
            except GatewayError as exc:
                code = tr.error_code(exc, group=True)
            parts.append({"partition_index": p.partition_index, "error_code": code})
        topics.append({"name": t.name, "partitions": parts})
    return session.respond(req, {"throttle_time": 0, "topics": topics})


async def offset_fetch(session: Session, req: KafkaRequest) -> Any:
    assert session.ctx is not None
    b = req.body
    stream = session.settings.stream
    execute = session.router.execute
    wanted: list[tuple[str, list[int]]]
    only_committed = b.topics is None  # null (v2+) = every partition the group committed
    if only_committed:
        try:
            infos = (await execute(ListTopics(stream=stream), session.ctx)).topics
        except NotFound:  # no topic yet in the listener's stream: nothing committed either
            infos = ()
        except GatewayError as exc:
            return session.respond(
                req, {"throttle_time": 0, "topics": [], "error_code": tr.error_code(exc)}
            )
        # only the topics the user may read (Kafka leaves the others out, no error)
        probe = [FetchOffset(group=b.group_id, topic=i.topic, partition=0) for i in infos]
        readable = [
            i
            for i, f in zip(infos, probe, strict=True)
            if await session.router.permits(f, session.ctx)
        ]
        wanted = [(i.topic.name, [p.partition for p in i.partitions]) for i in readable]
    else:
        wanted = [(t.name, list(t.partition_indexes)) for t in b.topics]
    topics = []
    for name, indexes in wanted:
        parts = []
        for index in indexes:
            entry: dict[str, Any] = {"partition_index": index, "committed_offset": -1,
                                     "committed_leader_epoch": -1, "metadata": "",
                                     "error_code": ErrorCode.none}  # fmt: skip
            try:
                result = await execute(
                    FetchOffset(group=b.group_id, topic=Topic(stream, name), partition=index),
                    session.ctx,
                )
            except GatewayError as exc:
                entry["error_code"] = tr.error_code(exc, group=True)
            else:
                if result.offset is not None:
                    entry.update(committed_offset=result.offset, metadata=result.metadata,
                                 committed_leader_epoch=result.leader_epoch)  # fmt: skip
                elif only_committed:
                    continue
            parts.append(entry)
        if parts or not only_committed:
            topics.append({"name": name, "partitions": parts})
    return session.respond(
        req, {"throttle_time": 0, "topics": topics, "error_code": ErrorCode.none}
    )


async def describe_groups(session: Session, req: KafkaRequest) -> Any:
    assert session.ctx is not None
    groups = []
    for group_id in req.body.groups:
        try:
            result = await session.router.execute(
                DescribeGroup(group=group_id, stream=session.settings.stream), session.ctx
            )
        except GatewayError as exc:
            groups.append({"error_code": tr.error_code(exc, group=True), "group_id": group_id,
                           "group_state": "", "protocol_type": "", "protocol_data": "",
                           "members": [], "authorized_operations": _INT32_MIN})  # fmt: skip
            continue
        info = result.info
        groups.append(
            {
                "error_code": ErrorCode.none,
                "group_id": group_id,
                "group_state": info.state,
                "protocol_type": info.protocol_type,
                "protocol_data": info.protocol,
                "members": [
                    {
                        "member_id": m.member_id,
                        "group_instance_id": m.group_instance_id,
                        "client_id": m.client_id,
                        "client_host": m.client_host,
                        "member_metadata": m.metadata,
                        "member_assignment": m.assignment,
                    }
                    for m in info.members
                ],
                "authorized_operations": _INT32_MIN,
            }
        )
    return session.respond(req, {"throttle_time": 0, "groups": groups})


async def delete_groups(session: Session, req: KafkaRequest) -> Any:
    assert session.ctx is not None
    results = []
    for group_id in req.body.groups_names:
        code = ErrorCode.none
        try:
            await session.router.execute(
                DeleteGroup(group=group_id, stream=session.settings.stream), session.ctx
            )
        except GatewayError as exc:  # NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND, ...
            code = tr.error_code(exc, group=True)
        results.append({"group_id": group_id, "error_code": code})
    return session.respond(req, {"throttle_time": 0, "results": results})


async def list_groups(session: Session, req: KafkaRequest) -> Any:
    assert session.ctx is not None
    try:
        result = await session.router.execute(
            ListGroups(stream=session.settings.stream), session.ctx
        )
    except Forbidden:
        # As Kafka: the list holds the groups the user may describe, no error; here a group is
        # as readable as its stream, so a user who reads nothing there sees none.
        return session.respond(
            req, {"throttle_time": 0, "error_code": ErrorCode.none, "groups": []}
        )
    except GatewayError as exc:
        return session.respond(
            req, {"throttle_time": 0, "error_code": tr.error_code(exc, group=True), "groups": []}
        )
    # v4+ (KIP-518): each group's state, and only the states asked for (none named: all), as
    # Kafka compares them, ignoring case.
    wanted = {s.lower() for s in getattr(req.body, "states_filter", ())}
    return session.respond(
        req,
        {"throttle_time": 0, "error_code": ErrorCode.none,
         "groups": [{"group_id": g.group, "protocol_type": g.protocol_type,
                     "group_state": g.state}
                    for g in result.groups if not wanted or g.state.lower() in wanted]},
    )  # fmt: skip


__all__ = [
    "delete_groups", "describe_groups", "find_coordinator", "heartbeat", "join_group",
    "leave_group", "list_groups", "offset_commit", "offset_fetch", "sync_group",
]  # fmt: skip
