"""Kafka's transaction coordinator for the embedded store (KIP-98).

Per transactional id: its producer id and epoch, its timeout and its one transaction: the
partitions it wrote to, the groups whose offsets it commits and those offsets, pending until
it ends. The state is kept durably in ``transactions.log`` in the store's directory (txn_log.py;
Kafka keeps it in the ``__transaction_state`` log), one record per change, fsynced before the
client is answered, so a restart finds every transaction where its client last saw it:
- a transaction whose commit or abort was decided but not finished (the markers not all
  written) is finished when the store opens, as Kafka's coordinator does on loading its log;
- an open transaction is aborted once its timeout has passed since it began, whether the
  gateway restarted or its producer went away, with the producer's epoch bumped so that a
  zombie instance is fenced (Kafka's ``transaction.timeout.ms``).

InitProducerId for a known id bumps the epoch (fencing every earlier instance) after aborting
the transaction it left open; AddPartitionsToTxn / AddOffsetsToTxn open the transaction;
EndTxn writes a commit or abort marker (a Kafka control batch) to each partition in it, durable
before the answer, then applies or drops its offsets. A transactional batch is appended only
while its producer's transaction is open and names the partition (KIP-890's verification), so
no batch can start a transaction the coordinator does not know about.

Producer ids of transactional producers are given out here, from 2^62 up (the gateway's
idempotent ids stay below 2^62: ``coordination/producer_ids.py``), the next one kept in the
same file, so an id is never given twice.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final

import structlog
import trio

from gateway.model import (
    AddToTransaction,
    AddToTransactionResult,
    CommitOffset,
    CommitOffsetResult,
    CommitTransactionOffsets,
    CommitTransactionOffsetsResult,
    EndTransaction,
    EndTransactionResult,
    GatewayError,
    InitProducerResult,
    InitTransaction,
    NotFound,
    ProducerFenced,
    Topic,
    TransactionError,
    TransactionTimeoutInvalid,
    UnknownProducer,
)
from gateway.translate.kafka.messages import control_batch

from .faults import storage_error
from .store import Store
from .txn_log import TxnLog

log = structlog.get_logger()

MAX_TIMEOUT_MS: Final = 900_000  # Kafka's transaction.max.timeout.ms default
ID_EXPIRATION_MS: Final = 7 * 24 * 3600 * 1000  # transactional.id.expiration.ms default
_FIRST_ID: Final = 1 << 62
_MAX_EPOCH: Final = 32767  # int16: an id whose epoch would pass it gets a new id
_CHECK_EVERY_S: Final = 1.0

PartitionKey = tuple[str, str, int]  # stream, topic, partition
OffsetKey = tuple[str, str, str, int]  # group, stream, topic, partition


class State(enum.Enum):
    EMPTY = "empty"
    ONGOING = "ongoing"
    PREPARE_COMMIT = "prepare_commit"
    PREPARE_ABORT = "prepare_abort"
    COMPLETE_COMMIT = "complete_commit"
    COMPLETE_ABORT = "complete_abort"


@dataclass(slots=True)
class Txn:
    producer_id: int
    epoch: int
    timeout_ms: int
    state: State = State.EMPTY
    started_ms: int = 0
    updated_ms: int = 0
    partitions: set[PartitionKey] = field(default_factory=set)
    groups: set[str] = field(default_factory=set)
    offsets: dict[OffsetKey, tuple[int, str, int]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "producer_id": self.producer_id,
            "epoch": self.epoch,
            "timeout_ms": self.timeout_ms,
            "state": self.state.value,
            "started_ms": self.started_ms,
            "updated_ms": self.updated_ms,
            "partitions": sorted(self.partitions),
            "groups": sorted(self.groups),
            "offsets": [[*k, *v] for k, v in self.offsets.items()],
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Txn:
        return cls(
            producer_id=int(d["producer_id"]),
            epoch=int(d["epoch"]),
            timeout_ms=int(d["timeout_ms"]),
            state=State(d["state"]),
            started_ms=int(d.get("started_ms", 0)),
            updated_ms=int(d.get("updated_ms", 0)),
            partitions={(s, t, int(p)) for s, t, p in d.get("partitions", ())},
            groups=set(d.get("groups", ())),
            offsets={
                (g, s, t, int(p)): (int(o), str(m), int(e))
                for g, s, t, p, o, m, e in d.get("offsets", ())
            },
        )


class TransactionCoordinator:
    def __init__(
        self, store: Store, commit_offset: Callable[[CommitOffset], Awaitable[CommitOffsetResult]]
    ) -> None:
        self._store = store
        self._commit_offset = commit_offset
        self._txns: dict[str, Txn] = {}
        self._by_producer: dict[int, Txn] = {}
        self._next_id = _FIRST_ID
        self._lock = trio.Lock()
        self._log = TxnLog(store.root)

    def _now_ms(self) -> int:
        return self._store.now_us() // 1000

    # --- lifecycle ---------------------------------------------------------------------------

    async def open(self) -> None:
        """Load the state and finish the transactions whose end was decided before a stop."""
        states, next_id = await trio.to_thread.run_sync(self._log.load)
        self._next_id = max(_FIRST_ID, next_id)
        for tid, d in states.items():
            txn = Txn.from_json(d)
            self._txns[tid] = txn
            self._by_producer[txn.producer_id] = txn
        async with self._lock:
            for tid, txn in list(self._txns.items()):
                if txn.state in (State.PREPARE_COMMIT, State.PREPARE_ABORT):
                    log.info("transaction.resumed", transactional_id=tid, state=txn.state.value)
                    await self._finish(tid, txn, txn.state is State.PREPARE_COMMIT)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Open (``open``), then abort transactions past their timeout and forget ids idle past
        their expiration."""
        await self.open()
        task_status.started()
        while True:
            await trio.sleep(_CHECK_EVERY_S)
            try:
                await self.expire()
            except GatewayError as exc:  # a storage error: the next pass tries again
                log.warning("transaction.expiry_failed", error=exc.message)

    async def expire(self) -> int:
        """One pass of ``run``: how many transactions it aborted."""
        now = self._now_ms()
        aborted = 0
        async with self._lock:
            for tid, txn in list(self._txns.items()):
                if txn.state in (State.PREPARE_COMMIT, State.PREPARE_ABORT):
                    await self._finish(tid, txn, txn.state is State.PREPARE_COMMIT)
                elif txn.state is State.ONGOING and now - txn.started_ms > txn.timeout_ms:
                    log.info("transaction.timed_out", transactional_id=tid,
                             producer_id=txn.producer_id, timeout_ms=txn.timeout_ms)  # fmt: skip
                    self._bump(txn)
                    await self._end(tid, txn, commit=False)
                    aborted += 1
                elif txn.state is not State.ONGOING and now - txn.updated_ms > ID_EXPIRATION_MS:
                    del self._txns[tid]
                    self._by_producer.pop(txn.producer_id, None)
                    await self._save(tid)
        return aborted

    async def _save(self, tid: str, *, sync: bool = True) -> None:
        """The id's state (gone: forgotten) made durable (txn_log.py); not ``sync``: written
        now, durable with the next record that is (a transaction's completion: lost in a
        crash, the restart finds it decided and finishes it again: no second marker, the same
        offsets). A failed write is a ``StorageError`` (disk full, I/O error)."""
        txn = self._txns.get(tid)
        state = None if txn is None else txn.to_json()

        def live() -> dict[str, dict[str, Any]]:  # for a compaction, in the worker thread
            return {t: x.to_json() for t, x in list(self._txns.items())}

        try:
            if sync:
                await trio.to_thread.run_sync(self._log.write, tid, state, self._next_id, live)
            else:  # one small write, no fsync: no trip to a worker thread
                self._log.write(tid, state, self._next_id, live, sync=False)
                await trio.lowlevel.checkpoint()
        except OSError as exc:
            raise storage_error(exc, f"writing {self._log.path}") from exc

    # --- commands ----------------------------------------------------------------------------

    async def init(self, cmd: InitTransaction) -> InitProducerResult:
        if not 0 < cmd.timeout_ms <= MAX_TIMEOUT_MS:
            raise TransactionTimeoutInvalid(
                f"transaction timeout {cmd.timeout_ms} ms is outside 1..{MAX_TIMEOUT_MS}"
            )
        async with self._lock:
            tid = cmd.transactional_id
            txn = self._txns.get(tid)
            if txn is None:
                txn = Txn(self._new_id(), 0, cmd.timeout_ms, updated_ms=self._now_ms())
                self._txns[tid] = txn
                self._by_producer[txn.producer_id] = txn
            else:
                if cmd.producer_id != -1 and (
                    cmd.producer_id != txn.producer_id or cmd.producer_epoch != txn.epoch
                ):
                    raise ProducerFenced(
                        f"transactional id {tid!r} has producer {txn.producer_id} epoch "
                        f"{txn.epoch}, not {cmd.producer_id} epoch {cmd.producer_epoch}"
                    )
                if txn.state is State.ONGOING:
                    # The previous instance's transaction: aborted under a newer epoch first.
                    self._bump(txn)
                    await self._end(tid, txn, commit=False)
                self._bump(txn)
                txn.timeout_ms = cmd.timeout_ms
                txn.state = State.EMPTY
                txn.updated_ms = self._now_ms()
            await self._save(tid)
            return InitProducerResult(producer_id=txn.producer_id, producer_epoch=txn.epoch)

    async def add(self, cmd: AddToTransaction) -> AddToTransactionResult:
        for topic, number in cmd.partitions:
            self._store.partition(topic, number)  # raises for an unknown topic or partition
        async with self._lock:
            txn = self._checked(cmd.transactional_id, cmd.producer_id, cmd.producer_epoch)
            keys = {(t.stream, t.name, p) for t, p in cmd.partitions}
            if (
                txn.state is State.ONGOING
                and keys <= txn.partitions
                and set(cmd.groups) <= txn.groups
            ):
                return AddToTransactionResult()  # nothing new: no write
            if txn.state is not State.ONGOING:
                txn.state = State.ONGOING
                txn.started_ms = self._now_ms()
            txn.partitions |= keys
            txn.groups |= set(cmd.groups)
            txn.updated_ms = self._now_ms()
            await self._save(cmd.transactional_id)
        return AddToTransactionResult()

    async def commit_offsets(self, cmd: CommitTransactionOffsets) -> CommitTransactionOffsetsResult:
        for topic, number, offset, _, _ in cmd.offsets:
            self._store.partition(topic, number)
            if offset < 0:
                raise TransactionError(f"a committed offset must be >= 0, not {offset}")
        async with self._lock:
            txn = self._checked(cmd.transactional_id, cmd.producer_id, cmd.producer_epoch)
            if txn.state is not State.ONGOING or cmd.group not in txn.groups:
                raise TransactionError(
                    f"group {cmd.group!r} is not in an open transaction of "
                    f"{cmd.transactional_id!r} (AddOffsetsToTxn first)"
                )
            for topic, number, offset, metadata, epoch in cmd.offsets:
                key = (cmd.group, topic.stream, topic.name, number)
                txn.offsets[key] = (offset, metadata, epoch)
            txn.updated_ms = self._now_ms()
            await self._save(cmd.transactional_id)
        return CommitTransactionOffsetsResult()

    async def end(self, cmd: EndTransaction) -> EndTransactionResult:
        async with self._lock:
            tid = cmd.transactional_id
            txn = self._checked(tid, cmd.producer_id, cmd.producer_epoch)
            if txn.state is State.ONGOING:
                await self._end(tid, txn, commit=cmd.commit)
                return EndTransactionResult()
            if txn.state is (State.PREPARE_COMMIT if cmd.commit else State.PREPARE_ABORT):
                # decided, but a marker write failed (a storage error): finish it now
                await self._finish(tid, txn, cmd.commit)
                return EndTransactionResult()
            done = State.COMPLETE_COMMIT if cmd.commit else State.COMPLETE_ABORT
            if txn.state is done:
                return EndTransactionResult()  # a retry of the end that already happened
            verb = "commit" if cmd.commit else "abort"
            raise TransactionError(
                f"cannot {verb} transactional id {tid!r}: its transaction is {txn.state.value}"
            )

    def check_append(self, producer_id: int, epoch: int, topic: Topic, partition: int) -> None:
        """A transactional batch may be stored only inside its producer's open transaction,
        for a partition the transaction named."""
        txn = self._by_producer.get(producer_id)
        if txn is None:
            raise TransactionError(f"producer {producer_id} has no transactional id here")
        if epoch != txn.epoch:
            raise ProducerFenced(f"producer {producer_id} epoch {epoch} is not {txn.epoch}")
        if (
            txn.state is not State.ONGOING
            or (topic.stream, topic.name, partition) not in txn.partitions
        ):
            raise TransactionError(
                f"partition {topic}[{partition}] is not in an open transaction of producer "
                f"{producer_id} (AddPartitionsToTxn first)"
            )

    # --- inside ------------------------------------------------------------------------------

    def _checked(self, tid: str, producer_id: int, epoch: int) -> Txn:
        txn = self._txns.get(tid)
        if txn is None or txn.producer_id != producer_id:
            raise UnknownProducer(f"transactional id {tid!r} has no producer {producer_id}")
        if epoch != txn.epoch:
            raise ProducerFenced(
                f"transactional id {tid!r}: epoch {epoch} is fenced by epoch {txn.epoch}"
            )
        return txn

    def _new_id(self) -> int:
        pid = self._next_id
        self._next_id += 1
        return pid

    def _bump(self, txn: Txn) -> None:
        if txn.epoch + 1 >= _MAX_EPOCH:
            self._by_producer.pop(txn.producer_id, None)
            txn.producer_id, txn.epoch = self._new_id(), 0
            self._by_producer[txn.producer_id] = txn
        else:
            txn.epoch += 1

    async def _end(self, tid: str, txn: Txn, *, commit: bool) -> None:
        # The decision is durable before the first marker: a restart finishes it (``open``).
        txn.state = State.PREPARE_COMMIT if commit else State.PREPARE_ABORT
        txn.updated_ms = self._now_ms()
        await self._save(tid)
        await self._finish(tid, txn, commit)

    async def _finish(self, tid: str, txn: Txn, commit: bool) -> None:
        now_us = self._store.now_us()
        marker = control_batch(
            producer_id=txn.producer_id, producer_epoch=txn.epoch, commit=commit,
            coordinator_epoch=0, now_us=now_us,
        )  # fmt: skip
        for stream, name, number in sorted(txn.partitions):
            try:
                part = self._store.partition(Topic(stream, name), number)
            except NotFound:
                continue  # deleted since: nothing of it left to mark
            await part.append_marker(marker, txn.producer_id, txn.epoch, commit, now_us)
        if commit:
            for (group, stream, name, number), (offset, metadata, epoch) in txn.offsets.items():
                try:
                    await self._commit_offset(
                        CommitOffset(group=group, topic=Topic(stream, name), partition=number,
                                     offset=offset, metadata=metadata, leader_epoch=epoch)
                    )  # fmt: skip
                except GatewayError as exc:
                    log.warning(
                        "transaction.offset_not_committed", transactional_id=tid, group=group,
                        topic=name, partition=number, error=exc.message,
                    )  # fmt: skip
        txn.state = State.COMPLETE_COMMIT if commit else State.COMPLETE_ABORT
        txn.partitions.clear()
        txn.groups.clear()
        txn.offsets.clear()
        txn.updated_ms = self._now_ms()
        await self._save(tid, sync=False)


__all__ = ["MAX_TIMEOUT_MS", "TransactionCoordinator"]
