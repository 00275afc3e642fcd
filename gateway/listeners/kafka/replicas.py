"""Replica placement APIs, answered as a one-broker Kafka cluster answers them: every partition
has one replica, on this node, in the one log directory DescribeLogDirs reports, so nothing can
move and no leader needs electing.

- ElectLeaders (KIP-183/460): ELECTION_NOT_NEEDED for each existing partition (the leader is the
  preferred and only replica), UNKNOWN_TOPIC_OR_PARTITION for others; asked for every partition
  (null), a broker lists only the elections it performed: none.
- AlterReplicaLogDirs (KIP-113): NONE for that log directory (moving a replica to where it is),
  LOG_DIR_NOT_FOUND for any other path.
- AlterPartitionReassignments (KIP-455): NONE when the replicas are exactly this node,
  INVALID_REPLICA_ASSIGNMENT otherwise; cancelling (null replicas) finds
  NO_REASSIGNMENT_IN_PROGRESS. ListPartitionReassignments: none in progress.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kio.schema.errors import ErrorCode

from gateway.listeners.kafka.logs import log_dir
from gateway.listeners.kafka.session import Session
from gateway.model import DescribeTopic, GatewayError, NotFound, Topic
from gateway.translate.kafka import requests as tr
from protocols.kafka.framing import KafkaRequest


async def _partition_errors(
    session: Session, name: str, partitions: Iterable[int], found: ErrorCode
) -> dict[int, ErrorCode]:
    """partition -> ``found`` for the topic's existing partitions, else the error to answer."""
    assert session.ctx is not None
    wanted = list(partitions)
    try:
        tr.check_topic_name(name)
        topic = Topic(session.settings.stream, name)
        info = (await session.router.execute(DescribeTopic(topic=topic), session.ctx)).info
    except tr.InvalidTopicName:
        return dict.fromkeys(wanted, ErrorCode.unknown_topic_or_partition)
    except NotFound:
        return dict.fromkeys(wanted, ErrorCode.unknown_topic_or_partition)
    except GatewayError as exc:
        return dict.fromkeys(wanted, tr.error_code(exc))
    have = len(info.partitions)
    return {p: found if 0 <= p < have else ErrorCode.unknown_topic_or_partition for p in wanted}


def _message(code: ErrorCode) -> str | None:
    if code is ErrorCode.election_not_needed:
        return "leader election not needed: the only replica leads"
    return None if code is ErrorCode.none else code.name.upper()


async def elect_leaders(session: Session, req: KafkaRequest) -> Any:
    results = []
    for t in req.body.topic_partitions or ():  # null = all: no election performed, none listed
        codes = await _partition_errors(
            session, t.topic, t.partitions, ErrorCode.election_not_needed
        )
        results.append({
            "topic": t.topic,
            "partition_result": [
                {"partition_id": p, "error_code": code, "error_message": _message(code)}
                for p, code in codes.items()
            ],
        })  # fmt: skip
    return session.respond(
        req, {"throttle_time": 0, "error_code": ErrorCode.none, "replica_election_results": results}
    )


async def alter_replica_log_dirs(session: Session, req: KafkaRequest) -> Any:
    here = log_dir(session)
    results: dict[str, dict[int, ErrorCode]] = {}
    for d in req.body.dirs:
        for t in d.topics:
            if d.path == here:
                codes = await _partition_errors(session, t.name, t.partitions, ErrorCode.none)
            else:
                codes = dict.fromkeys(t.partitions, ErrorCode.log_dir_not_found)
            results.setdefault(t.name, {}).update(codes)
    return session.respond(
        req,
        {"throttle_time": 0, "results": [
            {"topic_name": name, "partitions": [
                {"partition_index": p, "error_code": code} for p, code in codes.items()
            ]}
            for name, codes in results.items()
        ]},
    )  # fmt: skip


async def alter_partition_reassignments(session: Session, req: KafkaRequest) -> Any:
    node = session.settings.node_id
    responses = []
    for t in req.body.topics:
        codes = await _partition_errors(
            session, t.name, [p.partition_index for p in t.partitions], ErrorCode.none
        )
        parts = []
        for p in t.partitions:
            code, message = codes[p.partition_index], None
            if code is ErrorCode.none:
                if p.replicas is None:
                    code = ErrorCode.no_reassignment_in_progress
                    message = "no reassignment is in progress for this partition"
                elif list(p.replicas) != [node]:
                    code = ErrorCode.invalid_replica_assignment
                    message = f"replicas {list(p.replicas)}: node {node} is the only broker"
            else:
                message = _message(code)
            parts.append({"partition_index": p.partition_index, "error_code": code,
                          "error_message": message})  # fmt: skip
        responses.append({"name": t.name, "partitions": parts})
    return session.respond(
        req,
        {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None,
         "responses": responses},
    )  # fmt: skip


async def list_partition_reassignments(session: Session, req: KafkaRequest) -> Any:
    return session.respond(
        req, {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None, "topics": []}
    )


__all__ = [
    "alter_partition_reassignments",
    "alter_replica_log_dirs",
    "elect_leaders",
    "list_partition_reassignments",
]
