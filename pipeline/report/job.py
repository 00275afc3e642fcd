"""``report``: the gateway's traffic and latency from its access log, as Parquet, PNG charts and
one HTML page, all in one output directory.

Spark reads and aggregates the log (the files may be big, on HDFS or S3 for a cluster); the
aggregates are small (a row per protocol, command, outcome and minute), so the driver collects
them as Arrow and writes every output itself. The output is therefore a local directory on
the driver whatever the master: Spark's own Parquet writer would leave a cluster's files on
its executors' disks, out of the page's reach."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Final
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pipeline.errors import PipelineError

from .aggregate import by_minute, errors, read_log, summary
from .charts import CHARTS, draw_all
from .inputs import access_log_files, spark_paths
from .page import BadLine, Page, render

BAD_SAMPLES: Final = 5
PAGE: Final = "index.html"
# <name>.parquet: what it holds
TABLES: Final[Mapping[str, Callable[[DataFrame], DataFrame]]] = {
    "by_minute": by_minute,
    "summary": summary,
    "errors": errors,
}


@dataclass(frozen=True, slots=True)
class Report:
    inputs: tuple[str, ...]  # paths as access_log.path names them, globs, or URIs
    output: str  # a local directory, made when missing; what this writes there is replaced


@dataclass(frozen=True, slots=True)
class ReportRun:
    files: tuple[str, ...]
    lines: int
    bad: int
    bad_samples: tuple[BadLine, ...]
    first: datetime | None
    last: datetime | None
    tables: tuple[Path, ...]
    charts: tuple[Path, ...]
    page: Path

    @property
    def commands(self) -> int:
        return self.lines - self.bad


def prepare(job: Report) -> tuple[list[str], Path]:
    """The files to read and the output directory (made): what can fail before Spark starts."""
    return access_log_files(job.inputs), _output(job.output)


def report(spark: SparkSession, job: Report) -> ReportRun:
    files, output = prepare(job)
    lines = read_log(spark, spark_paths(files)).persist()  # parsed once, counted and aggregated
    try:
        totals = lines.agg(
            F.count(F.lit(1)).alias("lines"),
            F.coalesce(F.sum(F.col("bad").cast("long")), F.lit(0)).alias("bad"),
            F.min(F.when(~F.col("bad"), F.unix_seconds("minute"))).alias("first"),
            F.max(F.when(~F.col("bad"), F.unix_seconds("minute"))).alias("last"),
        ).first()
        assert totals is not None  # an aggregate without grouping has one row
        samples = tuple(
            BadLine(_local(r["file"]), r["raw"] or "")
            for r in lines.where("bad").select("file", "raw").limit(BAD_SAMPLES).collect()
        )
        good = lines.where(~F.col("bad"))
        tables = {name: _collect(aggregate(good)) for name, aggregate in TABLES.items()}
    finally:
        lines.unpersist()
    written = tuple(_write_table(t, output / f"{name}.parquet") for name, t in tables.items())
    minutes = tables["by_minute"].to_pylist()
    try:
        charts = tuple(draw_all(minutes, output))
    except OSError as exc:
        raise PipelineError(f"cannot write the charts in {output}: {exc.strerror or exc}") from None
    run = ReportRun(
        files=tuple(files),
        lines=int(totals["lines"]),
        bad=int(totals["bad"]),
        bad_samples=samples,
        first=_time(totals["first"]),
        last=_time(totals["last"]),
        tables=written,
        charts=charts,
        page=output / PAGE,
    )
    page = Page(
        generated=datetime.now(UTC),
        files=run.files,
        lines=run.lines,
        bad=run.bad,
        bad_samples=run.bad_samples,
        first=run.first,
        last=run.last,
        summary=tables["summary"].to_pylist(),
        errors=tables["errors"].to_pylist(),
        charts=CHARTS,
        tables=[p.name for p in written],
    )
    _write_text(run.page, render(page))
    return run


def _output(given: str) -> Path:
    if "://" in given and not given.startswith("file://"):
        raise PipelineError(
            f"--output {given}: must be a local directory (the driver writes the report there)"
        )
    path = Path(given.removeprefix("file://"))
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PipelineError(f"cannot create {path}: {exc.strerror or exc}") from None
    return path


def _collect(df: DataFrame) -> pa.Table:
    """The rows as Arrow, every timestamp in UTC (Spark hands them in the session's zone)."""
    table = df.toArrow()
    fields = [
        pa.field(f.name, pa.timestamp("us", tz="UTC"), f.nullable)
        if pa.types.is_timestamp(f.type)
        else f
        for f in table.schema
    ]
    return table.cast(pa.schema(fields))


def _write_table(table: pa.Table, path: Path) -> Path:
    part = path.with_name(f".{path.name}.tmp")  # a reader never sees half a file
    try:
        pq.write_table(table, part)
        os.replace(part, path)
    except OSError as exc:
        raise PipelineError(f"cannot write {path}: {exc.strerror or exc}") from None
    return path


def _write_text(path: Path, text: str) -> None:
    part = path.with_name(f".{path.name}.tmp")
    try:
        part.write_text(text, encoding="utf-8")
        os.replace(part, path)
    except OSError as exc:
        raise PipelineError(f"cannot write {path}: {exc.strerror or exc}") from None


def _time(unix_s: int | None) -> datetime | None:
    return None if unix_s is None else datetime.fromtimestamp(unix_s, UTC)


def _local(file: str) -> str:
    """A file as Spark names it (``file:/tmp/a%5B1%5D``), as the user gave it (``/tmp/a[1]``)."""
    url = urlparse(file)
    return unquote(url.path) if url.scheme == "file" else file


__all__ = ["PAGE", "TABLES", "Report", "ReportRun", "prepare", "report"]
