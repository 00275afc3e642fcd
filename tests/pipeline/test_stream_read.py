"""Streaming reads: micro-batches bounded by ``maxOffsetsPerTrigger``, ``availableNow`` twice in
a row (the second run reads only what arrived in between), a query stopped in the middle and
started again from its checkpoint, and a streaming write back into the same store."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession

from tests.pipeline.data import fill, stored, values
from tests.pipeline.spark_io import expected, positions

pytestmark = pytest.mark.timeout(180)

PROGRESS_LIMIT_S = 60  # s; awaitTermination takes whole seconds


def stream(spark: SparkSession, url: str, topic: str, **options: object) -> DataFrame:
    reader = spark.readStream.format("streamgate").option("url", url).option("topic", topic)
    for name, value in options.items():
        reader = reader.option(name, str(value))
    return reader.load()


def to_parquet(
    spark: SparkSession, url: str, topic: str, out: Path, **options: object
) -> list[int]:
    """One availableNow run into Parquet under ``out``; the rows of each micro-batch."""
    query = (
        stream(spark, url, topic, **options)
        .writeStream.format("parquet")
        .option("path", str(out / "rows"))
        .option("checkpointLocation", str(out / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(PROGRESS_LIMIT_S)
    assert not query.isActive
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]


def test_available_now_twice(spark: SparkSession, tmp_path: Path) -> None:
    url = f"embedded:{tmp_path / 'data'}"
    fill(tmp_path / "data", {"orders": [40, 40, 40]})
    options = {"startingOffsets": "earliest", "maxOffsetsPerTrigger": 50}
    assert to_parquet(spark, url, "orders", tmp_path, **options) == [50, 50, 20]
    fill(tmp_path / "data", {"orders": [10, 10, 10]}, first=40, create=False)
    assert to_parquet(spark, url, "orders", tmp_path, **options) == [30]
    assert to_parquet(spark, url, "orders", tmp_path, **options) == []
    out = spark.read.parquet(str(tmp_path / "rows"))
    assert positions(out) == expected("orders", {p: range(50) for p in range(3)})


def test_starts_at_the_latest_by_default(spark: SparkSession, tmp_path: Path) -> None:
    url = f"embedded:{tmp_path / 'data'}"
    fill(tmp_path / "data", {"orders": [5, 5]})
    assert to_parquet(spark, url, "orders", tmp_path) == []
    fill(tmp_path / "data", {"orders": [0, 3]}, first=5, create=False)
    assert to_parquet(spark, url, "orders", tmp_path) == [3]
    out = spark.read.parquet(str(tmp_path / "rows"))
    assert positions(out) == expected("orders", {1: range(5, 8)})


def test_restart_from_the_checkpoint(spark: SparkSession, tmp_path: Path) -> None:
    url = f"embedded:{tmp_path / 'data'}"
    fill(tmp_path / "data", {"events": [60, 60]})
    query = (
        stream(spark, url, "events", startingOffsets="earliest", maxOffsetsPerTrigger=20)
        .writeStream.format("parquet")
        .option("path", str(tmp_path / "rows"))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    give_up = time.monotonic() + PROGRESS_LIMIT_S
    while sum(p["numInputRows"] for p in query.recentProgress) < 40:  # two batches at least
        assert time.monotonic() < give_up, query.recentProgress
        time.sleep(0.1)  # Spark's progress is polled: it has no event to wait for
    query.stop()
    read_before = sum(p["numInputRows"] for p in query.recentProgress)
    assert read_before < 120
    fill(tmp_path / "data", {"events": [20, 20]}, first=60, create=False)
    # The limit applies to the new run too; nothing read before is read again, nothing lost.
    runs = to_parquet(spark, url, "events", tmp_path, maxOffsetsPerTrigger=20)
    assert sum(runs) == 160 - read_before
    out = spark.read.parquet(str(tmp_path / "rows"))
    assert positions(out) == expected("events", {0: range(80), 1: range(80)})


def test_streaming_write_into_the_same_store(spark: SparkSession, tmp_path: Path) -> None:
    directory = tmp_path / "data"
    url = f"embedded:{directory}"
    fill(directory, {"orders": [30, 20], "mirror": [0, 0, 0]})

    def mirror() -> None:
        query = (
            stream(spark, url, "orders", startingOffsets="earliest")
            .select("value", "key")
            .writeStream.format("streamgate")
            .option("url", url)
            .option("topic", "mirror")
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(PROGRESS_LIMIT_S)
        assert not query.isActive and query.exception() is None

    mirror()
    fill(directory, {"orders": [5, 0]}, first=30, create=False)
    mirror()
    copied = sorted(v for p in values(stored(directory, "mirror")) for v in p)
    assert copied == sorted(
        [f"orders/0/{i}".encode() for i in range(35)]
        + [f"orders/1/{i}".encode() for i in range(20)]
    )
