"""``streamgate pipeline``: the Spark jobs (``archive``, ``mirror``) on local Spark or any master,
the files ``spark-submit`` takes to run them on a cluster (``package``), and ``streamgate bench
spark``. Run as ``python -m pipeline``: gateway/cli.py hands over to it in a new process image.

Exit status: 0 done; 1 the job failed (one line on stderr says why); 2 bad arguments; 3 the
mirror's verification found partitions that differ (named on stdout); 130 interrupted."""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import signal
import sys
import types
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Final

from py4j.protocol import Py4JError  # type: ignore[import-untyped]
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from . import bench
from .errors import PipelineError
from .jobs.archive import DEFAULT_INTERVAL_S, Archive, archive
from .jobs.mirror import Mirror, mirror
from .jobs.session import SessionSettings, job_session, spark_arguments
from .jobs.ship import write_package
from .report import cli as report_cli

PROG: Final = "streamgate pipeline"
DEFAULT_URL: Final = "embedded:./data"  # as the client commands'
EXIT_FAILED: Final = 1
EXIT_DIFFERS: Final = 3
EXIT_INTERRUPTED: Final = 130
# The data source's own errors, inside the text of Spark's (a Python traceback in a JVM one).
_OWN: Final = re.compile(r"\b(?:OptionError|PipelineError): (.+)")


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"want a whole number, not {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _source(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--url",
        default=os.environ.get("STREAMGATE_URL", DEFAULT_URL),
        help="where the topics are: embedded:DIR | kafka://host:9092 | iggy://user:pass@host:8090 "
        "| rabbitmq-stream://user:pass@host:5552/%%2F, or a streamgate's listener (default: env "
        f"STREAMGATE_URL, else {DEFAULT_URL})",
    )
    p.add_argument("--topic", required=True, help="topic, or a comma list of topics")
    p.add_argument("--stream", default="default", help="their stream (default: default)")
    p.add_argument(
        "--max-offsets-per-trigger",
        type=_positive,
        default=None,
        metavar="N",
        help="messages per micro-batch at most, over all partitions (default: no limit)",
    )


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Spark jobs on streamgate's data source: archive topics to Parquet, mirror "
        "them to another URL, report a gateway's access log; package what spark-submit takes "
        "to run them on a cluster.",
        epilog="Exit status: 0 done, 1 failed, 2 bad arguments, 3 mirror found a difference, "
        "130 interrupted.",
    )
    sub = p.add_subparsers(dest="job", required=True, metavar="{archive,mirror,report,package}")
    a = sub.add_parser(
        "archive",
        help="topics to Parquet, partitioned by topic and date, exactly once",
        description="Copy topics into Parquet files under --output, in directories "
        "topic=<name>/date=<UTC day>, exactly once through the checkpoint: each run goes on where "
        "the last one stopped. Reads what is there and stops (availableNow), or runs on with "
        "--follow. Read the archive with Spark: spark.read.parquet(OUTPUT).",
    )
    _source(a)
    a.add_argument("--output", required=True, help="the archive's directory (or any Spark path)")
    a.add_argument("--checkpoint", default=None, help="default: OUTPUT/_checkpoint")
    a.add_argument(
        "--starting-offsets",
        default="earliest",
        metavar="WHERE",
        help="where the first run begins: earliest (default), latest, or JSON per partition "
        "as the source's startingOffsets; later runs go on from the checkpoint",
    )
    a.add_argument("--follow", action="store_true", help="keep archiving until stopped (SIGTERM)")
    a.add_argument(
        "--interval",
        type=float,
        default=DEFAULT_INTERVAL_S,
        metavar="SECONDS",
        help=f"with --follow: a micro-batch every SECONDS (default {DEFAULT_INTERVAL_S:g})",
    )
    spark_arguments(a)
    m = sub.add_parser(
        "mirror",
        help="copy topics to another URL, resumable, then verify each partition",
        description="Copy topics from --url to --to, each partition into the same partition "
        "of a same-named topic (created when missing, given the partitions it lacks), "
        "resumable through --checkpoint; then compare every partition's count and checksum "
        "of values on both sides. Exit status 3 when a partition differs.",
    )
    _source(m)
    m.add_argument("--to", required=True, help="the target URL (any the source takes)")
    m.add_argument("--to-stream", default=None, help="the target's stream (default: --stream)")
    m.add_argument("--checkpoint", required=True, help="the mirror's checkpoint directory")
    only = m.add_mutually_exclusive_group()
    only.add_argument("--no-verify", dest="verify", action="store_false", help="copy only")
    only.add_argument("--verify-only", dest="copy", action="store_false", help="verify only")
    spark_arguments(m)
    report_cli.add_arguments(
        sub.add_parser(
            "report",
            help="traffic and latency from a gateway's access log: Parquet, PNG charts, HTML",
        )
    )
    pk = sub.add_parser(
        "package",
        help="write streamgate.zip and streamgate_job.py for spark-submit",
        description="Write what spark-submit takes to run these jobs on a cluster: "
        "spark-submit --py-files DIR/streamgate.zip DIR/streamgate_job.py archive ...",
    )
    pk.add_argument("--out", default=".", help="directory to write them in (default: .)")
    bench.add_arguments(
        sub.add_parser("bench", prog="streamgate bench spark", help="(streamgate bench spark)")
    )
    return p


class _Stop:
    """The first SIGTERM or Ctrl-C asks the job to stop; a second Ctrl-C interrupts."""

    def __init__(self) -> None:
        self.asked = False

    def __call__(self) -> bool:
        return self.asked

    def install(self) -> None:
        signal.signal(signal.SIGTERM, self._handle)
        signal.signal(signal.SIGINT, self._handle)

    def _handle(self, signum: int, frame: types.FrameType | None) -> None:
        if self.asked and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.asked = True


def reason(exc: BaseException) -> str:
    """The line to show for a failure: the data source's own message when Spark's error
    carries one, else the first line of Spark's."""
    text = str(exc)
    found = _OWN.search(text)
    if found is not None:
        return found.group(1).strip()
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


def _say(text: str) -> None:
    print(text, flush=True)


def _archive(args: argparse.Namespace, settings: SessionSettings, stop: _Stop) -> int:
    job = Archive(
        url=args.url,
        topics=_topics(args.topic),
        output=args.output,
        checkpoint=args.checkpoint,
        stream=args.stream,
        starting_offsets=args.starting_offsets,
        max_offsets_per_trigger=args.max_offsets_per_trigger,
        follow=args.follow,
        interval_s=args.interval,
    )
    with _session("archive", settings) as spark:
        stop.install()
        done = archive(spark, job, lambda b, n: _say(f"archive: batch {b}: {n} rows"), stop)
    _say(
        f"archive: {done.total} rows in {len(done.rows)} batches to {job.output} "
        f"(checkpoint {job.checkpoint_location})"
    )
    return 0


def _mirror(args: argparse.Namespace, settings: SessionSettings, stop: _Stop) -> int:
    job = Mirror(
        url=args.url,
        to=args.to,
        topics=_topics(args.topic),
        checkpoint=args.checkpoint,
        stream=args.stream,
        to_stream=args.to_stream,
        max_offsets_per_trigger=args.max_offsets_per_trigger,
        copy=args.copy,
        verify=args.verify,
    )
    with _session("mirror", settings) as spark:
        stop.install()
        run = mirror(spark, job, lambda b, n: _say(f"mirror: batch {b}: {n} rows"), stop)
    if job.copy:
        _say(f"mirror: {run.batches.total} rows copied in {len(run.batches.rows)} batches")
    for check in run.checks or ():
        _say(check.show())
    if run.differing:
        names = ", ".join(f"{c.topic}/{c.partition}" for c in run.differing)
        of = len(run.checks or ())
        _say(f"mirror: verification FAILED for {len(run.differing)} of {of} partitions: {names}")
        return EXIT_DIFFERS
    if run.checks is not None:
        _say(f"mirror: verified {len(run.checks)} partitions")
    return 0


def _topics(text: str) -> tuple[str, ...]:
    return tuple(t.strip() for t in text.split(","))


@contextlib.contextmanager
def _session(job: str, settings: SessionSettings) -> Iterator[SparkSession]:
    """The job's session, stopped after it (and the zip it shipped removed)."""
    spark, shipped = job_session(f"streamgate-{job}", settings)
    try:
        if shipped is not None:
            _say(f"{job}: gateway, protocols and pipeline go to the executors as {shipped}")
        yield spark
    finally:
        spark.stop()
        if shipped is not None:
            shutil.rmtree(shipped.parent, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.job == "package":
        archive_zip, launcher = write_package(Path(args.out))
        _say(f"wrote {archive_zip} and {launcher}")
        _say(f"spark-submit --py-files {archive_zip} {launcher} archive --url ... --output ...")
        return 0
    if args.job == "bench":
        return bench.run(args)
    if args.job == "report":
        return report_cli.run(args)
    settings = SessionSettings(args.master, tuple(args.conf), args.ship, args.log_level)
    stop = _Stop()
    try:
        if args.job == "archive":
            return _archive(args, settings, stop)
        return _mirror(args, settings, stop)
    except PipelineError as exc:
        print(f"{PROG} {args.job}: {exc}", file=sys.stderr, flush=True)
    except (PySparkException, Py4JError) as exc:
        print(f"{PROG} {args.job}: {reason(exc)}", file=sys.stderr, flush=True)
    except KeyboardInterrupt:  # a second Ctrl-C (the first stops the query: _Stop)
        print(f"{PROG} {args.job}: interrupted", file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED
    return EXIT_FAILED


__all__ = ["EXIT_DIFFERS", "EXIT_FAILED", "PROG", "main", "parser", "reason"]
