"""``archive``: topics to Parquet partitioned by topic and UTC date, availableNow twice in a row
(the second run reads only what arrived in between), and a driver killed (SIGKILL) in the middle
of a continuous run, restarted from its checkpoint: every offset in the output exactly once."""

from __future__ import annotations

import datetime
import signal
from pathlib import Path

import pytest
import trio
from pyspark.sql import SparkSession

from gateway.backends.embedded import open_embedded
from gateway.model import Append, MessageBatch, Topic
from pipeline.jobs import Archive, archive
from tests.pipeline.data import LIMIT_S, fill, message
from tests.pipeline.jobs import kill, spark_env, start, streamgate
from tests.pipeline.spark_io import expected, positions

pytestmark = pytest.mark.timeout(180)

DAY_2_US = 1_767_312_000_000_000  # 2026-01-02T00:00:00Z; data.BASE_MS is the day before
KILL_START_S = 120.0  # a Spark driver starting (6-12 s), then three micro-batches


def append_on_day_2(directory: Path, topic: str, partition: int, numbers: range) -> None:
    """Messages ``numbers`` of ``data.message``, stamped on 2026-01-02 instead."""

    async def main() -> None:
        with trio.fail_after(LIMIT_S):
            async with open_embedded(directory, fsync="never") as backend:
                batch = [
                    message(topic, partition, i)._replace(timestamp_us=DAY_2_US + i)
                    for i in numbers
                ]
                await backend.append(
                    Append(topic=Topic("default", topic), partition=partition,
                           batch=MessageBatch(batch))
                )  # fmt: skip

    trio.run(main)


def test_available_now_twice(spark: SparkSession, tmp_path: Path) -> None:
    store, out = tmp_path / "data", tmp_path / "archive"
    fill(store, {"orders": [40, 40, 40], "audit": [5]})
    job = Archive(f"embedded:{store}", ("orders", "audit"), str(out), max_offsets_per_trigger=50)
    assert list(archive(spark, job).rows.values()) == [50, 50, 25]
    fill(store, {"orders": [10, 0, 10]}, first=40, create=False)
    append_on_day_2(store, "orders", 1, range(40, 42))
    assert list(archive(spark, job).rows.values()) == [22]  # only what came in between
    assert archive(spark, job).total == 0

    table = spark.read.parquet(str(out))  # through _spark_metadata: committed batches only
    want = expected("orders", {0: range(50), 1: range(42), 2: range(50)}) + expected(
        "audit", {0: range(5)}
    )
    assert positions(table) == sorted(want)
    dates = {(r.topic, r.partition, r.offset): r.date for r in table.collect()}
    day_1, day_2 = datetime.date(2026, 1, 1), datetime.date(2026, 1, 2)
    assert {k for k, d in dates.items() if d == day_2} == {("orders", 1, 40), ("orders", 1, 41)}
    assert set(dates.values()) == {day_1, day_2}
    assert (out / "topic=orders" / "date=2026-01-02").is_dir()
    assert (out / "topic=audit" / "date=2026-01-01").is_dir()
    # every column of the source is kept
    row = table.where("topic = 'orders' and partition = 2 and offset = 3").collect()[0]
    m = message("orders", 2, 3)
    assert (row.key, row.id, row.timestampType) == (None, "4", 0)
    assert [(h.key, bytes(h.value)) for h in row.headers] == [(h.name, h.value) for h in m.headers]
    assert row.timestamp.replace(tzinfo=datetime.UTC).timestamp() * 1e6 == m.timestamp_us


@pytest.mark.slow
def test_a_killed_driver_restarts_from_its_checkpoint(spark: SparkSession, tmp_path: Path) -> None:
    store, out = tmp_path / "data", tmp_path / "archive"
    fill(store, {"events": [150, 150, 150, 150]})
    url = f"embedded:{store}"
    # As a user runs it: `streamgate pipeline` execs the job in its own process, same pid.
    argv = streamgate(
        "pipeline", "archive", "--url", url, "--topic", "events", "--output", str(out),
        "--max-offsets-per-trigger", "40", "--follow", "--interval", "0.2", "--master", "local[2]",
    )  # fmt: skip
    job = start(argv, tmp_path / "job.log", spark_env(), tmp_path)
    try:
        job.wait_for("archive: batch 2: 40 rows", KILL_START_S)
    finally:
        kill(job.process)  # SIGKILL of the driver, wherever it is in its micro-batch
    assert job.process.returncode == -signal.SIGKILL
    assert "archive: batch 14" not in job.text()  # it was stopped before the end

    # Restarted without the limit: the batch the kill interrupted is replayed as the offset log
    # has it, then the rest comes in one more.
    again = archive(spark, Archive(url, ("events",), str(out)))
    assert 0 < again.total < 600 and len(again.rows) <= 2
    table = spark.read.parquet(str(out))
    assert positions(table) == expected("events", {p: range(150) for p in range(4)})
    assert table.count() == 600  # once each: no row twice
