"""The histograms observed on every command and wire request (``Metrics.command_duration``,
``backend_request_duration``, ``long_poll_wait``, ``gateway_overhead``), kept as plain counts.

prometheus_client's ``Histogram.observe`` takes two locks (the sum's, then the bucket's, after a
scan of the bounds): about 1 µs here, paid a few times per request and once per partition of a
wide Kafka Fetch. These children are only ever observed on the gateway's one trio thread, so an
observation is a bisect and two additions. The exposition is prometheus_client's own
(``HistogramMetricFamily``): the same names, ``le`` values and series as its Histogram, read from
a snapshot of each child's counts, so a scrape's ``_count`` always equals its ``+Inf`` bucket.

Under ``--workers`` each worker writes its metrics to the supervisor's directory
(prometheus_client's multiprocess mode) and the supervisor sums them: there ``histogram`` gives
prometheus_client's own Histogram, which writes there.
"""

from __future__ import annotations

import math
import os
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from itertools import accumulate
from typing import Protocol

from prometheus_client import CollectorRegistry
from prometheus_client import Histogram as ClientHistogram
from prometheus_client.metrics_core import HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString


class Observer(Protocol):
    def observe(self, amount: float) -> None: ...


class Labelled(Protocol):
    def labels(self, *values: str) -> Observer: ...


def multiprocess() -> bool:
    """Whether this process writes its metrics to a shared directory (a worker of --workers)."""
    return "PROMETHEUS_MULTIPROC_DIR" in os.environ or "prometheus_multiproc_dir" in os.environ


def histogram(
    name: str,
    documentation: str,
    labelnames: Sequence[str],
    *,
    buckets: Sequence[float],
    registry: CollectorRegistry,
) -> Labelled:
    """A histogram of the hot path: ``Histogram``, or prometheus_client's own in multiprocess
    mode (``--workers``), which the supervisor's directory collects."""
    if multiprocess():
        return ClientHistogram(name, documentation, labelnames, buckets=buckets, registry=registry)
    return Histogram(name, documentation, labelnames, buckets=buckets, registry=registry)


class HistogramChild:
    """One label set's counts: ``counts[i]`` observations fell at or under ``bounds[i]`` and
    over the bound before it (the last bound is +Inf)."""

    __slots__ = ("_bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self._bounds = bounds
        self.counts = [0] * len(bounds)
        self.sum = 0.0

    def observe(self, amount: float) -> None:
        # The first bound at or above the amount: prometheus_client's ``amount <= bound``.
        self.counts[bisect_left(self._bounds, amount)] += 1
        self.sum += amount


class Histogram(Collector):
    """``labels(*values).observe(seconds)``, as prometheus_client's Histogram with label names
    (positional label values only: every caller here passes them so)."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str],
        *,
        buckets: Iterable[float],
        registry: CollectorRegistry,
    ) -> None:
        bounds = sorted(float(b) for b in buckets)
        if not bounds or bounds[-1] != math.inf:
            bounds.append(math.inf)
        self._name = name
        self._documentation = documentation
        self._labelnames = tuple(labelnames)
        self._bounds = tuple(bounds)
        self._le = tuple(floatToGoString(b) for b in bounds)  # type: ignore[no-untyped-call]
        self._children: dict[tuple[str, ...], HistogramChild] = {}
        registry.register(self)

    def labels(self, *values: str) -> HistogramChild:
        child = self._children.get(values)
        if child is None:
            if len(values) != len(self._labelnames):
                raise ValueError(f"{self._name}: labels {self._labelnames}, given {values}")
            child = self._children[values] = HistogramChild(self._bounds)
        return child

    def describe(self) -> Iterable[Metric]:
        return [HistogramMetricFamily(self._name, self._documentation, labels=self._labelnames)]

    def collect(self) -> Iterable[Metric]:
        family = HistogramMetricFamily(self._name, self._documentation, labels=self._labelnames)
        for values, child in list(self._children.items()):
            counts, total = child.counts[:], child.sum  # one snapshot: _count is its +Inf
            buckets = list(zip(self._le, accumulate(counts), strict=True))
            family.add_metric(list(values), buckets, total)
        yield family


__all__ = ["Histogram", "HistogramChild", "Labelled", "Observer", "histogram", "multiprocess"]
