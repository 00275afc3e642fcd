"""Writes (``df.write.format("streamgate")`` and ``writeStream``): each task appends its rows in
batches per target partition, each acknowledged by the backend before the next and all before
the task reports success; retries and replays are tagged so that a backend that deduplicates
drops them (``dedup``).

Where a row goes: the ``topic`` option, else its ``topic`` column; its ``partition`` column
when set, else Kafka's partitioner of its key, else (no key) the task's Spark partition number
modulo the partitions, which keeps a retried task's rows where its first run put them.

A write appends as it goes: there is nothing to roll back, so ``abort`` leaves what failed
tasks appended (Spark's Kafka sink behaves the same), and only ``append`` mode exists.
"""

from __future__ import annotations

import contextlib
import functools
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Final

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from gateway.model import GatewayError, Message

from .columns import check_schema, rows_of
from .dedup import Attempt, Tagger, mode_of, stored_before
from .endpoint import CHUNK_BYTES, Endpoint
from .errors import OptionError, PipelineError
from .options import WriteOptions
from .partitioner import kafka_partition
from .planning import partition_count
from .portal import Session, session

BATCH_BYTES: Final = 512 << 10  # per Append: under Kafka's 1 MiB batch and RabbitMQ's frame limits
# Spark's local properties for a micro-batch's tasks (StreamExecution.QUERY_ID_KEY,
# MicroBatchExecution.BATCH_ID_KEY): the query id is the one its checkpoint keeps.
QUERY_ID: Final = "sql.streaming.queryId"
BATCH_ID: Final = "streaming.sql.batchId"


@dataclass
class Written(WriterCommitMessage):
    """What one task appended: messages acknowledged, and how many of them were found stored
    by an earlier run of the task (a retry or replay) where the backend can tell."""

    messages: int
    repeated: int


@dataclass(slots=True)
class _Pending:
    messages: list[Message] = field(default_factory=list)
    size: int = 0


class TaskWriter:
    """One task's appends: ``add`` Arrow batches, then ``finish`` (and ``close`` in any case).

    Rows are gathered per target partition and appended in batches of ``batchSize`` messages
    or ``BATCH_BYTES``; every ``CHUNK_BYTES`` of rows, and at the end, all that is gathered is
    appended, targets in order. Both depend on the rows only, so a retry sends the same batches.
    The endpoint is opened when first needed, and an embedded store this process opened is
    closed again before more rows are asked of Spark (endpoint.py).
    """

    def __init__(self, options: WriteOptions, attempt: Attempt) -> None:
        self.options = options
        self.attempt = attempt
        self.report = Written(0, 0)
        self._pending: dict[tuple[str, int], _Pending] = {}
        self._gathered = 0  # bytes since everything was last appended
        self._partitions: dict[str, int] = {}
        self._tagger: Tagger | None = None
        self._open: Session | None = None
        self._stack = contextlib.ExitStack()

    def add(self, batch: pa.RecordBatch) -> None:
        rows = rows_of(batch)
        for i, message in enumerate(rows.messages):
            topic = self.options.topic or (rows.topics[i] if rows.topics is not None else None)
            if not topic:
                raise PipelineError("a row has no topic (a null topic column, no topic option)")
            asked = rows.partitions[i] if rows.partitions is not None else None
            target = (topic, self._partition(topic, asked, message.key))
            pending = self._pending.setdefault(target, _Pending())
            pending.messages.append(message)
            size = _size(message)
            pending.size += size
            self._gathered += size
            if len(pending.messages) >= self.options.batch_size or pending.size >= BATCH_BYTES:
                self._flush(target)
            if self._gathered >= CHUNK_BYTES:
                self._flush_all()
        self._pause()

    def finish(self) -> Written:
        self._flush_all()
        self.close()
        return self.report

    def close(self) -> None:
        self._open = None
        self._stack.close()

    def _session(self) -> Session:
        if self._open is None:
            self._open = self._stack.enter_context(session(self.options.connection))
            if self._tagger is None:
                mode = mode_of(self._open.endpoint.backend)
                self._tagger = Tagger(self.attempt, mode)
        return self._open

    def _pause(self) -> None:
        if self._open is not None and self._open.endpoint.holds_store:
            self.close()

    def _partition(self, topic: str, asked: int | None, key: bytes | None) -> int:
        count = self._partitions.get(topic)
        if count is None:
            count = self._session().run(functools.partial(partition_count, name=topic))
            self._partitions[topic] = count
        if asked is not None:
            if not 0 <= asked < count:
                raise PipelineError(
                    f"a row's partition {asked}: topic {topic!r} has partitions 0..{count - 1}"
                )
            return asked
        if key is not None:
            return kafka_partition(key, count)
        return self.attempt.partition % count

    def _flush_all(self) -> None:
        for target in sorted(self._pending):
            self._flush(target)
        self._gathered = 0

    def _flush(self, target: tuple[str, int]) -> None:
        pending = self._pending.pop(target, None)
        if pending is None or not pending.messages:
            return
        s = self._session()
        assert self._tagger is not None
        topic, partition = target
        append = functools.partial(_append, self._tagger, topic, partition, pending.messages)
        repeated = s.run(append)
        self.report.messages += len(pending.messages)
        self.report.repeated += len(pending.messages) if repeated else 0


def _size(message: Message) -> int:
    headers = sum(len(h.name) + len(h.value) for h in message.headers)
    return len(message.value) + len(message.key or b"") + headers


async def _append(
    tagger: Tagger, name: str, partition: int, messages: list[Message], endpoint: Endpoint
) -> bool:
    """Append and wait for the acknowledgement; whether the batch was stored before."""
    command = tagger.append(endpoint.topic(name), partition, messages)
    try:
        result = await endpoint.backend.append(command)
    except GatewayError as exc:
        if stored_before(tagger.mode, exc):
            return True
        where = f"topic {name!r} partition {partition}"
        raise PipelineError(f"{endpoint.shown}: appending to {where}: {exc.message}") from None
    return result.duplicate


def write_task(
    options: WriteOptions, attempt: Attempt, batches: Iterator[pa.RecordBatch]
) -> Written:
    """Append every row of ``batches``: the body of a write task (public for the tests, which
    run a task and its retry without Spark's scheduler)."""
    writer = TaskWriter(options, attempt)
    try:
        for batch in batches:
            writer.add(batch)
        return writer.finish()
    finally:
        writer.close()


class BatchWriter(DataSourceArrowWriter):
    """``df.write``: created once on the driver, so its id is the same in every task and in
    every retry of one."""

    def __init__(self, options: WriteOptions, schema: StructType, overwrite: bool) -> None:
        if overwrite:
            raise OptionError("mode", "topics are append-only: use mode('append')")
        check_schema(schema, options.topic)
        self.options = options
        self.write_id = uuid.uuid4().hex

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Written:
        context = TaskContext.get()
        assert context is not None
        return write_task(self.options, Attempt(self.write_id, context.partitionId()), iterator)


class StreamWriter(DataSourceStreamArrowWriter):
    """``writeStream``: the query's id and the micro-batch's come from the task's local
    properties, so a batch replayed after a restart is tagged as its first run was."""

    def __init__(self, options: WriteOptions, schema: StructType) -> None:
        check_schema(schema, options.topic)
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Written:
        context = TaskContext.get()
        assert context is not None
        query, batch = context.getLocalProperty(QUERY_ID), context.getLocalProperty(BATCH_ID)
        if query is None or batch is None:
            raise PipelineError("a streaming write task without Spark's query and batch ids")
        attempt = Attempt(query, context.partitionId(), int(batch))
        return write_task(self.options, attempt, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Every task's appends were acknowledged before it reported: nothing left to do."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Appends cannot be taken back; a replay of the batch is deduplicated (``dedup``)."""


__all__ = [
    "BATCH_ID",
    "QUERY_ID",
    "BatchWriter",
    "StreamWriter",
    "TaskWriter",
    "Written",
    "write_task",
]
