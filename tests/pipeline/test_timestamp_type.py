"""``timestampType`` as Spark's Kafka connector reports it: 1 for the records of a Kafka batch a
broker stamped with its LogAppendTime, 0 for the rest. No broker the tests run stamps
LogAppendTime (Tansu ignores ``message.timestamp.type``), so the store is given such a batch as
a broker hands it out: a Kafka producer's batch marked by ``set_log_append_time``, the broker's
own step, kept as it came (the embedded store keeps Kafka batches byte for byte). It is read
from the store directly, and through a running streamgate's Kafka listener (the Kafka backend
reading a broker)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from gateway.backends.embedded import open_embedded
from gateway.model import (
    DEFAULT_STREAM,
    Append,
    CreateTopic,
    Message,
    MessageBatch,
    Topic,
    WireBatch,
)
from gateway.translate.kafka.messages import WIRE_FORMAT as KAFKA
from protocols.kafka import Record, encode_batch, set_log_append_time
from tests.helpers.gateways import running_gateway
from tests.pipeline.data import BASE_MS, LIMIT_S
from tests.pipeline.spark_io import load
from tests.pipeline.threads import held

pytestmark = pytest.mark.timeout(180)

APPENDED_MS = BASE_MS + 60_000  # the broker's clock when it appended the LogAppendTime batch
# offset -> (timestampType, timestamp in ms): sg1 0-1, a CreateTime Kafka batch 2-3, a
# LogAppendTime Kafka batch 4-6, sg1 7
EXPECTED = {
    0: (0, BASE_MS), 1: (0, BASE_MS + 1),
    2: (0, BASE_MS + 2), 3: (0, BASE_MS + 3),
    4: (1, APPENDED_MS), 5: (1, APPENDED_MS), 6: (1, APPENDED_MS),
    7: (0, BASE_MS + 7),
}  # fmt: skip


def _kafka_batch(first: int, count: int, *, log_append_time: bool) -> MessageBatch:
    records = [
        Record(offset_delta=i, timestamp_delta=i, key=None, value=f"v{first + i}".encode())
        for i in range(count)
    ]
    data = encode_batch(records, base_timestamp_ms=BASE_MS + first)
    last_ms = BASE_MS + first + count - 1
    if log_append_time:
        data = set_log_append_time(data, APPENDED_MS)
        last_ms = APPENDED_MS
    wire = WireBatch(
        format=KAFKA,
        data=data,
        count=count,
        first_timestamp_us=(BASE_MS + first) * 1000,
        max_timestamp_us=last_ms * 1000,
    )
    return MessageBatch(wire=wire)


def _sg1(first: int, count: int) -> MessageBatch:
    return MessageBatch(
        [
            Message(value=f"v{i}".encode(), timestamp_us=(BASE_MS + i) * 1000)
            for i in range(first, first + count)
        ]
    )


def _fill(directory: Path) -> None:
    async def main() -> None:
        topic = Topic(DEFAULT_STREAM, "stamps")
        with trio.fail_after(LIMIT_S):
            async with open_embedded(directory, fsync="never") as backend:
                await backend.create_topic(CreateTopic(topic=topic, partitions=1))
                for batch in (
                    _sg1(0, 2),
                    _kafka_batch(2, 2, log_append_time=False),
                    _kafka_batch(4, 3, log_append_time=True),
                    _sg1(7, 1),
                ):
                    await backend.append(Append(topic=topic, partition=0, batch=batch))

    trio.run(main)


def _stamps(df: DataFrame) -> dict[int, tuple[int, int]]:
    rows = df.select("offset", "timestampType", "value", F.unix_millis("timestamp").alias("ms"))
    got = {}
    for r in rows.collect():
        assert bytes(r.value) == f"v{r.offset}".encode()
        got[r.offset] = (r.timestampType, r.ms)
    return got


def _check(spark: SparkSession, url: str) -> None:
    assert _stamps(load(spark, url, topic="stamps")) == EXPECTED
    # From inside the LogAppendTime batch: the stored batch is read whole, then trimmed.
    inside = load(spark, url, topic="stamps", startingOffsets='{"stamps": {"0": 5}}')
    assert _stamps(inside) == {o: EXPECTED[o] for o in (5, 6, 7)}


def test_log_append_time_read_from_the_store(spark: SparkSession, tmp_path: Path) -> None:
    directory = tmp_path / "data"
    _fill(directory)
    _check(spark, f"embedded:{directory}")


def test_log_append_time_read_through_a_kafka_listener(spark: SparkSession, tmp_path: Path) -> None:
    directory = tmp_path / "data"
    _fill(directory)
    with held(lambda: running_gateway(f"embedded:{directory}", tmp_path, "stamps")) as gateway:
        _check(spark, f"kafka://{gateway.addresses['kafka']}")
