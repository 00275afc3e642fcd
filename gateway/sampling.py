"""The metrics no request feeds, each sampled by a trio service on an interval: consumer-group
lag (``LagSampler``), the trio run loop (``sample_runtime``) and whether the backend answers
(``watch_backend``: ``streamgate_backend_up`` stays true to the backend whether or not anything
polls ``/readyz``).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Protocol, TypeVar

import structlog
import trio

from gateway.histograms import multiprocess
from gateway.metrics import Metrics, group_matches, topic_matches
from gateway.model import (
    Command,
    FetchOffset,
    GatewayError,
    ListGroups,
    ListTopics,
    Topic,
    TopicInfo,
    Unsupported,
)

log = structlog.get_logger("streamgate.sampling")
R = TypeVar("R")

RUNTIME_INTERVAL_S = 1.0
BACKEND_INTERVAL_S = 5.0
LAG_CONCURRENCY = 8  # backend queries of one lag sample in flight at once
MAX_SEEN = 10_000  # (group, topic) pairs learnt from commits; the oldest forgotten beyond


class Querier(Protocol):
    """What runs the sampler's commands: ``Router.query`` (not timed as a client's)."""

    async def query(self, cmd: Command[R]) -> R: ...


def _literal(pattern: str) -> bool:
    return not any(c in pattern for c in "*?[")


class LagSampler:
    """``streamgate_consumer_group_lag{group,stream,topic}`` for the groups and topics that
    ``metrics.lag_groups`` and ``metrics.lag_topics`` match: the end offset of each partition
    minus the group's committed offset (the NEXT one to read, DESIGN.md §3), summed over the
    partitions the group committed on. Which groups exist is learnt from the backend's (or the
    gateway's) group list, from the commits that pass through this gateway (``committed``, the
    router's hook: Iggy consumers and RabbitMQ Stream references are no listed group) and from
    the names in ``lag_groups`` that are no pattern."""

    def __init__(
        self,
        metrics: Metrics,
        *,
        groups: Sequence[str],
        topics: Sequence[str],
        interval_s: float,
    ) -> None:
        self.metrics = metrics
        self.groups = tuple(groups)
        self.topics = tuple(topics)
        self.interval_s = interval_s
        self._seen: dict[tuple[str, Topic], None] = {}  # an ordered set
        self._shown: set[tuple[str, str, str]] = set()

    def committed(self, group: str, topic: Topic) -> None:
        key = (group, topic)
        if key in self._seen:
            return
        if group_matches(self.groups, group) and topic_matches(self.topics, topic):
            if len(self._seen) >= MAX_SEEN:
                del self._seen[next(iter(self._seen))]
            self._seen[key] = None

    async def run(
        self, querier: Querier, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        task_status.started()
        while True:
            t0 = time.perf_counter()
            try:
                await self.sample(querier)
            except GatewayError as exc:
                # The backend is away: the last figures stay until it answers again.
                log.warning("consumer lag not sampled", error=str(exc))
            self.metrics.lag_sample_duration.set(time.perf_counter() - t0)
            await trio.sleep(self.interval_s)

    async def sample(self, querier: Querier) -> None:
        """One round: every (group, topic) pair found, its lag set, vanished pairs removed."""
        listed = await querier.query(ListTopics())
        topics = {i.topic: i for i in listed.topics if topic_matches(self.topics, i.topic)}
        groups = {g for g in self.groups if _literal(g)}
        groups.update(await self._listed_groups(querier))
        pairs = {(g, t) for g in groups for t in topics}
        pairs.update((g, t) for g, t in self._seen if t in topics)
        lags: dict[tuple[str, Topic], int] = {}
        limiter = trio.CapacityLimiter(LAG_CONCURRENCY)

        async def one(group: str, info: TopicInfo) -> None:
            async with limiter:
                lag = await _lag(querier, group, info)
            if lag is not None:
                lags[(group, info.topic)] = lag

        async with trio.open_nursery() as nursery:
            for group, topic in sorted(pairs, key=lambda p: (p[0], p[1].stream, p[1].name)):
                nursery.start_soon(one, group, topics[topic])
        self._show(lags)

    async def _listed_groups(self, querier: Querier) -> Iterable[str]:
        try:
            found = await querier.query(ListGroups())
        except Unsupported:
            return ()
        return (i.group for i in found.groups if group_matches(self.groups, i.group))

    def _show(self, lags: dict[tuple[str, Topic], int]) -> None:
        gauge = self.metrics.consumer_group_lag
        shown = set()
        for (group, topic), lag in lags.items():
            labels = (group, topic.stream, topic.name)
            gauge.labels(*labels).set(lag)
            shown.add(labels)
        for gone in self._shown - shown:
            if multiprocess():
                # prometheus_client cannot remove a series from the workers' shared files
                # (--workers): nothing left to read, until the worker restarts.
                gauge.labels(*gone).set(0)
                shown.add(gone)
            else:
                gauge.remove(*gone)
        self._shown = shown


async def _lag(querier: Querier, group: str, info: TopicInfo) -> int | None:
    """Messages the group has yet to read on the partitions it committed on; None when it
    committed on none (or the topic went away meanwhile)."""
    total: int | None = None
    for p in info.partitions:
        try:
            found = await querier.query(
                FetchOffset(group=group, topic=info.topic, partition=p.partition)
            )
        except GatewayError as exc:
            if exc.error_type == "not_found":
                return None
            raise
        if found.offset is not None:
            total = (total or 0) + max(0, p.next_offset - found.offset)
    return total


async def sample_runtime(
    metrics: Metrics,
    *,
    interval_s: float = RUNTIME_INTERVAL_S,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """The trio gauges, and how late this task wakes from each sleep (the scheduling delay)."""
    limiter = trio.to_thread.current_default_thread_limiter()
    task_status.started()
    while True:
        stats = trio.lowlevel.current_statistics()
        metrics.trio_tasks.set(stats.tasks_living)
        metrics.trio_tasks_runnable.set(stats.tasks_runnable)
        threads = limiter.statistics()
        metrics.trio_threads_busy.set(threads.borrowed_tokens)
        metrics.trio_threads_limit.set(threads.total_tokens)
        metrics.trio_threads_waiting.set(threads.tasks_waiting)
        slept = trio.current_time()
        await trio.sleep(interval_s)
        metrics.trio_scheduling_delay.observe(max(0.0, trio.current_time() - slept - interval_s))


async def watch_backend(
    problem: Callable[[], Awaitable[str | None]],
    metrics: Metrics,
    *,
    interval_s: float = BACKEND_INTERVAL_S,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """``streamgate_backend_up`` from ``problem()`` (``Health.backend_error``: None when the
    backend answered its ping) every ``interval_s``."""
    up = metrics.backend_up.labels(metrics.backend)
    task_status.started()
    while True:
        up.set(0 if await problem() else 1)
        await trio.sleep(interval_s)


__all__ = ["LagSampler", "Querier", "sample_runtime", "watch_backend"]
