"""``streamgate bench spark``: how fast the ``streamgate`` source reads, next to the plain
consumer on the same data, in one run. Not a test: it reports numbers.

It fills a topic (``--messages`` of ``--size`` bytes over ``--partitions``) in an embedded store
in a temporary directory, then measures, on that same data:

* ``streamgate consume`` (a child process, every value to a pipe this process counts);
* ``spark.read.format("streamgate")...load().count()``: every message read into Arrow and
  handed to Spark;
* ``archive`` (availableNow) of the topic into Parquet.

``--via embedded`` (the default) reads the store directly: Spark's tasks take turns on it (one
owner process at a time, endpoint.py). ``--via gateway`` serves the store with ``streamgate run``
and reads through its Kafka listener, Spark's tasks in parallel; ``--via both`` does both.
Spark's session start and the first (warm-up) read are reported apart, not in the rates.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Final

import trio
from pyspark.sql import DataFrameReader, SparkSession

from gateway.backends.embedded import open_embedded
from gateway.bench.kafka import gateway_process
from gateway.model import Append, CreateTopic, Message, MessageBatch, Topic

from .jobs.archive import Archive, archive
from .jobs.session import SessionSettings, job_session

TOPIC: Final = "bench"
_APPEND_BATCH: Final = 1000
_CONSUME_LIMIT_S: Final = 600.0


@dataclass(frozen=True, slots=True)
class Figure:
    what: str  # "<measure> (<via>)"
    rows: int
    seconds: float
    size: int

    @property
    def rate(self) -> float:
        return self.rows / self.seconds

    @property
    def via(self) -> str:
        return self.what.rpartition("(")[2].rstrip(")")

    def line(self) -> str:
        return (
            f"{self.what:<44} {self.rows:>10,} {self.seconds:>8.2f} {self.rate:>12,.0f} "
            f"{self.rate * self.size / 1e6:>8.1f}"
        )


HEADER: Final = f"{'':<44} {'rows':>10} {'seconds':>8} {'rows/s':>12} {'MB/s':>8}"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--messages", type=int, default=1_000_000, help="messages (default 1000000)")
    p.add_argument("--size", type=int, default=100, help="bytes per message value (default 100)")
    p.add_argument("--partitions", type=int, default=2, help="partitions of the topic (default 2)")
    p.add_argument(
        "--via",
        choices=("embedded", "gateway", "both"),
        default="embedded",
        help="read the store directly, through a streamgate's Kafka listener, or both",
    )
    p.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    p.add_argument("--dir", default=None, help="where the temporary store goes (default: /tmp)")


def _value(i: int, size: int) -> bytes:
    """``size`` bytes, no newline (``consume`` prints one value per line)."""
    head = b"m%d-" % i
    return (head + b"x" * size)[:size]


def held(args: argparse.Namespace) -> list[int]:
    """How many messages each partition gets from ``_fill``."""
    counts = [0] * args.partitions
    for first in range(0, args.messages, _APPEND_BATCH):
        counts[(first // _APPEND_BATCH) % args.partitions] += min(
            _APPEND_BATCH, args.messages - first
        )
    return counts


async def _fill(directory: Path, messages: int, size: int, partitions: int) -> None:
    topic = Topic("default", TOPIC)
    async with open_embedded(directory, fsync="never") as backend:
        await backend.create_topic(CreateTopic(topic=topic, partitions=partitions))
        for first in range(0, messages, _APPEND_BATCH):
            batch = [
                Message(value=_value(i, size))
                for i in range(first, min(messages, first + _APPEND_BATCH))
            ]
            partition = (first // _APPEND_BATCH) % partitions
            await backend.append(
                Append(topic=topic, partition=partition, batch=MessageBatch(batch))
            )


def _count_lines(stream: IO[bytes], into: list[int]) -> None:
    n = 0
    while chunk := stream.read(1 << 20):
        n += chunk.count(b"\n")
    into.append(n)


def consume(url: str, messages: int, size: int, via: str) -> Figure:
    """``streamgate consume TOPIC --url URL`` to the end, its output counted."""
    argv = [
        sys.executable,
        "-m",
        "gateway.cli",
        "consume",
        TOPIC,
        "--url",
        url,
        "--from",
        "earliest",
    ]
    counted: list[int] = []
    start = time.perf_counter()
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL) as child:
        assert child.stdout is not None
        reader = threading.Thread(target=_count_lines, args=(child.stdout, counted))
        reader.start()
        code = child.wait(_CONSUME_LIMIT_S)
        reader.join()
    seconds = time.perf_counter() - start
    if code != 0 or counted != [messages]:
        raise RuntimeError(f"streamgate consume exited {code} after {counted} of {messages} lines")
    return Figure(f"streamgate consume ({via})", messages, seconds, size)


def _endpoints(directory: Path, via: str) -> Generator[tuple[str, str]]:
    """(label, URL) of each way to read the store, one after the other: the store has one
    owner, so the gateway serving it runs only while it is measured."""
    if via in ("embedded", "both"):
        yield "embedded", f"embedded:{directory}"
    if via in ("gateway", "both"):
        with gateway_process(str(directory), "never") as child:
            yield "gateway Kafka listener", f"kafka://{child.address}"


def _measure(
    spark: SparkSession, via: str, url: str, args: argparse.Namespace, out: Path
) -> Iterator[Figure]:
    """consume, count() and archive of the topic at ``url``, each as it is measured."""
    yield consume(url, args.messages, args.size, via)

    def read() -> DataFrameReader:  # a new one each time: option() changes the reader
        return spark.read.format("streamgate").option("url", url).option("topic", TOPIC)

    started = time.perf_counter()
    first = {TOPIC: {str(p): min(1000, n) for p, n in enumerate(held(args))}}
    read().option("endingOffsets", json.dumps(first)).load().count()
    print(f"warm-up read ({via}): {time.perf_counter() - started:.1f} s", flush=True)
    started = time.perf_counter()
    counted = read().load().count()
    seconds = time.perf_counter() - started
    if counted != args.messages:
        raise RuntimeError(f"count() gave {counted}, not {args.messages}")
    yield Figure(f"spark read count() ({via})", counted, seconds, args.size)
    started = time.perf_counter()
    done = archive(spark, Archive(url=url, topics=(TOPIC,), output=str(out)))
    seconds = time.perf_counter() - started
    if done.total != args.messages:
        raise RuntimeError(f"archive read {done.total}, not {args.messages}")
    yield Figure(f"archive to Parquet ({via})", done.total, seconds, args.size)


def _table(figures: list[Figure]) -> str:
    lines = ["", HEADER, *(f.line() for f in figures)]
    consumed = {f.via: f.rate for f in figures if f.what.startswith("streamgate consume")}
    for f in figures:
        if f.what.startswith("spark read") and f.via in consumed:
            lines.append(f"spark read / consume ({f.via}): {f.rate / consumed[f.via]:.0%}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="streamgate-bench-spark-") as tmp:
        store = Path(tmp) / "data"
        started = time.perf_counter()
        trio.run(_fill, store, args.messages, args.size, args.partitions)
        took = time.perf_counter() - started
        print(f"filled {args.messages:,} messages of {args.size} B in {args.partitions} "
              f"partitions in {took:.1f} s", flush=True)  # fmt: skip
        started = time.perf_counter()
        spark, _ = job_session("streamgate-bench", SessionSettings(master=args.master))
        took = time.perf_counter() - started
        context = spark.sparkContext
        print(f"Spark session ({context.master}, parallelism {context.defaultParallelism}) "
              f"started in {took:.1f} s", flush=True)  # fmt: skip
        figures: list[Figure] = []
        try:
            with contextlib.closing(_endpoints(store, args.via)) as endpoints:
                for via, url in endpoints:
                    out = Path(tmp) / f"archive-{len(figures)}"
                    for figure in _measure(spark, via, url, args, out):
                        print(figure.line(), flush=True)
                        figures.append(figure)
        finally:
            spark.stop()
    print(_table(figures), flush=True)
    return 0


__all__ = ["Figure", "add_arguments", "consume", "run"]
