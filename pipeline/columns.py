"""What a write takes from the DataFrame: the columns of Spark's Kafka sink (``value``, and
optionally ``key``, ``headers``, ``topic``, ``partition``) plus ``timestamp`` and ``id``, so that
a DataFrame read from one endpoint writes to another as it is (``mirror``); any other column
(``offset``, ``timestampType``) is ignored, as Spark's Kafka sink ignores it. Types are checked
on the driver before any task starts; values go from Arrow columns to canonical messages."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    ByteType,
    DataType,
    DecimalType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from gateway.model import Header, Message

from .errors import PipelineError

_BYTES: Final = (BinaryType, StringType)
_INTEGERS: Final = (ByteType, ShortType, IntegerType, LongType)
_MAX_ID: Final = (1 << 128) - 1
_WANTED: Final = {
    "value": "binary or string",
    "key": "binary or string",
    "topic": "string",
    "partition": "int or long",
    "headers": "array<struct<key:string,value:binary>> (value may be string)",
    "timestamp": "timestamp",
    "id": "string (decimal digits), long or decimal(38,0)",
}


def check_schema(schema: StructType, topic_option: str | None) -> None:
    """Refuse, before anything is written, a DataFrame the write cannot take."""
    types = {f.name: f.dataType for f in schema.fields}
    if "value" not in types:
        raise PipelineError(
            f"a write needs a value column (binary or string); it has {list(types)}"
        )
    if topic_option is None and "topic" not in types:
        raise PipelineError("a write needs the option topic or a topic column")
    for name, wanted in _WANTED.items():
        if name in types and not _fits(name, types[name]):
            raise PipelineError(
                f"column {name} is {types[name].simpleString()}, the write wants {wanted}"
            )


def _fits(name: str, t: DataType) -> bool:
    match name:
        case "value" | "key":
            return isinstance(t, _BYTES)
        case "topic":
            return isinstance(t, StringType)
        case "partition":
            return isinstance(t, _INTEGERS)
        case "timestamp":
            return isinstance(t, TimestampType | TimestampNTZType)
        case "id":
            return isinstance(t, StringType | LongType | IntegerType) or (
                isinstance(t, DecimalType) and t.scale == 0
            )
        case "headers":
            if not isinstance(t, ArrayType) or not isinstance(t.elementType, StructType):
                return False
            fields = {f.name: f.dataType for f in t.elementType.fields}
            return isinstance(fields.get("key"), StringType) and isinstance(
                fields.get("value"), _BYTES
            )
    return False


@dataclass(frozen=True, slots=True)
class Rows:
    """One Arrow batch's rows: their messages, and where each asked to go (None: not said)."""

    messages: list[Message]
    topics: Sequence[str | None] | None
    partitions: Sequence[int | None] | None


def rows_of(batch: pa.RecordBatch) -> Rows:
    names = set(batch.schema.names)
    n = batch.num_rows
    values = _bytes(batch.column("value"))
    keys = _bytes(batch.column("key")) if "key" in names else [None] * n
    headers = _headers(batch.column("headers")) if "headers" in names else [()] * n
    stamps = (
        batch.column("timestamp").cast(pa.int64()).to_pylist() if "timestamp" in names else [0] * n
    )
    ids = _ids(batch.column("id")) if "id" in names else [0] * n
    messages = [
        Message(value=v or b"", key=k, headers=h, timestamp_us=ts or 0, id=i)
        for v, k, h, ts, i in zip(values, keys, headers, stamps, ids, strict=True)
    ]
    return Rows(
        messages=messages,
        topics=batch.column("topic").to_pylist() if "topic" in names else None,
        partitions=batch.column("partition").to_pylist() if "partition" in names else None,
    )


def _bytes(column: pa.Array) -> list[bytes | None]:
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        column = column.cast(pa.binary())
    return list(column.to_pylist())


def _headers(column: pa.Array) -> list[tuple[Header, ...]]:
    """Each row's headers; a null list is none, a header with a null name is dropped."""
    return [
        tuple(_header(h) for h in row or () if h is not None and h["key"] is not None)
        for row in column.to_pylist()
    ]


def _header(h: dict[str, Any]) -> Header:
    value = h["value"]
    return Header(h["key"], value.encode() if isinstance(value, str) else value or b"")


def _ids(column: pa.Array) -> list[int]:
    out = []
    for value in column.to_pylist():
        if value is None:
            out.append(0)
            continue
        try:
            number = int(value)
        except (TypeError, ValueError):
            raise PipelineError(f"column id: {value!r} is not a whole number") from None
        if not 0 <= number <= _MAX_ID:
            raise PipelineError(f"column id: {value} is not an unsigned 128-bit number")
        out.append(number)
    return out


__all__ = ["Rows", "check_schema", "rows_of"]
