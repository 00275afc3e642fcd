"""The rows a read yields: the schema of Spark's Kafka connector plus the canonical ``id``, built
column by column into Arrow record batches (Spark takes those without converting row by row).

``id`` (u128, DESIGN.md §2; 0 = none) is a decimal string, null for none. ``decimal(38,0)``
cannot hold it: 38 digits stop at 10^38 - 1, below 2^128 (3.4e38), and a UUID message id taken as
an integer (RabbitMQ, Iggy) is above that seven times in ten. A string keeps every value exactly,
in Parquet and JSON as well; ``cast("decimal(38,0)")`` works where the values are small.

``timestampType`` is Spark's Kafka connector's: 1 (LogAppendTime) for a message of a Kafka
record batch a broker stamped with its append time, else 0 (CreateTime). The canonical message
keeps one timestamp and does not say which it is; a Kafka record batch does, in its attributes,
and reads ask for whole stored batches (``Read.whole_batches``) so that a backend hands those on
as they are (a Kafka broker's, or a Kafka producer's batch in an embedded store) rather than
decoded. The other formats have no such notion: their timestamp is the client's when it gave
one, else the backend's at append, and is reported as CreateTime.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from gateway.model import Message, MessageBatch
from gateway.translate.kafka.messages import WIRE_FORMAT as KAFKA
from protocols.kafka import TimestampType, iter_batches

from .errors import PipelineError

_BASE: Final = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)
_HEADERS: Final = "headers array<struct<key:string,value:binary>>"
_ID: Final = "id string"
CREATE_TIME: Final = int(TimestampType.CREATE_TIME)
LOG_APPEND_TIME: Final = int(TimestampType.LOG_APPEND_TIME)
# Offset ranges (first, last, both included) whose timestamps are a broker's LogAppendTime.
AppendTimes = Sequence[tuple[int, int]]


def read_schema(include_headers: bool) -> str:
    """Spark's Kafka columns in its order (``headers`` only with ``includeHeaders``), then id;
    as DDL, which Spark parses (a Python worker has no session to parse it with)."""
    return ", ".join([_BASE, _HEADERS, _ID] if include_headers else [_BASE, _ID])


NAMES: Final = (
    "key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers", "id",
)  # fmt: skip


def log_append_times(batch: MessageBatch) -> list[tuple[int, int]]:
    """The offsets of ``batch`` that a Kafka broker stamped with LogAppendTime: the record
    batches of a ``kafka`` wire form whose timestamp-type attribute says so. A batch the backend
    decoded (or of another format) has none."""
    wire = batch.wire
    if wire is None or wire.format != KAFKA:
        return []
    out: list[tuple[int, int]] = []
    first_base: int | None = None
    for header, _ in iter_batches(wire.data):
        # Offsets as the format's decoder gives them: the wire form's base offset stands for
        # its first record batch's (an embedded store keeps a producer's batch as it came).
        first_base = header.base_offset if first_base is None else first_base
        if header.timestamp_type is TimestampType.LOG_APPEND_TIME and not header.is_control:
            start = wire.base_offset + header.base_offset - first_base
            out.append((start, start + header.last_offset_delta))
    return out


def _timestamp_types(msgs: Sequence[Message], appended: AppendTimes) -> list[object]:
    """Each message's type, in one walk: messages and ranges both go up in offset order."""
    out: list[object] = []
    ranges = iter(sorted(appended))
    current = next(ranges, None)
    for m in msgs:
        while current is not None and current[1] < m.offset:
            current = next(ranges, None)
        stamped = current is not None and current[0] <= m.offset
        out.append(LOG_APPEND_TIME if stamped else CREATE_TIME)
    return out


def _column(
    name: str,
    topic: str,
    partition: int,
    msgs: Sequence[Message],
    appended: AppendTimes,
    t: pa.DataType,
) -> pa.Array:
    values: list[object]
    match name:
        case "topic":
            return pa.repeat(pa.scalar(topic, t), len(msgs))
        case "partition":
            return pa.repeat(pa.scalar(partition, t), len(msgs))
        case "timestampType":
            if not appended:  # the usual case
                return pa.repeat(pa.scalar(CREATE_TIME, t), len(msgs))
            values = _timestamp_types(msgs, appended)
        case "key":
            values = [m.key for m in msgs]
        case "value":
            values = [m.value for m in msgs]
        case "offset":
            values = [m.offset for m in msgs]
        case "timestamp":
            values = [m.timestamp_us for m in msgs]  # Spark's timestamps are microseconds too
        case "headers":
            values = [[(h.name, h.value) for h in m.headers] for m in msgs]
        case "id":
            values = [str(m.id) if m.id else None for m in msgs]
        case _:
            raise AssertionError(name)
    return pa.array(values, t)


class ArrowRows:
    """Record batches of ``schema`` (the source's own, or a subset of its columns a user
    gave with ``.schema(...)``). Arrow types are Spark's own mapping of it, which is what Spark
    checks a batch against."""

    def __init__(self, schema: StructType) -> None:
        unknown = [f.name for f in schema.fields if f.name not in NAMES]
        if unknown:
            raise PipelineError(f"the streamgate source has no column {unknown}; it has {NAMES}")
        self.arrow = to_arrow_schema(schema, timezone="UTC")

    def batch(
        self,
        topic: str,
        partition: int,
        messages: Sequence[Message],
        appended: AppendTimes = (),
    ) -> pa.RecordBatch:
        """``appended``: the offsets whose timestamps are LogAppendTime (``log_append_times``)."""
        arrays = [_column(f.name, topic, partition, messages, appended, f.type) for f in self.arrow]
        return pa.RecordBatch.from_arrays(arrays, schema=self.arrow)


__all__ = [
    "CREATE_TIME",
    "LOG_APPEND_TIME",
    "AppendTimes",
    "ArrowRows",
    "log_append_times",
    "read_schema",
]
