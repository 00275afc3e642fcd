"""Batch writes: every column the write takes reaches the stored message, rows go to the
partition they name, else their key's (Kafka's partitioner), and a topic column spreads rows
over topics; appends are acknowledged before the job ends, so the store has them after it."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from gateway.model import Header
from pipeline.partitioner import kafka_partition
from tests.helpers.tansu import running_tansu
from tests.pipeline.data import create, stored
from tests.pipeline.spark_io import load
from tests.pipeline.threads import held

pytestmark = pytest.mark.timeout(120)

SCHEMA = (
    "topic string, partition int, key binary, value binary, "
    "headers array<struct<key:string,value:binary>>, timestamp timestamp, id string, "
    "offset long"
)
WHEN = datetime.datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=datetime.UTC)


def test_every_column_reaches_the_store(spark: SparkSession, tmp_path: Path) -> None:
    directory = tmp_path / "data"
    create(directory, "a", 3)
    create(directory, "b", 2)
    big_id = str((1 << 128) - 5)  # beyond decimal(38,0): why the column is a string
    rows = [
        ("a", 2, b"k", b"explicit", [("h", b"1"), ("h", b"2")], WHEN, big_id, 99),
        ("a", None, b"user-7", b"keyed", [], None, None, 0),
        ("b", None, None, b"no key", None, None, "42", 0),
        ("b", 1, None, b"", [("empty", b"")], None, None, 0),
    ]
    df = spark.createDataFrame(rows, SCHEMA).coalesce(1)
    df.write.format("streamgate").option("url", f"embedded:{directory}").mode("append").save()

    a, b = stored(directory, "a"), stored(directory, "b")
    [explicit] = [m for m in a[2] if m.value == b"explicit"]
    assert explicit.key == b"k"
    assert explicit.headers == (Header("h", b"1"), Header("h", b"2"))
    assert explicit.timestamp_us == int(WHEN.timestamp() * 1_000_000)
    assert explicit.id == (1 << 128) - 5
    [keyed] = [m for p in a for m in p if m.value == b"keyed"]
    assert keyed in a[kafka_partition(b"user-7", 3)] and keyed.timestamp_us > 0
    # no key, no partition: the task's Spark partition (0 here) modulo the partitions
    assert [m.value for m in b[0]] == [b"no key"] and b[0][0].id == 42
    assert [(m.value, m.headers) for m in b[1]] == [(b"", (Header("empty", b""),))]
    assert sum(len(p) for p in a) == 2


def test_string_values_and_the_topic_option(spark: SparkSession, tmp_path: Path) -> None:
    directory = tmp_path / "data"
    create(directory, "t", 2)
    df = spark.createDataFrame(
        [(f"v{i}", f"k{i % 4}") for i in range(500)], "value string, key string"
    )
    (
        df.repartition(4)
        .write.format("streamgate")
        .option("url", f"embedded:{directory}")
        .option("topic", "t")
        .option("batchSize", 7)
        .mode("append")
        .save()
    )
    got = stored(directory, "t")
    assert sorted(m.value for p in got for m in p) == sorted(f"v{i}".encode() for i in range(500))
    for p, messages in enumerate(got):
        assert {kafka_partition(m.key or b"", 2) for m in messages} == {p}


def test_a_write_and_read_on_a_real_kafka_broker(spark: SparkSession, tmp_path: Path) -> None:
    """Straight to Tansu (a Kafka-compatible broker): the writer is a plain Kafka client there
    (a broker refuses producer ids it did not grant), and the rows read back as written."""
    with held(lambda: running_tansu(tmp_path)) as tansu:
        create(tansu.url, "onto-kafka", 2)
        df = spark.createDataFrame(
            [(f"v{i}", f"k{i % 5}") for i in range(300)], "value string, key string"
        )
        df.write.format("streamgate").option("url", tansu.url).option("topic", "onto-kafka").mode(
            "append"
        ).save()
        back = load(spark, tansu.url, topic="onto-kafka").collect()
    assert sorted(bytes(r.value) for r in back) == sorted(f"v{i}".encode() for i in range(300))
    for r in back:  # each key in Kafka's partition for it
        assert r.partition == kafka_partition(bytes(r.key), 2)
