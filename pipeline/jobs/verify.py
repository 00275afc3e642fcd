"""The check that ends ``mirror``: per source partition, what the mirror copied (the source's
offsets from where the mirror began to the end of its last committed micro-batch) against what
the target partition holds from where the mirror began writing to it: their counts, and a
checksum of their values.

The checksum follows offset order: the sum, modulo 2^64, of ``xxhash64(n, value)`` where ``n``
is the message's position in its range (0, 1, ... by offset). A mirror copies each source
partition into the same target partition, one task per partition and micro-batch appending in
offset order, so the target must hold the same values in the same order; an order-free sum
would pass a copy that reordered a partition, which breaks what its consumers rely on. Positions
rather than offsets: the two sides' offsets need not match (a target that held messages before,
a source with offsets that carry no message, such as Kafka transaction markers). Values only,
not keys or headers: a target may legitimately drop what its protocol cannot carry (an Iggy
message has no key). A sum is computed where the rows are, partition by partition, without
collecting a partition in one place; when a partition differs, a join on positions finds the
first place where it does.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import reduce
from typing import Final

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from ..offsets import Offsets, to_json

_MASK: Final = (1 << 64) - 1


@dataclass(frozen=True, slots=True)
class Side:
    """The messages of one side: ``topics`` of ``stream`` at ``url``, from ``start`` to
    ``end`` per partition (None: to the end the partition has now)."""

    url: str
    stream: str
    start: Offsets
    end: Offsets | None


@dataclass(frozen=True, slots=True)
class Summary:
    count: int
    checksum: int  # the sum modulo 2^64
    first: int | None  # offsets of the first and last message
    last: int | None

    def show(self) -> str:
        if self.count == 0:
            return "0 messages"
        return (
            f"{self.count} messages (offsets {self.first}..{self.last}), "
            f"checksum {self.checksum:016x}"
        )


EMPTY: Final = Summary(0, 0, None, None)


@dataclass(frozen=True, slots=True)
class PartitionCheck:
    topic: str
    partition: int
    source: Summary
    target: Summary
    # where the sides first differ: the position (0: the first message of the ranges), and
    # the source's and the target's offset there (None: that side has no message there)
    first_difference: tuple[int, int | None, int | None] | None = None

    @property
    def ok(self) -> bool:
        return self.source.count == self.target.count and (
            self.source.checksum == self.target.checksum
        )

    def show(self) -> str:
        where = f"{self.topic}/{self.partition}"
        if self.ok:
            return f"verified {where}: {self.source.show()} on both sides"
        text = f"DIFFERS {where}: source {self.source.show()}; target {self.target.show()}"
        if self.first_difference is not None:
            n, at_source, at_target = self.first_difference
            text += (
                f"; they part at message {n} of the range: source {_at(at_source)}, "
                f"target {_at(at_target)}"
            )
        return text


def _at(offset: int | None) -> str:
    return "has none" if offset is None else f"offset {offset}"


def _positions(spark: SparkSession, side: Side, topics: Sequence[str], wanted: Column) -> DataFrame:
    reader = (
        spark.read.format("streamgate")
        .option("url", side.url)
        .option("stream", side.stream)
        .option("topic", ",".join(topics))
        .option("startingOffsets", json.dumps(to_json(side.start)))
    )
    if side.end is not None:
        reader = reader.option("endingOffsets", json.dumps(to_json(side.end)))
    by_offset = Window.partitionBy("topic", "partition").orderBy("offset")
    return (
        reader.load()
        .select("topic", "partition", "offset", "value")
        .where(wanted)
        .withColumn("n", F.row_number().over(by_offset) - 1)
        .withColumn("h", F.xxhash64("n", "value"))
    )


def _summaries(df: DataFrame) -> dict[tuple[str, int], Summary]:
    rows = (
        df.groupBy("topic", "partition")
        .agg(
            F.count("*").alias("count"),
            F.sum(F.col("h").cast("decimal(38,0)")).alias("sum"),  # no overflow: 2^64 * 2^63 max
            F.min("offset").alias("first"),
            F.max("offset").alias("last"),
        )
        .collect()
    )
    return {
        (r["topic"], r["partition"]): Summary(
            r["count"], int(r["sum"]) & _MASK, r["first"], r["last"]
        )
        for r in rows
    }


def _first_differences(
    source: DataFrame, target: DataFrame
) -> dict[tuple[str, int], tuple[int, int | None, int | None]]:
    keys = ["topic", "partition", "n"]
    s = source.select(*keys, F.col("offset").alias("s_offset"), F.col("h").alias("s_h"))
    t = target.select(*keys, F.col("offset").alias("t_offset"), F.col("h").alias("t_h"))
    rows = (
        s.join(t, keys, "full_outer")
        .where(~F.col("s_h").eqNullSafe(F.col("t_h")))
        .groupBy("topic", "partition")
        .agg(F.min_by(F.struct("n", "s_offset", "t_offset"), F.col("n")).alias("at"))
        .collect()
    )
    return {(r["topic"], r["partition"]): tuple(r["at"]) for r in rows}


def verify(spark: SparkSession, source: Side, target: Side) -> list[PartitionCheck]:
    """One check per partition that ``source.start`` names, in topic and partition order."""
    partitions = sorted((t, p) for t, parts in source.start.items() for p in parts)
    topics = sorted(source.start)
    # The target's topics may have more partitions than the source's: only the mirrored count.
    wanted = reduce(
        lambda a, b: a | b,
        [(F.col("topic") == t) & (F.col("partition") < len(source.start[t])) for t in topics],
    )
    s, t = _positions(spark, source, topics, wanted), _positions(spark, target, topics, wanted)
    got_s, got_t = _summaries(s), _summaries(t)
    checks = [
        PartitionCheck(topic, p, got_s.get((topic, p), EMPTY), got_t.get((topic, p), EMPTY))
        for topic, p in partitions
    ]
    if all(c.ok for c in checks):
        return checks
    differences = _first_differences(s, t)
    return [
        c
        if c.ok
        else PartitionCheck(
            c.topic, c.partition, c.source, c.target, differences.get((c.topic, c.partition))
        )
        for c in checks
    ]


__all__ = ["EMPTY", "PartitionCheck", "Side", "Summary", "verify"]
