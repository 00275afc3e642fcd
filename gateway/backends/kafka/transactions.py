"""Producer ids and Kafka transactions (KIP-98) on the Kafka backend: the broker's transaction
coordinator runs them, as its group coordinator runs groups (``groups``).

Each command goes to the coordinator its client would ask: InitProducerId (with the
transactional id, its timeout, and the KIP-360 producer id and epoch when given),
AddPartitionsToTxn, AddOffsetsToTxn and EndTxn to the transactional id's coordinator
(FindCoordinator key type 1, cached per id), TxnOffsetCommit to the group's coordinator. The
broker writes the markers and keeps the last stable offset; the data path passes the
transactional id in Produce and the isolation level in Fetch and ListOffsets (``data``).

A coordinator that is busy finishing the id's previous transaction (CONCURRENT_TRANSACTIONS),
loading (COORDINATOR_LOAD_IN_PROGRESS) or has moved (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE)
is asked again, briefly and with backoff, as a Kafka client does (a moved coordinator is looked
up again); after ``RETRY_FOR_S`` it is ``BackendUnavailable``, which the Kafka listener answers
COORDINATOR_NOT_AVAILABLE so that the client retries itself. Every other error is the broker's,
through ``translate.kafka.errors``.

TxnOffsetCommit v3 can carry the member's generation and id (KIP-447); the canonical command
does not have them, so the commit goes as a standalone one (generation -1), which Kafka accepts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import trio
from kio.schema.errors import ErrorCode

from gateway.backends.kafka.cluster import (
    ADD_OFFSETS_TO_TXN,
    ADD_PARTITIONS_TO_TXN,
    END_TXN,
    GROUP_KEY,
    INIT_PRODUCER_ID,
    TXN_KEY,
    TXN_OFFSET_COMMIT,
    Api,
    Cluster,
)
from gateway.model import (
    DEFAULT_STREAM,
    AddToTransaction,
    AddToTransactionResult,
    BackendUnavailable,
    CommitTransactionOffsets,
    CommitTransactionOffsetsResult,
    EndTransaction,
    EndTransactionResult,
    InitProducer,
    InitProducerResult,
    InitTransaction,
    Topic,
    Unsupported,
)
from gateway.translate.kafka.errors import gateway_error

RETRY_FOR_S: Final = 5.0
_FIRST_BACKOFF_S: Final = 0.02
_MAX_BACKOFF_S: Final = 0.5
_MOVED: Final = frozenset(
    (ErrorCode.not_coordinator, ErrorCode.coordinator_not_available)
)  # fmt: skip
_RETRIABLE: Final = _MOVED | {
    ErrorCode.concurrent_transactions, ErrorCode.coordinator_load_in_progress
}  # fmt: skip

# The answer -> its error code (the first failed partition's, for per-partition answers).
CodeOf = Callable[[Any], ErrorCode]


def _name(topic: Topic) -> str:
    if topic.stream != DEFAULT_STREAM:
        raise Unsupported(
            f"stream {topic.stream!r}: the Kafka backend has one namespace, the stream "
            f"{DEFAULT_STREAM!r}"
        )
    return topic.name


def _top_code(answer: Any) -> ErrorCode:
    code: ErrorCode = answer.error_code
    return code


def _partitions_code(answer: Any) -> ErrorCode:
    """AddPartitionsToTxn: the cause (OPERATION_NOT_ATTEMPTED is only its echo elsewhere)."""
    codes: list[ErrorCode] = [
        p.partition_error_code
        for t in answer.results_by_topic_v3_and_below
        for p in t.results_by_partition
        if p.partition_error_code is not ErrorCode.none
    ]
    causes = [c for c in codes if c is not ErrorCode.operation_not_attempted]
    return (causes or codes or [ErrorCode.none])[0]


def _offsets_code(answer: Any) -> ErrorCode:
    for t in answer.topics:
        for p in t.partitions:
            if p.error_code is not ErrorCode.none:
                code: ErrorCode = p.error_code
                return code
    return ErrorCode.none


class BrokerTransactions:
    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    async def _request(
        self, key: str, key_type: int, api: Api, values: dict[str, Any], code_of: CodeOf
    ) -> Any:
        """``api`` to the coordinator of ``key``, asked again while its answer is retriable."""
        what = f"{api.name} ({'transactional id' if key_type == TXN_KEY else 'group'} {key!r})"
        backoff = _FIRST_BACKOFF_S
        give_up = trio.current_time() + RETRY_FOR_S
        while True:
            try:
                conn = await self.cluster.coordinator(key, key_type)
                answer = await self.cluster.request(api, values, conn=conn)
                code = code_of(answer)
            except BackendUnavailable:  # the coordinator's connection dropped: find it again
                self.cluster.forget_coordinator(key, key_type)
                if trio.current_time() + backoff > give_up:
                    raise
                code = ErrorCode.coordinator_not_available
            if code is ErrorCode.none:
                return answer
            if code in _MOVED:
                self.cluster.forget_coordinator(key, key_type)
            if code not in _RETRIABLE or trio.current_time() + backoff > give_up:
                raise gateway_error(code, what)
            await trio.sleep(backoff)
            backoff = min(backoff * 2, _MAX_BACKOFF_S)

    async def init_idempotent(self, cmd: InitProducer) -> InitProducerResult:
        # Without a transactional id any broker grants one (a Kafka client asks the least loaded).
        # A KIP-360 id and epoch go as they came, on v3+ where the broker serves it (v2 drops
        # them); Kafka answers a new id at epoch 0 to a producer without a transactional id.
        answer = await self.cluster.request(
            INIT_PRODUCER_ID,
            {"transactional_id": None, "transaction_timeout": 60_000,
             "producer_id": cmd.producer_id, "producer_epoch": cmd.producer_epoch},
        )  # fmt: skip
        if answer.error_code is not ErrorCode.none:
            raise gateway_error(answer.error_code, "InitProducerId")
        return InitProducerResult(
            producer_id=answer.producer_id, producer_epoch=answer.producer_epoch
        )

    async def init(self, cmd: InitTransaction) -> InitProducerResult:
        answer = await self._request(
            cmd.transactional_id, TXN_KEY, INIT_PRODUCER_ID,
            {"transactional_id": cmd.transactional_id, "transaction_timeout": cmd.timeout_ms,
             "producer_id": cmd.producer_id, "producer_epoch": cmd.producer_epoch},
            _top_code,
        )  # fmt: skip
        return InitProducerResult(
            producer_id=answer.producer_id, producer_epoch=answer.producer_epoch
        )

    async def add(self, cmd: AddToTransaction) -> AddToTransactionResult:
        tid = cmd.transactional_id
        ids = {"producer_id": cmd.producer_id, "producer_epoch": cmd.producer_epoch}
        if cmd.partitions:
            topics: dict[str, list[int]] = {}
            for topic, partition in cmd.partitions:
                name = _name(topic)
                await self.cluster.partition(name, partition)  # UnknownTopic, UnknownPartition
                topics.setdefault(name, []).append(partition)
            await self._request(
                tid, TXN_KEY, ADD_PARTITIONS_TO_TXN,
                {"v3_and_below_transactional_id": tid,
                 "v3_and_below_producer_id": cmd.producer_id,
                 "v3_and_below_producer_epoch": cmd.producer_epoch,
                 "v3_and_below_topics": [{"name": n, "partitions": ps}
                                         for n, ps in topics.items()]},
                _partitions_code,
            )  # fmt: skip
        for group in cmd.groups:
            await self._request(
                tid, TXN_KEY, ADD_OFFSETS_TO_TXN,
                {"transactional_id": tid, **ids, "group_id": group}, _top_code,
            )  # fmt: skip
        return AddToTransactionResult()

    async def commit_offsets(self, cmd: CommitTransactionOffsets) -> CommitTransactionOffsetsResult:
        if cmd.stream != DEFAULT_STREAM:
            _name(Topic(cmd.stream, "-"))  # Unsupported
        topics: dict[str, list[dict[str, Any]]] = {}
        for topic, partition, offset, metadata, epoch in cmd.offsets:
            topics.setdefault(_name(topic), []).append(
                {"partition_index": partition, "committed_offset": offset,
                 "committed_leader_epoch": epoch, "committed_metadata": metadata}
            )  # fmt: skip
        await self._request(
            cmd.group, GROUP_KEY, TXN_OFFSET_COMMIT,
            {"transactional_id": cmd.transactional_id, "group_id": cmd.group,
             "producer_id": cmd.producer_id, "producer_epoch": cmd.producer_epoch,
             "generation_id": -1, "member_id": "", "group_instance_id": None,
             "topics": [{"name": n, "partitions": ps} for n, ps in topics.items()]},
            _offsets_code,
        )  # fmt: skip
        return CommitTransactionOffsetsResult()

    async def end(self, cmd: EndTransaction) -> EndTransactionResult:
        await self._request(
            cmd.transactional_id, TXN_KEY, END_TXN,
            {"transactional_id": cmd.transactional_id, "producer_id": cmd.producer_id,
             "producer_epoch": cmd.producer_epoch, "committed": cmd.commit},
            _top_code,
        )  # fmt: skip
        return EndTransactionResult()


__all__ = ["RETRY_FOR_S", "BrokerTransactions"]
