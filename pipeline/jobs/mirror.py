"""``mirror``: copy topics from one URL to another (a RabbitMQ to the embedded log, Kafka to
Iggy...), each source partition into the same partition of a same-named target topic, then
verify per partition (``verify``).

Resumable: the copy is a streaming query (availableNow) whose checkpoint holds the source
offsets copied; a run goes on where the last one stopped, killed or not. Beside Spark's files
the checkpoint holds ``streamgate-mirror.json``, written before the first copy: where the
mirror began on each side (the source's earliest offsets, the target's next offsets), which
the verification needs and Spark does not keep. Missing target topics are created with the
source's partition count (and a missing stream with them); a target topic with fewer partitions
than its source is given the missing ones (CreatePartitions), so that every source partition is
copied into the same partition number.

A source that gained partitions since the last run (the streaming read takes a new partition
from its earliest offset) has them added to the target, and to the record (where the mirror
began on each side: the source's earliest offset, the target's next) before anything is copied.

A micro-batch replayed after a crash is stored once where the backend deduplicates (the
writer's ``dedup``: RabbitMQ, an embedded store); elsewhere (Kafka, Iggy) it may be stored
twice, and the verification then reports the partition.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace

from pyspark.sql import SparkSession

from gateway.backends.embedded import embedded_path
from gateway.client.session import redacted
from gateway.model import (
    DEFAULT_STREAM,
    CreatePartitions,
    CreateTopic,
    DescribeTopic,
    GatewayError,
    NotFound,
)

from ..endpoint import Endpoint
from ..errors import PipelineError
from ..offsets import Offsets, from_json, to_json
from ..options import DEFAULT_LOCK_TIMEOUT_MS, DEFAULT_TIMEOUT_MS, Connection
from ..planning import log_bounds
from ..portal import call
from .files import Files, committed_end
from .progress import Batches, watch
from .verify import PartitionCheck, Side, verify

RECORD = "streamgate-mirror.json"
COLUMNS = ("value", "key", "headers", "topic", "partition", "timestamp", "id")


@dataclass(frozen=True, slots=True)
class Mirror:
    url: str  # the source
    to: str  # the target
    topics: tuple[str, ...]
    checkpoint: str
    stream: str = DEFAULT_STREAM
    to_stream: str | None = None  # default: the source's stream
    max_offsets_per_trigger: int | None = None
    copy: bool = True  # False: verify only
    verify: bool = True

    @property
    def target_stream(self) -> str:
        return self.to_stream or self.stream


@dataclass(frozen=True, slots=True)
class Plan:
    """``streamgate-mirror.json``."""

    source: str
    target: str
    stream: str
    target_stream: str
    topics: tuple[str, ...]
    source_start: Offsets
    target_start: Offsets

    def dumps(self) -> str:
        return json.dumps(
            {
                "source": self.source,
                "target": self.target,
                "stream": self.stream,
                "target_stream": self.target_stream,
                "topics": list(self.topics),
                "source_start": to_json(self.source_start),
                "target_start": to_json(self.target_start),
            },
            indent=1,
        )

    @classmethod
    def loads(cls, text: str) -> Plan:
        data = json.loads(text)
        return cls(
            source=data["source"],
            target=data["target"],
            stream=data["stream"],
            target_stream=data["target_stream"],
            topics=tuple(data["topics"]),
            source_start=from_json(data["source_start"]),
            target_start=from_json(data["target_start"]),
        )


@dataclass(frozen=True, slots=True)
class MirrorRun:
    batches: Batches
    copied_to: Offsets  # the source offsets the checkpoint holds as copied
    checks: list[PartitionCheck] | None  # None: not verified

    @property
    def differing(self) -> list[PartitionCheck]:
        return [c for c in self.checks or () if not c.ok]


def _connection(url: str, stream: str) -> Connection:
    return Connection(url, stream, DEFAULT_TIMEOUT_MS / 1000, DEFAULT_LOCK_TIMEOUT_MS / 1000)


async def _source_start(topics: tuple[str, ...], endpoint: Endpoint) -> Offsets:
    earliest, _ = await log_bounds(endpoint, topics)
    return earliest


async def _target_start(counts: dict[str, int], known: Offsets, endpoint: Endpoint) -> Offsets:
    """Each target topic made ready: created if missing, grown if it has fewer partitions than
    the source (``counts``); the next offset of each partition the mirror writes that ``known``
    does not name yet."""
    for name, count in counts.items():
        topic = endpoint.topic(name)
        try:
            have = (await endpoint.backend.describe_topic(DescribeTopic(topic=topic))).info
        except NotFound:
            create = CreateTopic(topic=topic, partitions=count, create_stream=True)
            await _change(
                endpoint, endpoint.backend.create_topic(create), f"creating topic {name!r}"
            )
            continue
        except GatewayError as exc:
            raise PipelineError(f"{endpoint.shown}: topic {name!r}: {exc.message}") from None
        if have.partition_count < count:
            grow = CreatePartitions(topic=topic, total=count)
            doing = f"adding partitions {have.partition_count}..{count - 1} to topic {name!r}"
            await _change(endpoint, endpoint.backend.create_partitions(grow), doing)
    _, latest = await log_bounds(endpoint, tuple(counts))
    return {
        t: {p: latest[t][p] for p in range(counts[t]) if p not in known.get(t, {})} for t in counts
    }


async def _change(endpoint: Endpoint, change: Awaitable[object], doing: str) -> None:
    try:
        await change
    except GatewayError as exc:
        raise PipelineError(f"{endpoint.shown}: {doing}: {exc.message}") from None


def _merged(a: Offsets, b: Offsets) -> Offsets:
    return {t: {**a.get(t, {}), **b.get(t, {})} for t in sorted({*a, *b})}


def _grown(files: Files, path: str, job: Mirror, record: Plan) -> Plan:
    """``record`` with the partitions the source gained since it was written: added to the
    target topics where they lack them, and their starts to the record (written back) before
    the copy reaches them."""
    now = call(_connection(job.url, job.stream), functools.partial(_source_start, job.topics))
    new = {
        t: {p: o for p, o in parts.items() if p not in record.source_start.get(t, {})}
        for t, parts in now.items()
    }
    if not any(new.values()):
        return record
    counts = {t: len(parts) for t, parts in now.items()}
    target_new = call(
        _connection(job.to, job.target_stream),
        functools.partial(_target_start, counts, record.target_start),
    )
    grown = replace(
        record,
        source_start=_merged(record.source_start, new),
        target_start=_merged(record.target_start, target_new),
    )
    files.write(path, grown.dumps())
    return grown


def plan(files: Files, job: Mirror) -> Plan:
    """The checkpoint's record, made (and the target prepared) on the first run, grown on a
    later one when the source has more partitions."""
    path = f"{job.checkpoint.rstrip('/')}/{RECORD}"
    text = files.read(path)
    if text is not None:
        found = Plan.loads(text)
        asked = (redacted(job.url), redacted(job.to), job.stream, job.target_stream, job.topics)
        had = (found.source, found.target, found.stream, found.target_stream, found.topics)
        if asked != had:
            raise PipelineError(
                f"checkpoint {job.checkpoint} is of a mirror of {','.join(found.topics)} from "
                f"{found.source} (stream {found.stream}) to {found.target} (stream "
                f"{found.target_stream}); use another --checkpoint for another mirror"
            )
        return _grown(files, path, job, found) if job.copy else found
    if not job.copy:
        raise PipelineError(f"nothing to verify: no mirror ran with checkpoint {job.checkpoint}")
    if job.to.partition(":")[0].lower() == "embedded":
        os.makedirs(embedded_path(job.to), exist_ok=True)  # a new mirror's store
    source_start = call(
        _connection(job.url, job.stream), functools.partial(_source_start, job.topics)
    )
    counts = {t: len(parts) for t, parts in source_start.items()}
    target_start = call(
        _connection(job.to, job.target_stream), functools.partial(_target_start, counts, {})
    )
    made = Plan(
        redacted(job.url),
        redacted(job.to),
        job.stream,
        job.target_stream,
        job.topics,
        source_start,
        target_start,
    )
    files.write(path, made.dumps())
    return made


def copy(
    spark: SparkSession,
    job: Mirror,
    record: Plan,
    report: Callable[[int, int], None] | None = None,
    stop: Callable[[], bool] | None = None,
) -> Batches:
    reader = (
        spark.readStream.format("streamgate")
        .option("url", job.url)
        .option("stream", job.stream)
        .option("topic", ",".join(job.topics))
        .option("startingOffsets", json.dumps(to_json(record.source_start)))
        .option("includeHeaders", "true")
    )
    if job.max_offsets_per_trigger is not None:
        reader = reader.option("maxOffsetsPerTrigger", str(job.max_offsets_per_trigger))
    query = (
        reader.load()
        .select(*COLUMNS)
        .writeStream.format("streamgate")
        .option("url", job.to)
        .option("stream", job.target_stream)
        .option("checkpointLocation", job.checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    return watch(query, report, stop)


def mirror(
    spark: SparkSession,
    job: Mirror,
    report: Callable[[int, int], None] | None = None,
    stop: Callable[[], bool] | None = None,
) -> MirrorRun:
    files = Files(spark)
    record = plan(files, job)
    batches = copy(spark, job, record, report, stop) if job.copy else Batches()
    committed = committed_end(files, job.checkpoint)
    copied_to = record.source_start if committed is None else committed[1]
    if not job.verify or (stop is not None and stop()):
        return MirrorRun(batches, copied_to, None)
    # A partition the copy has not reached yet (none of its offsets in the checkpoint): nothing
    # copied, rather than endingOffsets' default of latest.
    end = {
        t: {p: copied_to.get(t, {}).get(p, start) for p, start in parts.items()}
        for t, parts in record.source_start.items()
    }
    source = Side(job.url, job.stream, record.source_start, end)
    target = Side(job.to, job.target_stream, record.target_start, None)
    return MirrorRun(batches, copied_to, verify(spark, source, target))


__all__ = ["COLUMNS", "RECORD", "Mirror", "MirrorRun", "Plan", "copy", "mirror", "plan"]
