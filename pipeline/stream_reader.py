"""Streaming reads (``spark.readStream.format("streamgate")``): micro-batches between offsets
per topic and partition, as Spark's Kafka source.

Spark keeps each batch's end offsets in the query's checkpoint before it runs the batch, and a
restarted query replays an unfinished batch from the offsets it logged: so ``partitions`` must
give the same ranges for the same offsets, and does (no backend call; ``limited`` is
deterministic). ``commit`` is not an acknowledgement to the broker: Spark calls it one batch late
(../shared/notes/pyspark.md), and the checkpoint is the truth.

A partition that appears while the query runs (a topic grown, a topic added to ``topic`` on a
restart) enters the offsets at its earliest offset in the batch that finds it, and is read from
there in the next batch, so a batch's ranges never depend on a lookup made when it is planned.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from .endpoint import Endpoint
from .offsets import Offsets, from_json, limited, spans, split, to_json
from .options import ReadOptions
from .planning import log_bounds, starting_offsets
from .portal import call
from .reader import OffsetRange, read_span
from .rows import ArrowRows


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: ReadOptions, schema: StructType) -> None:
        self.options = options
        self.rows = ArrowRows(schema)
        self._target: tuple[Offsets, Offsets] | None = None  # availableNow: (earliest, end)
        self._latest: Offsets | None = None

    def initialOffset(self) -> dict[str, dict[str, int]]:
        """``startingOffsets`` (default latest) or ``startingTimestamp``, resolved now."""
        return to_json(call(self.options.connection, functools.partial(_initial, self.options)))

    def prepareForTriggerAvailableNow(self) -> None:
        """Freeze the end: an availableNow query reads what is there now, and stops."""
        self._target = self._bounds()

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.options.max_offsets_per_trigger
        return ReadAllAvailable() if n is None else ReadMaxRows(n)

    def latestOffset(
        self, start: dict[str, dict[str, int]], limit: ReadLimit
    ) -> dict[str, dict[str, int]]:
        earliest, latest = self._target if self._target is not None else self._bounds()
        self._latest = latest
        begin = from_json(start)
        known: Offsets = {}
        end: Offsets = {}
        for t, parts in latest.items():
            known[t], end[t] = {}, {}
            for p, last in parts.items():
                if p in begin.get(t, {}):
                    known[t][p] = begin[t][p]
                    end[t][p] = max(last, begin[t][p])  # never back (a purged partition)
                else:
                    end[t][p] = earliest[t][p]  # new: enters the offsets, read next batch
        if isinstance(limit, ReadMaxRows):
            limited_end = limited(
                known,
                {t: {p: end[t][p] for p in parts} for t, parts in known.items()},
                limit.max_rows,
            )
            for t, parts in limited_end.items():
                end[t].update(parts)
        return to_json(end)

    def reportLatestOffset(self) -> dict[str, dict[str, int]] | None:
        return None if self._latest is None else to_json(self._latest)

    def partitions(
        self, start: dict[str, dict[str, int]], end: dict[str, dict[str, int]]
    ) -> list[InputPartition]:
        begin, stop = from_json(start), from_json(end)
        # a partition ``start`` lacks entered the offsets in this batch: nothing to read yet
        full = {
            t: {p: begin.get(t, {}).get(p, e) for p, e in parts.items()}
            for t, parts in stop.items()
        }
        return [OffsetRange(s) for s in split(spans(full, stop), self.options.min_partitions)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, OffsetRange)
        yield from read_span(self.options.connection, partition.span, self.rows)

    def commit(self, end: dict[str, dict[str, int]]) -> None:
        """Nothing to acknowledge: the query's position lives in its checkpoint."""

    def _bounds(self) -> tuple[Offsets, Offsets]:
        bounds = functools.partial(log_bounds, topics=self.options.topics)
        return call(self.options.connection, bounds)


async def _initial(options: ReadOptions, endpoint: Endpoint) -> Offsets:
    earliest, latest = await log_bounds(endpoint, options.topics)
    return await starting_offsets(endpoint, options, earliest, latest)


__all__ = ["StreamReader"]
