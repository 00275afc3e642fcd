"""A batch read and a write on a real RabbitMQ (3.10.8, the session's shared node, a virtual
host of its own): the RabbitMQ backend's adapter on the executors, its super-stream partitions
as Spark input partitions."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from tests.helpers.rabbitmq_shared import shared_rabbitmq
from tests.pipeline.data import fill, stored, values
from tests.pipeline.spark_io import expected, load, positions

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def url() -> str:
    shared = shared_rabbitmq()
    return shared.url(shared.new_vhost())


def test_read_and_write_on_rabbitmq(spark: SparkSession, url: str) -> None:
    fill(url, {"orders": [25, 15], "copy": [0, 0]})
    df = load(spark, url, topic="orders", includeHeaders="true", minPartitions=3)
    assert df.rdd.getNumPartitions() == 3
    assert positions(df) == expected("orders", {0: range(25), 1: range(15)})
    headers = {r.offset: [(h.key, bytes(h.value)) for h in r.headers]
               for r in df.where("partition = 0").collect()}  # fmt: skip
    assert headers[7] == [("n", b"7"), ("from", b"test")]

    df.select("value", "partition").write.format("streamgate").option("url", url).option(
        "topic", "copy"
    ).mode("append").save()
    assert [sorted(p) for p in values(stored(url, "copy"))] == [
        sorted(f"orders/{p}/{i}".encode() for i in range(n)) for p, n in ((0, 25), (1, 15))
    ]
