"""``archive``: topics to Parquet, partitioned by topic and date (UTC, from each message's
timestamp), exactly once through the streaming checkpoint.

Spark's file sink writes each micro-batch's files, then records them in ``_spark_metadata``
under the batch's id; the checkpoint records the batch's end offsets before it runs and its
commit after. A run killed anywhere is replayed from the checkpoint, and files of a batch
that was not recorded are not part of the table: read the archive with Spark
(``spark.read.parquet(output)``), which reads through ``_spark_metadata``. A reader that lists
the directory instead (pyarrow, DuckDB) may see such leftovers of a killed run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from gateway.model import DEFAULT_STREAM

from .progress import Batches, watch

# UTC day of the timestamp, whatever the session's time zone (to_date would use that).
DATE = "date_from_unix_date(cast(floor(unix_micros(timestamp) / 86400000000) as int))"
DEFAULT_INTERVAL_S = 10.0


@dataclass(frozen=True, slots=True)
class Archive:
    url: str
    topics: tuple[str, ...]
    output: str
    checkpoint: str | None = None  # default: <output>/_checkpoint (Spark skips _ names)
    stream: str = DEFAULT_STREAM
    starting_offsets: str = "earliest"  # of the first run only; then the checkpoint's
    max_offsets_per_trigger: int | None = None
    follow: bool = False  # a continuous query, a micro-batch every interval_s
    interval_s: float = DEFAULT_INTERVAL_S

    @property
    def checkpoint_location(self) -> str:
        return self.checkpoint or f"{self.output.rstrip('/')}/_checkpoint"


def rows(spark: SparkSession, job: Archive) -> DataFrame:
    """What the archive stores: every column of the source (headers included), plus ``date``."""
    reader = (
        spark.readStream.format("streamgate")
        .option("url", job.url)
        .option("stream", job.stream)
        .option("topic", ",".join(job.topics))
        .option("startingOffsets", job.starting_offsets)
        .option("includeHeaders", "true")
    )
    if job.max_offsets_per_trigger is not None:
        reader = reader.option("maxOffsetsPerTrigger", str(job.max_offsets_per_trigger))
    return reader.load().withColumn("date", F.expr(DATE))


def archive(
    spark: SparkSession,
    job: Archive,
    report: Callable[[int, int], None] | None = None,
    stop: Callable[[], bool] | None = None,
) -> Batches:
    """Run the archive: what is there now (availableNow), or until ``stop()`` with ``follow``.
    The micro-batches that read rows, each reported as it completes."""
    writer = (
        rows(spark, job)
        .writeStream.format("parquet")
        .option("path", job.output)
        .option("checkpointLocation", job.checkpoint_location)
        .partitionBy("topic", "date")
    )
    if job.follow:
        writer = writer.trigger(processingTime=f"{job.interval_s:g} seconds")
    else:
        writer = writer.trigger(availableNow=True)
    return watch(writer.start(), report, stop)


__all__ = ["DATE", "DEFAULT_INTERVAL_S", "Archive", "archive", "rows"]
