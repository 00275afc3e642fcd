"""Reading with the ``streamgate`` source in the tests: one call per read, rows as plain tuples."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession


def load(spark: SparkSession, url: str, **options: object) -> DataFrame:
    reader = spark.read.format("streamgate").option("url", url)
    for name, value in options.items():
        reader = reader.option(name, str(value))
    return reader.load()


def positions(df: DataFrame) -> list[tuple[str, int, int, bytes]]:
    """(topic, partition, offset, value) of every row, sorted."""
    rows = df.select("topic", "partition", "offset", "value").collect()
    return sorted((r.topic, r.partition, r.offset, bytes(r.value)) for r in rows)


def expected(topic: str, ranges: dict[int, range]) -> list[tuple[str, int, int, bytes]]:
    """What ``positions`` gives for messages ``ranges`` of a topic filled by ``data.fill``."""
    return sorted(
        (topic, p, i, f"{topic}/{p}/{i}".encode()) for p, offsets in ranges.items() for i in offsets
    )
