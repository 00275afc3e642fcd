"""``report``'s command line: ``main(argv)`` for ``streamgate pipeline report``, ``python -m
pipeline.report`` and ``spark-submit pipeline/report/__main__.py``; ``add_arguments`` and
``run`` for a dispatcher that builds one parser for every job.

Exit status: 0 done (bad lines are counted and shown, not a failure); 1 failed, one line on
stderr says why (a missing or unreadable input, an output that cannot be written, Spark's
error); 2 bad arguments."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Final

from py4j.protocol import Py4JError  # type: ignore[import-untyped]
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from pipeline.errors import PipelineError
from pipeline.jobs.session import SessionSettings, job_session, spark_arguments

from .job import Report, ReportRun, prepare, report

PROG: Final = "streamgate pipeline report"
EXIT_FAILED: Final = 1


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = (
        "The gateway's traffic and latency from its access log (access_log.path): per "
        "protocol, command, outcome and minute, the commands, messages, bytes and p50/p95/p99 "
        "durations, as Parquet, PNG charts and index.html in --output."
    )
    p.add_argument(
        "--input",
        action="append",
        required=True,
        metavar="PATH",
        help="an access log as access_log.path names it (its rotated files PATH.1.. and the "
        "workers' files come with it), a glob ('logs/access*'), or an hdfs:// s3a:// ... URI "
        "(repeatable)",
    )
    p.add_argument(
        "--output", required=True, help="the report's directory (local, made when missing)"
    )
    spark_arguments(p, ship=False)  # Spark SQL only: executors need none of this code


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG)
    add_arguments(p)
    return p


def run(args: argparse.Namespace) -> int:
    """The job for parsed arguments. A SparkSession this process already runs is used and left
    running (--master and --conf then do not apply); otherwise one is started and stopped."""
    job = Report(inputs=tuple(args.input), output=args.output)
    try:
        prepare(job)  # a missing input fails in a moment, not after Spark's start
        spark = SparkSession.getActiveSession()
        if spark is not None:
            done = report(spark, job)
        else:
            settings = SessionSettings(args.master, tuple(args.conf), False, args.log_level)
            # No code to ship: the job is Spark SQL only, no Python runs on the executors.
            spark, _ = job_session("streamgate-report", settings)
            try:
                done = report(spark, job)
            finally:
                spark.stop()
    except PipelineError as exc:
        return _fail(str(exc))
    except (PySparkException, Py4JError) as exc:
        lines = [line for line in str(exc).strip().splitlines() if line.strip()]
        return _fail(lines[0] if lines else type(exc).__name__)
    _show(done)
    return 0


def _show(done: ReportRun) -> None:
    bad = f", {done.bad} bad lines left out" if done.bad else ""
    print(f"report: {done.commands} commands from {len(done.files)} files{bad}", flush=True)
    for sample in done.bad_samples[:1]:
        print(f"report: a bad line, in {sample.file}: {sample.text[:120]!r}", flush=True)
    print(f"report: wrote {done.page}", flush=True)


def _fail(why: str) -> int:
    print(f"{PROG}: {why}", file=sys.stderr, flush=True)
    return EXIT_FAILED


def main(argv: Sequence[str] | None = None) -> int:
    return run(parser().parse_args(argv))


__all__ = ["EXIT_FAILED", "PROG", "add_arguments", "main", "parser", "run"]
