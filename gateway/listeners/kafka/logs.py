"""Kafka's partition-log APIs: DeleteRecords (the canonical DeleteRecords: the log start moves,
reads below it are OFFSET_OUT_OF_RANGE) and DescribeLogDirs (the size of every partition from
the backend's TopicInfo, in one log directory named after the backend and the listener's stream:
the gateway has no other directory to report)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from gateway.listeners.kafka.session import Session
from gateway.model import (
    DeleteRecords,
    DescribeTopic,
    GatewayError,
    ListTopics,
    NotFound,
    Topic,
    TopicInfo,
)
from gateway.translate.kafka import requests as tr
from protocols.kafka.framing import KafkaRequest


def log_dir(session: Session) -> str:
    """The one log directory this listener reports (DescribeLogDirs, AlterReplicaLogDirs)."""
    return f"/{session.router.backend.name}/{session.settings.stream}"


async def delete_records(session: Session, req: KafkaRequest) -> Any:
    assert session.ctx is not None
    topics = []
    for t in req.body.topics:
        parts = []
        for p in t.partitions:
            code, start = ErrorCode.none, -1
            try:
                cmd = DeleteRecords(topic=Topic(session.settings.stream, t.name),
                                    partition=p.partition_index, offset=p.offset)  # fmt: skip
                start = (await session.router.execute(cmd, session.ctx)).log_start_offset
            except GatewayError as exc:
                code = tr.error_code(exc)
            parts.append({"partition_index": p.partition_index, "low_watermark": start,
                          "error_code": code})  # fmt: skip
        topics.append({"name": t.name, "partitions": parts})
    return session.respond(req, {"throttle_time": 0, "topics": topics})


async def describe_log_dirs(session: Session, req: KafkaRequest) -> Any:
    assert session.ctx is not None
    stream = session.settings.stream
    execute = session.router.execute
    wanted: dict[str, set[int] | None] | None = None
    if req.body.topics is not None:
        wanted = {t.topic: set(t.partitions) for t in req.body.topics}
    infos: list[TopicInfo] = []
    if wanted is None:
        try:
            infos = list((await execute(ListTopics(stream=stream), session.ctx)).topics)
        except NotFound:  # the stream appears with its first topic
            infos = []
    else:
        for name in wanted:
            try:
                found = await execute(DescribeTopic(topic=Topic(stream, name)), session.ctx)
                infos.append(found.info)
            except GatewayError:
                continue  # Kafka leaves out what this broker does not hold
    topics = []
    for info in sorted(infos, key=lambda i: i.topic.name):
        only = wanted.get(info.topic.name) if wanted is not None else None
        topics.append({
            "name": info.topic.name,
            "partitions": [
                {"partition_index": p.partition, "partition_size": p.size_bytes,
                 "offset_lag": 0, "is_future_key": False}
                for p in info.partitions if not only or p.partition in only
            ],
        })  # fmt: skip
    return session.respond(
        req,
        {"throttle_time": 0, "error_code": ErrorCode.none,
         "results": [{"error_code": ErrorCode.none, "log_dir": log_dir(session), "topics": topics,
                      "total_bytes": -1, "usable_bytes": -1}]},
    )  # fmt: skip


__all__ = ["delete_records", "describe_log_dirs", "log_dir"]
