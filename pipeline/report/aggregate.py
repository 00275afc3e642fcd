"""The access log in Spark, and its aggregates: per protocol, command, outcome and minute (and
over the whole period): commands, messages, bytes, and percentiles of both durations.

Percentiles are ``percentile_approx`` with accuracy 10,000 (Greenwald-Khanna): a value that
occurred (the nearest rank, no interpolation between two latencies), exact while a group holds
up to about 5,000 values (measured: 1,000 and 5,000 exact, 8,000 one rank off), and past that
within 1/10,000 of the group's size in rank (200,000 values: p99 at rank 197,980 for 198,000).
Spark's exact ``percentile`` interpolates, and holds every value of a group in one task's
memory: a busy minute of a busy gateway is millions of lines.

Minutes are UTC whatever the session's time zone (``date_trunc`` would use it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

# gateway/access_log.py's fields, in its order; every one always present, null where it does
# not apply. A field this does not know is ignored, one it misses is null (another version).
FIELDS: Final = (
    "time", "protocol", "command", "wire_command", "stream", "topic", "partition", "messages",
    "bytes", "duration_s", "backend_s", "waited_s", "outcome", "error_type", "user", "peer",
)  # fmt: skip
CORRUPT: Final = "_corrupt_record"
SCHEMA: Final = (
    "time timestamp, protocol string, command string, wire_command string, stream string, "
    "topic string, partition long, messages long, bytes long, duration_s double, "
    "backend_s double, waited_s double, outcome string, error_type string, user string, "
    f"peer string, {CORRUPT} string"
)
REQUIRED: Final = ("time", "protocol", "command", "outcome")
KEYS: Final = ("protocol", "command", "outcome")
PERCENTILES: Final = (50, 95, 99)
ACCURACY: Final = 10_000
MINUTE: Final = "timestamp_seconds(div(unix_seconds(time), 60) * 60)"
# The measures of a group, in the order the Parquet files hold them.
MEASURES: Final = (
    "count", "messages", "bytes",
    *(f"duration_p{p}_s" for p in PERCENTILES), "duration_max_s",
    *(f"backend_p{p}_s" for p in PERCENTILES),
)  # fmt: skip


def read_log(spark: SparkSession, paths: Sequence[str]) -> DataFrame:
    """Every line of the files: its fields, ``minute``, ``file``, and ``bad`` for a line that is
    not JSON, is cut short (a SIGKILLed gateway's last line), has a field of the wrong type or
    lacks one that every line has. Bad lines keep their text in ``raw``."""
    lines = (
        spark.read.schema(SCHEMA)
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", CORRUPT)
        .json(list(paths))
    )
    bad = F.col(CORRUPT).isNotNull()
    for name in REQUIRED:
        bad = bad | F.col(name).isNull()
    fields = F.struct(*[F.col(n) for n in FIELDS])
    return lines.select(
        *FIELDS,
        F.expr(MINUTE).alias("minute"),
        F.col("_metadata.file_path").alias("file"),
        bad.alias("bad"),
        F.when(bad, F.coalesce(F.col(CORRUPT), F.to_json(fields))).alias("raw"),
    )


def _percentiles(column: str, name: str) -> list[Column]:
    values = F.percentile_approx(column, [p / 100 for p in PERCENTILES], ACCURACY)
    return [values[i].alias(f"{name}_p{p}_s") for i, p in enumerate(PERCENTILES)]


def _measures() -> list[Column]:
    return [
        F.count(F.lit(1)).alias("count"),
        F.sum("messages").alias("messages"),
        F.sum("bytes").alias("bytes"),
        *_percentiles("duration_s", "duration"),
        F.max("duration_s").alias("duration_max_s"),
        *_percentiles("backend_s", "backend"),
    ]


def by_minute(good: DataFrame) -> DataFrame:
    """One row per protocol, command, outcome and minute. ``messages`` and ``bytes`` are null
    for commands that move none (the log's own null: "does not apply")."""
    return (
        good.groupBy(*KEYS, "minute")
        .agg(*_measures())  # columns: KEYS, minute, MEASURES
        .orderBy("minute", *KEYS)
    )


def summary(good: DataFrame) -> DataFrame:
    """One row per protocol, command and outcome over the whole period (percentiles of every
    line: those of the minutes cannot be merged into them)."""
    return (
        good.groupBy(*KEYS)
        .agg(
            *_measures(),
            F.min("time").alias("first_seen"),
            F.max("time").alias("last_seen"),
        )
        .orderBy(*KEYS)
    )


def errors(good: DataFrame) -> DataFrame:
    """The failed commands by protocol, command and error type, the most frequent first."""
    return (
        good.where(F.col("outcome") == "error")
        .groupBy("protocol", "command", "error_type")
        .agg(
            F.count(F.lit(1)).alias("count"),
            F.min("time").alias("first_seen"),
            F.max("time").alias("last_seen"),
        )
        .orderBy(F.desc("count"), "protocol", "command", "error_type")
    )


__all__ = [
    "ACCURACY", "FIELDS", "KEYS", "MEASURES", "PERCENTILES", "SCHEMA",
    "by_minute", "errors", "read_log", "summary",
]  # fmt: skip
