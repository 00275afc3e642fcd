"""Kafka data APIs: Produce, Fetch, ListOffsets, InitProducerId (kafka.md §1, §3.3)."""

from __future__ import annotations

from typing import Any

import trio
from kio.schema.errors import ErrorCode

from gateway.listeners.kafka.session import Session
from gateway.model import (
    Acks,
    Append,
    AwaitData,
    GatewayError,
    InitProducer,
    InitTransaction,
    InvalidRequest,
    Isolation,
    ListOffsets,
    MessageBatch,
    OffsetOutOfRange,
    OffsetSpec,
    Read,
    ReadResult,
    Topic,
    decode_wire,
)
from gateway.translate.kafka import requests as tr
from protocols._wire import Gather, RemoteProtocolError
from protocols.kafka.framing import KafkaRequest
from protocols.kafka.hot import (
    FetchPartition,
    ProducePartition,
    encode_produce_response,
    fetch_response_pieces,
)

_ACKS = {0: Acks.NONE, 1: Acks.LEADER, -1: Acks.ALL}
# Fetch v4+ / ListOffsets v2+ isolation_level: 0 read_uncommitted, 1 read_committed (KIP-98)
_ISOLATION = {0: Isolation.UNCOMMITTED, 1: Isolation.COMMITTED}


# --- Produce -------------------------------------------------------------------------------------


async def produce(session: Session, req: KafkaRequest) -> bytes | None:
    body = req.body
    acks = _ACKS.get(body.acks)
    transactions = session.router.supports(InitTransaction)
    failed: list[str] = []
    topics: list[tuple[str, list[ProducePartition]]] = []
    for topic in body.topic_data:
        parts = []
        for p in topic.partition_data:
            if acks is None:
                code, base, start = ErrorCode.invalid_required_acks, -1, -1
            elif body.transactional_id is not None and not transactions:
                code, base, start = ErrorCode.transactional_id_authorization_failed, -1, -1
            else:
                code, base, start = await _append(
                    session, topic.name, p.index, p.records, acks, body.transactional_id
                )
            if code is not ErrorCode.none:
                failed.append(f"{topic.name}[{p.index}]: {code.name}")
            parts.append(ProducePartition(p.index, code.value, base, -1, start))
        topics.append((topic.name, parts))
    if acks is Acks.NONE:
        if failed:
            # acks=0 has no response to carry an error: Kafka closes the connection so the
            # producer notices (and refreshes its metadata) instead of losing data silently.
            raise RemoteProtocolError(f"acks=0 produce failed: {', '.join(failed)}")
        return None
    return encode_produce_response(req.correlation_id, req.api_version, topics)


async def _append(
    session: Session,
    name: str,
    partition: int,
    records: bytes | None,
    acks: Acks,
    transactional_id: str | None,
) -> tuple[ErrorCode, int, int]:
    router = session.router
    assert session.ctx is not None
    try:
        tr.check_topic_name(name)
        wire, header = tr.produce_batch(
            records, max_batch_size=router.backend.capabilities.max_message_bytes + 1024
        )
        if header.is_transactional and transactional_id is None:
            raise InvalidRequest("a transactional batch needs the request's transactional id")
        if tr.WIRE_FORMAT in router.backend.capabilities.wire_formats:
            batch = MessageBatch(wire=wire)
        else:
            batch = MessageBatch(decode_wire(wire))
        result = await router.execute(
            Append(
                topic=Topic(session.settings.stream, name),
                partition=partition,
                batch=batch,
                acks=acks,
                producer_id=header.producer_id,
                producer_epoch=header.producer_epoch,
                base_sequence=header.base_sequence,
                transactional_id=transactional_id if header.is_transactional else None,
            ),
            session.ctx,
        )
    except GatewayError as exc:
        session.conn.log.info("produce failed", topic=name, partition=partition, error=exc.message)
        return tr.error_code(exc), -1, -1
    return ErrorCode.none, result.base_offset, result.log_start_offset


# --- Fetch ---------------------------------------------------------------------------------------


async def fetch(session: Session, req: KafkaRequest) -> Gather:
    body = req.body
    max_wait_ms = max(0, tr.millis(body.max_wait))
    min_bytes = max(1, body.min_bytes)
    max_bytes = getattr(body, "max_bytes", 0x7FFFFFFF)
    isolation = _ISOLATION.get(body.isolation_level, Isolation.UNCOMMITTED)
    wanted = [
        (t.topic, p.partition, p.fetch_offset, p.partition_max_bytes)
        for t in body.topics
        for p in t.partitions
    ]
    deadline = trio.current_time() + max_wait_ms / 1000
    while True:
        results, size, failed = await _read_all(session, wanted, max_bytes, isolation)
        remaining_ms = int((deadline - trio.current_time()) * 1000)
        if size >= min_bytes or failed or remaining_ms <= 0 or not wanted:
            break
        # Wait until any partition grows past the high watermark just seen, then read again.
        grown = [(w[0], w[1], r.high_watermark) for w, r in zip(wanted, results, strict=True)]
        if not await _wait_any(session, grown, remaining_ms):
            break  # the wait failed (the backend went away): answer what there is now
    topics: dict[str, list[FetchPartition]] = {}
    for (name, _, _, _), part in zip(wanted, results, strict=True):
        topics.setdefault(name, []).append(part)
    # Every requested partition is listed (kafka.md §1.4 trap 5); session_id 0 declines
    # KIP-227 fetch sessions, so every fetch is a full one.
    return fetch_response_pieces(
        req.correlation_id, req.api_version, list(topics.items()), session_id=0
    )


async def _read_all(
    session: Session,
    wanted: list[tuple[str, int, int, int]],
    max_bytes: int,
    isolation: Isolation,
) -> tuple[list[FetchPartition], int, bool]:
    assert session.ctx is not None
    stream = session.settings.stream
    out: list[FetchPartition] = []
    total = 0
    failed = False
    lossy = session.conn.metrics.lossy(tr.PROTOCOL)
    for name, partition, offset, partition_max in wanted:
        budget = min(partition_max, max_bytes - total)
        try:
            result: ReadResult = await session.router.execute(
                Read(
                    topic=Topic(stream, name),
                    partition=partition,
                    offset=offset,
                    max_bytes=max(budget, 1),
                    # Over the response budget: no records, but the offsets are still reported.
                    max_messages=1_000_000 if budget > 0 or not total else 0,
                    whole_batches=True,
                    isolation=isolation,
                ),
                session.ctx,
            )
        except OffsetOutOfRange as exc:
            failed = True
            out.append(
                FetchPartition(
                    partition, ErrorCode.offset_out_of_range.value, exc.log_end, exc.log_end,
                    exc.log_start,
                )
            )  # fmt: skip
            continue
        except GatewayError as exc:
            failed = True
            out.append(FetchPartition(partition, tr.error_code(exc).value, -1, -1, -1))
            continue
        # Only the first partition with data may exceed the budget (KIP-74).
        pieces = tr.fetch_records(result.batches, max(budget, 1), lossy)
        size = sum(map(len, pieces))
        total += size
        hw = result.high_watermark
        lso = hw if result.last_stable_offset < 0 else result.last_stable_offset
        out.append(
            FetchPartition(
                partition, ErrorCode.none, hw, lso, result.log_start_offset, pieces, result.aborted
            )
        )
    return out, total, failed


async def _wait_any(session: Session, grown: list[tuple[str, int, int]], max_wait_ms: int) -> bool:
    """Long-poll: return as soon as any partition has a message at or past ``offset``, or at the
    deadline: one AwaitData over them all, measured as long-poll time. False: it failed."""
    assert session.ctx is not None
    stream = session.settings.stream
    targets = tuple((Topic(stream, name), partition, offset) for name, partition, offset in grown)
    try:
        await session.router.execute(
            AwaitData(targets=targets, max_wait_ms=max_wait_ms), session.ctx
        )
    except GatewayError:
        return False
    return True


# --- ListOffsets ---------------------------------------------------------------------------------


# The special timestamps of a ListOffsets request: -1 latest, -2 earliest, -3 the record with the
# largest timestamp (KIP-734, v7+; librdkafka sends it at any version it negotiated, and a broker
# answers it from the log whatever the version, as Kafka's UnifiedLog.fetchOffsetByTimestamp
# does). -4/-5 (tiered storage, v8/v9) are not served: those versions are not advertised.
_SPECS = {-1: OffsetSpec.LATEST, -2: OffsetSpec.EARLIEST, -3: OffsetSpec.MAX_TIMESTAMP}
_BY_TIME = frozenset({OffsetSpec.TIMESTAMP, OffsetSpec.MAX_TIMESTAMP})


async def list_offsets(session: Session, req: KafkaRequest) -> Any:
    assert session.ctx is not None
    stream = session.settings.stream
    isolation = _ISOLATION.get(getattr(req.body, "isolation_level", 0), Isolation.UNCOMMITTED)
    topics = []
    for t in req.body.topics:
        parts = []
        for p in t.partitions:
            ts = p.timestamp
            spec = _SPECS.get(ts, OffsetSpec.TIMESTAMP)
            try:
                result = await session.router.execute(
                    ListOffsets(
                        topic=Topic(stream, t.name),
                        partition=p.partition_index,
                        spec=spec,
                        timestamp_us=max(ts, 0) * 1000,
                        isolation=isolation,
                    ),
                    session.ctx,
                )
            except GatewayError as exc:
                parts.append(
                    {
                        "partition_index": p.partition_index,
                        "error_code": tr.error_code(exc),
                        "timestamp": -1,
                        "offset": -1,
                        "leader_epoch": -1,
                    }
                )
                continue  # fmt: skip
            # Only a lookup by time names the record's timestamp; the -1/-2 answers carry -1.
            found = spec in _BY_TIME and result.offset is not None
            parts.append(
                {
                    "partition_index": p.partition_index,
                    "error_code": ErrorCode.none,
                    "timestamp": result.timestamp_us // 1000 if found else -1,
                    "offset": -1 if result.offset is None else result.offset,
                    "leader_epoch": 0,  # v4+: the epoch Metadata names (one leader, for ever)
                }
            )
        topics.append({"name": t.name, "partitions": parts})
    return session.respond(req, {"throttle_time": 0, "topics": topics})


# --- InitProducerId ------------------------------------------------------------------------------


async def init_producer_id(session: Session, req: KafkaRequest) -> Any:
    b = req.body
    # v3+ (KIP-360) may name the producer's current id and epoch: both or neither, as Kafka's
    # KafkaApis.handleInitProducerIdRequest checks (INVALID_REQUEST otherwise).
    producer_id = getattr(b, "producer_id", -1)
    producer_epoch = getattr(b, "producer_epoch", -1)
    if (producer_id == -1) != (producer_epoch == -1):
        return _no_producer(session, req, ErrorCode.invalid_request)
    cmd: InitProducer | InitTransaction
    if b.transactional_id is None:
        cmd = InitProducer(producer_id=producer_id, producer_epoch=producer_epoch)
    elif session.router.supports(InitTransaction):
        cmd = InitTransaction(
            transactional_id=b.transactional_id,
            timeout_ms=tr.millis(b.transaction_timeout),
            producer_id=producer_id,
            producer_epoch=producer_epoch,
        )
    else:
        # No transactions on this backend (README): Kafka's refusal, fatal to the producer.
        session.conn.log.info("transactional producer refused", id=b.transactional_id)
        return _no_producer(session, req, ErrorCode.transactional_id_authorization_failed)
    assert session.ctx is not None
    try:
        result = await session.router.execute(cmd, session.ctx)
    except GatewayError as exc:
        return _no_producer(session, req, txn_error_code(exc, req.api_version))
    return session.respond(
        req,
        {"throttle_time": 0, "error_code": ErrorCode.none, "producer_id": result.producer_id,
         "producer_epoch": result.producer_epoch},
    )  # fmt: skip


def txn_error_code(exc: GatewayError, version: int, fenced_from: int = 4) -> ErrorCode:
    """A transaction API's error: a fenced producer is PRODUCER_FENCED from the version that
    has it (KIP-588: InitProducerId v4, EndTxn/AddPartitionsToTxn v2..), before it
    INVALID_PRODUCER_EPOCH; an unavailable backend makes the client find its coordinator again."""
    code = tr.error_code(exc, group=True)
    if code is ErrorCode.invalid_producer_epoch and version >= fenced_from:
        return ErrorCode.producer_fenced
    return code


def _no_producer(session: Session, req: KafkaRequest, code: ErrorCode) -> Any:
    return session.respond(
        req, {"throttle_time": 0, "error_code": code, "producer_id": -1, "producer_epoch": -1}
    )


__all__ = ["fetch", "init_producer_id", "list_offsets", "produce", "txn_error_code"]
