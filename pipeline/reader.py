"""Batch reads (``spark.read.format("streamgate")``): one Spark input partition per topic
partition, or per piece of it with ``minPartitions``; each read on an executor through the
backend adapters and handed to Spark as Arrow record batches. ``read_span`` serves the
streaming reader too."""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator
from typing import Final

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from gateway.client.consume import GIVE_UP_S, RETRY_WAIT_MS
from gateway.model import GatewayError, Message, OffsetOutOfRange, Read

from .endpoint import CHUNK_BYTES, Endpoint
from .errors import PipelineError
from .offsets import Span, spans, split
from .options import Connection, ReadOptions
from .planning import check_order, log_bounds, resolve, starting_offsets
from .portal import Session, call, session
from .rows import AppendTimes, ArrowRows, log_append_times

READ_BYTES: Final = 4 << 20  # per Read command: a few thousand small messages per batch


class OffsetRange(InputPartition):
    """What one Spark task reads: a ``Span`` of one partition."""

    def __init__(self, span: Span) -> None:
        super().__init__(span)
        self.span = span


def read_span(conn: Connection, span: Span, rows: ArrowRows) -> Iterator[pa.RecordBatch]:
    """Every message of ``span``, one record batch per ``Read``. From an embedded store this
    process opened, ``CHUNK_BYTES`` at a time, the store closed before they go to Spark (see
    endpoint.py); from anything else, each batch as it comes, on one connection."""
    cursor = _Cursor(span, rows)
    while not cursor.done:
        with session(conn) as s:
            if not s.endpoint.holds_store:
                while (batch := cursor.next(s)) is not None:
                    yield batch
                return
            chunk = cursor.chunk(s)
        yield from chunk


class _Cursor:
    """Where a span's read is. Offsets without a message (a Kafka transaction marker, a
    compacted record) are skipped: when reads below the end stay empty for ``GIVE_UP_S``, the
    rest of the span is taken as such, as ``streamgate consume`` does.

    A read asks for what the planned range holds, so it does not long-poll (``max_wait_ms``
    0) until one comes back empty. A long poll also bounds the whole read: the Kafka backend
    drops a Fetch that outlasts ``max_wait_ms``, and a 4 MiB Fetch through a streamgate Kafka
    listener (its stored batches converted on the way) took longer than ``RETRY_WAIT_MS`` every
    time (1,000-message batches of 100 B): such a read got nothing, and gave up."""

    def __init__(self, span: Span, rows: ArrowRows) -> None:
        self.span = span
        self.rows = rows
        self.offset = span.start
        self.done = span.start >= span.end
        self._quiet_since: float | None = None

    def next(self, s: Session) -> pa.RecordBatch | None:
        while not self.done:
            wait_ms = 0 if self._quiet_since is None else RETRY_WAIT_MS
            messages, appended = s.run(functools.partial(_next, self.span, self.offset, wait_ms))
            if messages:
                self._quiet_since = None
                self.offset = messages[-1].offset + 1
                self.done = self.offset >= self.span.end
                return self.rows.batch(self.span.topic, self.span.partition, messages, appended)
            now = time.monotonic()
            self._quiet_since = now if self._quiet_since is None else self._quiet_since
            self.done = now - self._quiet_since >= GIVE_UP_S
        return None

    def chunk(self, s: Session) -> list[pa.RecordBatch]:
        out: list[pa.RecordBatch] = []
        size = 0
        while size < CHUNK_BYTES and (batch := self.next(s)) is not None:
            out.append(batch)
            size += batch.nbytes
        return out


async def _next(
    span: Span, offset: int, wait_ms: int, endpoint: Endpoint
) -> tuple[list[Message], AppendTimes]:
    """The messages at ``offset`` and after it, below the span's end; and which of them have a
    LogAppendTime timestamp (rows.py)."""
    command = Read(
        topic=endpoint.topic(span.topic),
        partition=span.partition,
        offset=offset,
        max_messages=span.end - offset,
        max_bytes=READ_BYTES,
        max_wait_ms=wait_ms,
        # Stored batches as they are, the first one possibly from before ``offset`` (trimmed
        # below): a backend that trims one decodes it, and a Kafka batch's timestamp type goes.
        whole_batches=True,
    )
    try:
        result = await endpoint.backend.read(command)
    except OffsetOutOfRange as exc:
        raise PipelineError(
            f"topic {span.topic!r} partition {span.partition}: offset {offset} is out of range "
            f"now (the partition holds {exc.log_start} to {exc.log_end - 1}): retention removed "
            "messages after the read was planned"
        ) from None
    except GatewayError as exc:
        raise PipelineError(f"{endpoint.shown}: topic {span.topic!r}: {exc.message}") from None
    out: list[Message] = []
    appended: list[tuple[int, int]] = []
    for batch in result.batches:
        appended += log_append_times(batch)
        messages = batch.messages
        if messages and messages[0].offset >= offset and messages[-1].offset < span.end:
            out.extend(messages)  # the usual case: the whole batch is wanted
        else:
            out.extend(m for m in messages if offset <= m.offset < span.end)
    return out, appended


class BatchReader(DataSourceReader):
    def __init__(self, options: ReadOptions, schema: StructType) -> None:
        self.options = options
        self.rows = ArrowRows(schema)

    def partitions(self) -> list[InputPartition]:
        """Planned on the driver: the options' offsets resolved against the backend now."""
        planned = call(self.options.connection, functools.partial(_plan, self.options))
        return [OffsetRange(s) for s in split(planned, self.options.min_partitions)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        # Spark hands a plain InputPartition(None) in when ``partitions`` found nothing to read.
        if isinstance(partition, OffsetRange):
            yield from read_span(self.options.connection, partition.span, self.rows)


async def _plan(options: ReadOptions, endpoint: Endpoint) -> list[Span]:
    earliest, latest = await log_bounds(endpoint, options.topics)
    start = await starting_offsets(endpoint, options, earliest, latest)
    end = resolve("endingOffsets", options.ending, earliest, latest)
    check_order(start, end)
    return spans(start, end)


__all__ = ["BatchReader", "OffsetRange", "read_span"]
