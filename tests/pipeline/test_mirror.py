"""``mirror``: embedded to embedded (resumed by a second run; a target topic with fewer
partitions, and a source that gained partitions between runs, grown on the target), Kafka to
Iggy through a running streamgate's listeners, and the verification catching a target that lost
one message and gained another (``streamgate pipeline mirror`` exits 3 and names the
partitions)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
from pyspark.sql import SparkSession

from gateway.backends.embedded import open_embedded
from gateway.model import (
    Append,
    CreatePartitions,
    CreateTopic,
    DeleteTopic,
    Message,
    MessageBatch,
    Topic,
)
from pipeline.jobs import Mirror, mirror
from tests.helpers.gateways import running_gateway
from tests.pipeline.data import LIMIT_S, create, fill, message, stored, values
from tests.pipeline.jobs import spark_env, start, streamgate
from tests.pipeline.threads import held

pytestmark = pytest.mark.timeout(180)

JOB_LIMIT_S = 120.0  # a Spark driver starting, one micro-batch, the verification


def test_embedded_to_embedded_resumes(spark: SparkSession, tmp_path: Path) -> None:
    source, target = tmp_path / "data", tmp_path / "copy"  # the target does not exist yet
    fill(source, {"orders": [30, 20, 10], "audit": [15]})
    job = Mirror(
        url=f"embedded:{source}", to=f"embedded:{target}", topics=("orders", "audit"),
        checkpoint=str(tmp_path / "checkpoint"), max_offsets_per_trigger=40,
    )  # fmt: skip
    run = mirror(spark, job)
    assert list(run.batches.rows.values()) == [40, 35]
    assert [(c.topic, c.partition, c.source.count, c.ok) for c in run.checks or ()] == [
        ("audit", 0, 15, True), ("orders", 0, 30, True), ("orders", 1, 20, True),
        ("orders", 2, 10, True),
    ]  # fmt: skip
    fill(source, {"orders": [5, 0, 5]}, first=30, create=False)
    again = mirror(spark, job)
    assert again.batches.total == 10 and not again.differing
    assert again.copied_to == {"audit": {0: 15}, "orders": {0: 35, 1: 20, 2: 15}}
    for topic in ("orders", "audit"):  # the same messages, partition by partition
        assert _kept(stored(target, topic)) == _kept(stored(source, topic))


def _grow(directory: Path, topic: str, total: int) -> None:
    async def main() -> None:
        with trio.fail_after(LIMIT_S):
            async with open_embedded(directory, fsync="never") as backend:
                await backend.create_partitions(
                    CreatePartitions(topic=Topic("default", topic), total=total)
                )

    trio.run(main)


def test_partitions_the_target_lacks_are_created(spark: SparkSession, tmp_path: Path) -> None:
    source, target = tmp_path / "data", tmp_path / "copy"
    fill(source, {"orders": [12, 7]})
    create(target, "orders", 1)  # the target topic exists, with fewer partitions
    job = Mirror(url=f"embedded:{source}", to=f"embedded:{target}", topics=("orders",),
                 checkpoint=str(tmp_path / "checkpoint"))  # fmt: skip
    run = mirror(spark, job)
    assert [(c.partition, c.source.count, c.target.count, c.ok) for c in run.checks or ()] == [
        (0, 12, 12, True), (1, 7, 7, True)
    ]  # fmt: skip
    assert len(stored(target, "orders")) == 2

    _grow(source, "orders", 4)  # the source gains partitions 2 and 3 between runs
    fill(source, {"orders": [3, 0, 9, 4]}, first=12, create=False)
    again = mirror(spark, job)
    assert again.batches.total == 16
    assert [(c.partition, c.source.count, c.target.count, c.ok) for c in again.checks or ()] == [
        (0, 15, 15, True), (1, 7, 7, True), (2, 9, 9, True), (3, 4, 4, True)
    ]  # fmt: skip
    assert again.copied_to == {"orders": {0: 15, 1: 7, 2: 9, 3: 4}}
    copied = stored(target, "orders")
    assert [len(p) for p in copied] == [15, 7, 9, 4]
    assert _kept(copied) == _kept(stored(source, "orders"))  # each in its own partition number


def _kept(partitions: list[list[Message]]) -> list[list[tuple[object, ...]]]:
    return [[(m.offset, m.value, m.key, m.headers, m.timestamp_us, m.id) for m in p]
            for p in partitions]  # fmt: skip


def test_kafka_to_iggy_through_a_gateway(spark: SparkSession, tmp_path: Path) -> None:
    store = tmp_path / "data"
    fill(store, {"orders": [30, 20, 10]})
    with held(lambda: running_gateway(f"embedded:{store}", tmp_path, "mirror")) as gateway:
        kafka = f"kafka://{gateway.addresses['kafka']}"
        iggy = f"iggy://iggy:iggy@{gateway.addresses['iggy']}"
        job = Mirror(url=kafka, to=iggy, topics=("orders",), to_stream="copies",
                     checkpoint=str(tmp_path / "checkpoint"))  # fmt: skip
        run = mirror(spark, job)
    assert run.batches.total == 60
    assert [(c.partition, c.target.count, c.ok) for c in run.checks or ()] == [
        (0, 30, True), (1, 20, True), (2, 10, True)
    ]  # fmt: skip
    # Iggy keeps no key: the values, in order, partition by partition
    assert values(stored(store, "orders", stream="copies")) == values(stored(store, "orders"))


def _restore_without(directory: Path, topic: str, source: list[list[Message]]) -> None:
    """The target topic made again from the source's messages as a flawed restore would:
    partition 0 without its 8th message, partition 1 with one more than the source."""

    async def main() -> None:
        name = Topic("default", topic)
        with trio.fail_after(LIMIT_S):
            async with open_embedded(directory, fsync="never") as backend:
                await backend.delete_topic(DeleteTopic(topic=name))
                await backend.create_topic(CreateTopic(topic=name, partitions=len(source)))
                for p, messages in enumerate(source):
                    kept = [m._replace(offset=-1) for m in messages]
                    if p == 0:
                        del kept[7]
                    if p == 1:
                        kept.append(message(topic, 1, 99))
                    await backend.append(Append(topic=name, partition=p, batch=MessageBatch(kept)))

    trio.run(main)


@pytest.mark.slow
def test_verification_catches_a_lost_message(spark: SparkSession, tmp_path: Path) -> None:
    source, target = tmp_path / "data", tmp_path / "copy"
    fill(source, {"orders": [20, 20, 20]})
    checkpoint = str(tmp_path / "checkpoint")
    job = Mirror(url=f"embedded:{source}", to=f"embedded:{target}", topics=("orders",),
                 checkpoint=checkpoint)  # fmt: skip
    assert not mirror(spark, job).differing
    _restore_without(target, "orders", stored(source, "orders"))

    argv = streamgate(
        "pipeline", "mirror", "--url", f"embedded:{source}", "--to", f"embedded:{target}",
        "--topic", "orders", "--checkpoint", checkpoint, "--master", "local[2]",
    )  # fmt: skip
    run = start(argv, tmp_path / "mirror.log", spark_env(), tmp_path)
    assert run.finish(JOB_LIMIT_S) == 3, run.text()[-6000:]
    lines = [line for line in run.text().splitlines() if "orders/" in line]
    assert lines[0].startswith("DIFFERS orders/0: source 20 messages (offsets 0..19)")
    assert "target 19 messages (offsets 0..18)" in lines[0]
    assert lines[0].endswith(
        "they part at message 7 of the range: source offset 7, target offset 7"
    )
    assert lines[1].startswith("DIFFERS orders/1: source 20 messages")
    assert lines[1].endswith(
        "they part at message 20 of the range: source has none, target offset 20"
    )
    assert lines[2].startswith("verified orders/2: 20 messages (offsets 0..19), checksum")
    assert lines[3] == "mirror: verification FAILED for 2 of 3 partitions: orders/0, orders/1"
