"""The rows a read yields: the schema of Spark's Kafka connector plus the canonical ``id``, built
column by column into Arrow record batches (Spark takes those without converting row by row).

``id`` (u128, DESIGN.md §2; 0 = none) is a decimal string, null for none. ``decimal(38,0)``
cannot hold it: 38 digits stop at 10^38 - 1, below 2^128 (3.4e38), and a UUID message id taken as
an integer (RabbitMQ, Iggy) is above that seven times in ten. A string keeps every value exactly,
in Parquet and JSON as well; ``cast("decimal(38,0)")`` works where the values are small.

``timestampType`` is always 0 (CreateTime): the canonical message keeps one timestamp, the
client's when it gave one, else the backend's at append, and does not say which.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from gateway.model import Message

from .errors import PipelineError

_BASE: Final = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)
_HEADERS: Final = "headers array<struct<key:string,value:binary>>"
_ID: Final = "id string"
CREATE_TIME: Final = 0


def read_schema(include_headers: bool) -> str:
    """Spark's Kafka columns in its order (``headers`` only with ``includeHeaders``), then id;
    as DDL, which Spark parses (a Python worker has no session to parse it with)."""
    return ", ".join([_BASE, _HEADERS, _ID] if include_headers else [_BASE, _ID])


NAMES: Final = (
    "key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers", "id",
)  # fmt: skip


def _column(
    name: str, topic: str, partition: int, msgs: Sequence[Message], t: pa.DataType
) -> pa.Array:
    values: list[object]
    match name:
        case "topic":
            return pa.repeat(pa.scalar(topic, t), len(msgs))
        case "partition":
            return pa.repeat(pa.scalar(partition, t), len(msgs))
        case "timestampType":
            return pa.repeat(pa.scalar(CREATE_TIME, t), len(msgs))
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

    def batch(self, topic: str, partition: int, messages: Sequence[Message]) -> pa.RecordBatch:
        arrays = [_column(f.name, topic, partition, messages, f.type) for f in self.arrow]
        return pa.RecordBatch.from_arrays(arrays, schema=self.arrow)


__all__ = ["CREATE_TIME", "ArrowRows", "read_schema"]
