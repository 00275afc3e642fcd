"""Following a streaming query from the driver: its micro-batches as they complete (Spark's
progress, polled), until it ends, fails (its error raised here) or is asked to stop."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from pyspark.sql.streaming.query import StreamingQuery

POLL_S: Final = 1  # s: how often the progress is looked at, and a stop request noticed


@dataclass(slots=True)
class Batches:
    """The micro-batches of one run that read rows: batch id -> rows."""

    rows: dict[int, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.rows.values())


def watch(
    query: StreamingQuery,
    report: Callable[[int, int], None] | None = None,
    stop: Callable[[], bool] | None = None,
) -> Batches:
    """Wait for ``query`` to end; ``report(batch, rows)`` for each batch that read rows.
    ``stop()`` true: the query is stopped (the batch running is abandoned, and replayed by the
    next run from the checkpoint). A failed query's exception is raised."""
    seen = Batches()
    while True:
        ended = query.awaitTermination(POLL_S)
        # Spark keeps the last 100 progress reports; at one poll per POLL_S none is missed
        # unless micro-batches take less than 10 ms.
        for progress in query.recentProgress:
            batch, rows = int(progress["batchId"]), int(progress["numInputRows"])
            if rows and batch not in seen.rows:
                seen.rows[batch] = rows
                if report is not None:
                    report(batch, rows)
        if ended:
            return seen
        if stop is not None and stop():
            query.stop()
            query.awaitTermination()
            return seen


__all__ = ["POLL_S", "Batches", "watch"]
