"""Offsets per topic and partition, and the offset ranges Spark's tasks read: pure arithmetic,
no backend. Shapes follow Spark's Kafka connector: a streaming offset is the JSON
``{"topic": {"partition": next offset}}``, ``minPartitions`` splits big ranges in proportion to
their size, ``maxOffsetsPerTrigger`` is shared in proportion to each partition's backlog."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

# topic -> partition -> offset (the next one to read, or a range's end)
Offsets = dict[str, dict[int, int]]


@dataclass(frozen=True, slots=True, order=True)
class Span:
    """Offsets ``start`` (included) to ``end`` (excluded) of one partition."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def to_json(offsets: Offsets) -> dict[str, dict[str, int]]:
    """The form Spark keeps in the checkpoint: JSON object keys are strings."""
    return {
        t: {str(p): o for p, o in sorted(parts.items())} for t, parts in sorted(offsets.items())
    }


def from_json(data: Mapping[str, Mapping[str, int]]) -> Offsets:
    return {t: {int(p): int(o) for p, o in parts.items()} for t, parts in data.items()}


def spans(start: Offsets, end: Offsets) -> list[Span]:
    """The non-empty ranges from ``start`` to ``end`` (``start`` names every partition of
    ``end``), in topic and partition order."""
    return [
        Span(t, p, start[t][p], e)
        for t, parts in sorted(end.items())
        for p, e in sorted(parts.items())
        if e > start[t][p]
    ]


def split(ranges: Iterable[Span], min_partitions: int | None) -> list[Span]:
    """At least ``min_partitions`` ranges where there are enough offsets: each range is cut into
    ``round(size / total * min_partitions)`` (at least 1) nearly equal pieces, as Spark's
    ``KafkaOffsetRangeCalculator`` does; without the option, one range per partition."""
    ranges = [r for r in ranges if r.size > 0]
    if min_partitions is None or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    out: list[Span] = []
    for r in ranges:
        pieces = min(r.size, max(1, (2 * r.size * min_partitions + total) // (2 * total)))
        bounds = [r.start + r.size * i // pieces for i in range(pieces + 1)]
        out.extend(Span(r.topic, r.partition, a, b) for a, b in itertools.pairwise(bounds))
    return out


def limited(start: Offsets, latest: Offsets, max_rows: int) -> Offsets:
    """``latest``, moved back so that at most ``max_rows`` offsets lie after ``start``: each
    partition gets its share of ``max_rows`` in proportion to its backlog, the rounding left
    over going to the largest remainders (ties by topic and partition), so that the same
    inputs always give the same end and a replayed batch reads the same rows."""
    lag = {
        (t, p): e - start[t][p]
        for t, parts in latest.items()
        for p, e in parts.items()
        if e > start[t][p]
    }
    total = sum(lag.values())
    if total <= max_rows:
        return {t: dict(parts) for t, parts in latest.items()}
    quota = {k: max_rows * n // total for k, n in lag.items()}
    left = max_rows - sum(quota.values())
    by_remainder = sorted(lag, key=lambda k: (-(max_rows * lag[k] % total), k))
    for k in by_remainder[:left]:
        quota[k] += 1
    return {
        t: {p: start[t][p] + quota.get((t, p), 0) for p in parts} for t, parts in latest.items()
    }


__all__ = ["Offsets", "Span", "from_json", "limited", "spans", "split", "to_json"]
