"""Bad input fails with a message naming the option or the endpoint, and that message reaches the
user inside Spark's own error (an AnalysisException, a PythonException, a
StreamingQueryException: each keeps the Python error's text)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import DataFrameWriter, SparkSession

from gateway.backends.embedded import open_embedded
from tests.helpers.processes import free_ports
from tests.pipeline.data import fill
from tests.pipeline.spark_io import load
from tests.pipeline.threads import held

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory: Path = tmp_path_factory.mktemp("errors") / "data"
    fill(directory, {"orders": [10, 5]})
    return directory


def failure(action: Callable[[], object]) -> str:
    with pytest.raises(PySparkException) as info:
        action()
    return str(info.value)


@pytest.fixture
def url(store: Path) -> str:
    return f"embedded:{store}"


def test_unknown_topic(spark: SparkSession, url: str) -> None:
    text = failure(lambda: load(spark, url, topic="orders,nope").count())
    assert "option topic: topic 'nope' does not exist in stream 'default'" in text


def test_unreachable_url(spark: SparkSession) -> None:
    [port] = free_ports(1)  # nothing listens there
    url = f"kafka://127.0.0.1:{port}"
    text = failure(lambda: load(spark, url, topic="t", timeoutMs=1000).count())
    assert f"no answer from {url} within 1 s" in text
    assert "option timeoutMs bounds the wait" in text


def test_missing_store_directory(spark: SparkSession, tmp_path: Path) -> None:
    text = failure(lambda: load(spark, f"embedded:{tmp_path / 'nope'}", topic="t").count())
    assert "option url: " in text and "no such directory" in text
    assert not (tmp_path / "nope").exists()  # a mistyped path makes no store


def test_offset_out_of_range(spark: SparkSession, url: str) -> None:
    starting = '{"orders": {"1": 9}}'
    text = failure(lambda: load(spark, url, topic="orders", startingOffsets=starting).count())
    assert "option startingOffsets: topic 'orders' partition 1: offset 9 is out of range" in text
    assert "(the partition holds offsets 0 to 4, next is 5)" in text
    ending = '{"orders": {"7": 1}}'
    text = failure(lambda: load(spark, url, topic="orders", endingOffsets=ending).count())
    assert "option endingOffsets: topic 'orders' has partitions 0..1, not [7]" in text


def test_malformed_options_fail_at_load(spark: SparkSession, url: str) -> None:
    text = failure(lambda: load(spark, url, topic="orders", startingOffsets="{oops"))
    assert "option startingOffsets: want 'earliest', 'latest' or JSON like" in text
    text = failure(lambda: load(spark, url, topic="orders", startingOfsets="earliest"))
    assert "option startingofsets: unknown to the streamgate data source" in text


def test_a_streaming_read_has_no_end(spark: SparkSession, url: str) -> None:
    reader = (
        spark.readStream.format("streamgate")
        .option("url", url)
        .option("topic", "orders")
        .option("endingOffsets", "latest")
    )
    text = failure(lambda: reader.load().writeStream.format("noop").start().awaitTermination(60))
    assert "option endingOffsets: a streaming read has no end" in text


def test_a_store_held_elsewhere_for_too_long(spark: SparkSession, store: Path, url: str) -> None:
    with held(lambda: open_embedded(store, fsync="never")):  # this process, no listeners
        text = failure(lambda: load(spark, url, topic="orders", lockTimeoutMs=300).count())
    assert "is in use by streamgate (pid" in text
    assert "still so after waiting 0.3 s (option lockTimeoutMs)" in text


def test_bad_writes(spark: SparkSession, url: str) -> None:
    df = spark.createDataFrame([(b"v",)], "value binary")

    def writer() -> DataFrameWriter:  # a DataFrameWriter keeps the options set on it
        return df.write.format("streamgate").option("url", url)

    text = failure(lambda: writer().option("topic", "orders").mode("overwrite").save())
    assert "option mode: topics are append-only" in text
    text = failure(lambda: writer().mode("append").save())
    assert "a write needs the option topic or a topic column" in text
    text = failure(lambda: writer().option("topic", "nope").mode("append").save())
    assert "option topic: topic 'nope' does not exist" in text
    numbers = spark.createDataFrame([(1,)], "value int").write.format("streamgate")
    text = failure(
        lambda: numbers.option("url", url).option("topic", "orders").mode("append").save()
    )
    assert "column value is int, the write wants binary or string" in text
