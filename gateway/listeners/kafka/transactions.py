"""Kafka transaction APIs (KIP-98): AddPartitionsToTxn, AddOffsetsToTxn, EndTxn and
TxnOffsetCommit, on a backend where transactions hold (``backends.base.Transactions``);
InitProducerId with a transactional id is in data.py beside the idempotent one.
WriteTxnMarkers is between brokers and never served. Each request is one canonical command;
its error is Kafka's, with PRODUCER_FENCED from the versions that have it (KIP-588) and
INVALID_PRODUCER_EPOCH before."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from gateway.listeners.kafka.data import txn_error_code
from gateway.listeners.kafka.session import Session
from gateway.model import (
    AddToTransaction,
    CommitTransactionOffsets,
    DescribeTopic,
    EndTransaction,
    GatewayError,
    NotFound,
    Topic,
)
from protocols.kafka.framing import KafkaRequest


async def add_partitions_to_txn(session: Session, req: KafkaRequest) -> Any:
    b = req.body
    stream = session.settings.stream
    wanted = [(t.name, p) for t in b.v3_and_below_topics for p in t.partitions]
    code = ErrorCode.none
    missing: set[tuple[str, int]] = set()
    assert session.ctx is not None
    try:
        await session.router.execute(
            AddToTransaction(
                transactional_id=b.v3_and_below_transactional_id,
                producer_id=b.v3_and_below_producer_id,
                producer_epoch=b.v3_and_below_producer_epoch,
                partitions=tuple((Topic(stream, name), p) for name, p in wanted),
            ),
            session.ctx,
        )
    except NotFound as exc:
        # Kafka: the unknown partitions get UNKNOWN_TOPIC_OR_PARTITION, the others
        # OPERATION_NOT_ATTEMPTED (none is added); which one is unknown, the metadata says.
        code = ErrorCode.operation_not_attempted
        missing = {(name, p) for name, p in wanted if not await _exists(session, name, p)}
        session.conn.log.info("add partitions to transaction failed", error=exc.message)
    except GatewayError as exc:
        code = txn_error_code(exc, req.api_version, fenced_from=2)
        session.conn.log.info("add partitions to transaction failed", error=exc.message)
    topics: dict[str, list[dict[str, Any]]] = {}
    for name, p in wanted:
        pcode = ErrorCode.unknown_topic_or_partition if (name, p) in missing else code
        topics.setdefault(name, []).append({"partition_index": p, "partition_error_code": pcode})
    return session.respond(
        req,
        {"throttle_time": 0, "results_by_topic_v3_and_below": [
            {"name": name, "results_by_partition": parts} for name, parts in topics.items()
        ]},
    )  # fmt: skip


async def _exists(session: Session, name: str, partition: int) -> bool:
    assert session.ctx is not None
    try:
        found = await session.router.execute(
            DescribeTopic(topic=Topic(session.settings.stream, name)), session.ctx
        )
    except GatewayError:
        return False
    return 0 <= partition < len(found.info.partitions)


async def add_offsets_to_txn(session: Session, req: KafkaRequest) -> Any:
    b = req.body
    cmd = AddToTransaction(
        transactional_id=b.transactional_id,
        producer_id=b.producer_id,
        producer_epoch=b.producer_epoch,
        groups=(b.group_id,),
    )
    return session.respond(
        req, {"throttle_time": 0, "error_code": await _run(session, req, cmd, 2)}
    )


async def end_txn(session: Session, req: KafkaRequest) -> Any:
    b = req.body
    cmd = EndTransaction(
        transactional_id=b.transactional_id,
        producer_id=b.producer_id,
        producer_epoch=b.producer_epoch,
        commit=b.committed,
    )
    return session.respond(
        req, {"throttle_time": 0, "error_code": await _run(session, req, cmd, 2)}
    )


async def txn_offset_commit(session: Session, req: KafkaRequest) -> Any:
    b = req.body
    stream = session.settings.stream
    cmd = CommitTransactionOffsets(
        transactional_id=b.transactional_id,
        producer_id=b.producer_id,
        producer_epoch=b.producer_epoch,
        group=b.group_id,
        stream=stream,
        offsets=tuple(
            (Topic(stream, t.name), p.partition_index, p.committed_offset,
             p.committed_metadata or "", getattr(p, "committed_leader_epoch", -1))  # v2+
            for t in b.topics
            for p in t.partitions
        ),
    )  # fmt: skip
    code = await _run(session, req, cmd, 3)
    return session.respond(
        req,
        {"throttle_time": 0, "topics": [
            {"name": t.name, "partitions": [
                {"partition_index": p.partition_index, "error_code": code} for p in t.partitions
            ]}
            for t in b.topics
        ]},
    )  # fmt: skip


async def _run(
    session: Session,
    req: KafkaRequest,
    cmd: AddToTransaction | EndTransaction | CommitTransactionOffsets,
    fenced_from: int,
) -> ErrorCode:
    assert session.ctx is not None
    try:
        await session.router.execute(cmd, session.ctx)  # type: ignore[misc]
    except GatewayError as exc:
        session.conn.log.info(f"{cmd.name} failed", error=exc.message)
        return txn_error_code(exc, req.api_version, fenced_from)
    return ErrorCode.none


__all__ = ["add_offsets_to_txn", "add_partitions_to_txn", "end_txn", "txn_offset_commit"]
