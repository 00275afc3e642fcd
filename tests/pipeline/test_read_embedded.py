"""Batch reads of an embedded store nobody serves, with every read option. Spark runs two tasks
at once (local[2]) in two Python workers: with several input partitions they take turns on the
store's lock (pipeline/endpoint.py), and every row must still come exactly once."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from tests.pipeline.data import BASE_MS, fill, message
from tests.pipeline.spark_io import expected, load, positions

pytestmark = pytest.mark.timeout(180)

COUNTS = {"orders": [30, 20, 10], "refunds": [5]}


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> str:
    directory: Path = tmp_path_factory.mktemp("read") / "data"
    fill(directory, COUNTS)
    fill(directory, {"orders": [4]}, stream="eu")
    return f"embedded:{directory}"


def test_every_field_of_every_message(spark: SparkSession, url: str) -> None:
    df = load(spark, url, topic="orders", includeHeaders="true")
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int,headers:array<struct<key:string,value:binary>>,"
        "id:string>"
    )
    rows = df.withColumn("us", F.unix_micros("timestamp")).collect()
    assert len(rows) == 60
    for row in rows:
        m = message(row.topic, row.partition, row.offset)
        assert bytes(row.value) == m.value
        assert (None if row.key is None else bytes(row.key)) == m.key
        assert [(h.key, bytes(h.value)) for h in row.headers] == [
            (h.name, h.value) for h in m.headers
        ]
        assert row.id == (str(m.id) if m.id else None)
        assert row.us == m.timestamp_us
        assert row.timestampType == 0
    assert positions(df) == expected("orders", {0: range(30), 1: range(20), 2: range(10)})


def test_headers_only_when_asked(spark: SparkSession, url: str) -> None:
    df = load(spark, url, topic="refunds")
    assert df.columns == [
        "key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "id",
    ]  # fmt: skip
    assert positions(df) == expected("refunds", {0: range(5)})


def test_topic_list_and_stream(spark: SparkSession, url: str) -> None:
    both = load(spark, url, topic="orders, refunds")
    assert positions(both) == sorted(
        expected("orders", {0: range(30), 1: range(20), 2: range(10)})
        + expected("refunds", {0: range(5)})
    )
    assert positions(load(spark, url, topic="orders", stream="eu")) == expected(
        "orders", {0: range(4)}
    )


def test_starting_and_ending_offsets(spark: SparkSession, url: str) -> None:
    # Partition 0 from 25 to 28; 1 from the earliest (-2) to 5; 2 from the latest (-1): nothing.
    df = load(
        spark,
        url,
        topic="orders",
        startingOffsets='{"orders": {"0": 25, "2": -1}}',
        endingOffsets='{"orders": {"0": 28, "1": 5}}',
    )
    assert positions(df) == expected("orders", {0: range(25, 28), 1: range(5)})
    assert load(spark, url, topic="orders", startingOffsets="latest").count() == 0
    assert load(spark, url, topic="orders", endingOffsets='{"orders": {"0": -1}}').count() == 60


def test_starting_timestamp(spark: SparkSession, url: str) -> None:
    # message i is stamped BASE_MS + i: from i = 15 on; partition 2 has nothing that late.
    df = load(spark, url, topic="orders", startingTimestamp=BASE_MS + 15)
    assert positions(df) == expected("orders", {0: range(15, 30), 1: range(15, 20)})


def test_min_partitions_split_big_partitions(spark: SparkSession, url: str) -> None:
    df = load(spark, url, topic="orders", minPartitions=6)
    assert df.rdd.getNumPartitions() == 6  # 30, 20, 10 offsets: 3 + 2 + 1 ranges
    assert positions(df) == expected("orders", {0: range(30), 1: range(20), 2: range(10)})
    assert load(spark, url, topic="orders").rdd.getNumPartitions() == 3


def test_a_schema_of_some_columns(spark: SparkSession, url: str) -> None:
    df = (
        spark.read.format("streamgate")
        .schema("offset long, value binary")
        .option("url", url)
        .option("topic", "refunds")
        .load()
    )
    assert sorted((r.offset, bytes(r.value)) for r in df.collect()) == [
        (i, f"refunds/0/{i}".encode()) for i in range(5)
    ]
