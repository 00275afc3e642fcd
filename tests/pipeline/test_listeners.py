"""Reads and writes through a running streamgate (``streamgate run``, a real process on an
embedded store): its Kafka, RabbitMQ Stream and Iggy listeners, each through the backend adapter
of its protocol, and the served directory's ``embedded:`` URL, which goes through the gateway's
Kafka listener because the gateway owns the store."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from pipeline.partitioner import kafka_partition
from tests.helpers.gateways import running_gateway
from tests.pipeline.data import create, fill, message
from tests.pipeline.spark_io import expected, load, positions
from tests.pipeline.threads import held

pytestmark = pytest.mark.timeout(180)

COUNTS = {"orders": [30, 20, 10]}
BIG = 80_000  # messages in one stored batch: a 4 MiB Fetch takes the listener > 100 ms
RANGES = {0: range(30), 1: range(20), 2: range(10)}


@dataclass(frozen=True)
class Served:
    directory: Path
    urls: dict[str, str]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    base = tmp_path_factory.mktemp("listeners")
    directory = base / "data"
    fill(directory, COUNTS)
    fill(directory, {"big": [BIG]})
    for listener in ("kafka", "rabbitmq_stream", "iggy"):
        create(directory, f"copy-{listener}", 2)
    with held(lambda: running_gateway(f"embedded:{directory}", base, "pipeline")) as gateway:
        a = gateway.addresses
        yield Served(
            directory,
            {
                "kafka": f"kafka://{a['kafka']}",
                "rabbitmq_stream": f"rabbitmq-stream://guest:guest@{a['rabbitmq_stream']}/%2F",
                "iggy": f"iggy://iggy:iggy@{a['iggy']}",
            },
        )


# The RabbitMQ backend learns a stream's bounds from a subscription and a QueryOffset behind it
# (a barrier that holds on RabbitMQ); streamgate's RabbitMQ Stream listener delivers from a task
# per subscription and may answer the QueryOffset first, so the latest offset through it often
# comes back 0 and the read plans nothing (tests/gateway/test_cli_client.py works around the
# same). A gateway bug, not the data source's: strict=False until the listener keeps the order.
LISTENERS = [
    "kafka",
    "rabbitmq_stream",
    "iggy",
]


@pytest.mark.parametrize("listener", LISTENERS)
def test_read_through_a_listener(spark: SparkSession, served: Served, listener: str) -> None:
    url = served.urls[listener]
    df = load(spark, url, topic="orders", minPartitions=4)
    assert positions(df) == expected("orders", RANGES)
    keyed = {
        (r.partition, r.offset): r.key for r in df.select("partition", "offset", "key").collect()
    }
    assert {k: None if v is None else bytes(v) for k, v in keyed.items()} == {
        (p, i): message("orders", p, i).key for p, offsets in RANGES.items() for i in offsets
    }
    part = load(spark, url, topic="orders", startingOffsets='{"orders": {"1": 15}}',
                endingOffsets='{"orders": {"0": 3, "2": 1}}')  # fmt: skip
    assert positions(part) == expected("orders", {0: range(3), 1: range(15, 20), 2: range(1)})


def test_the_served_directory_through_its_kafka_listener(
    spark: SparkSession, served: Served
) -> None:
    df = load(spark, f"embedded:{served.directory}", topic="orders", minPartitions=6)
    assert positions(df) == expected("orders", RANGES)


@pytest.mark.parametrize("listener", ["kafka", "rabbitmq_stream", "iggy"])
def test_write_through_a_listener(spark: SparkSession, served: Served, listener: str) -> None:
    url = served.urls[listener]
    topic = f"copy-{listener}"
    rows = [(f"v{i}".encode(), f"k{i % 5}".encode()) for i in range(100)]
    df = spark.createDataFrame(rows, "value binary, key binary").repartition(3)
    df.write.format("streamgate").option("url", url).option("topic", topic).mode("append").save()
    # read back through one listener for all three (see LISTENERS on the RabbitMQ one)
    back = load(spark, served.urls["kafka"], topic=topic).collect()
    assert sorted(bytes(r.value) for r in back) == sorted(v for v, _ in rows)
    # keyed rows land where Kafka's partitioner puts their key (an Iggy message keeps no key)
    keys = dict(rows)
    assert all(r.partition == kafka_partition(keys[bytes(r.value)], 2) for r in back)


def test_a_big_partition_through_the_kafka_listener(spark: SparkSession, served: Served) -> None:
    # Reads below the planned end do not long-poll: the Kafka backend drops a Fetch that
    # outlasts max_wait, and these did every time (reader.py, _Cursor).
    df = load(spark, served.urls["kafka"], topic="big")
    assert df.count() == BIG
