"""What the status page shows (``/status.json`` on the admin port; ``/`` renders it).

Every number is read back from a metrics registry: this process's, or under ``--workers`` the
supervisor's ``MultiProcessCollector`` over every worker's files, so the supervisor's page shows
the workers summed with the same code. A background task samples the registry every few seconds
into a small ring; a request compares a fresh sample with the oldest one of the last minute, as
Prometheus's ``rate(...[1m])`` and ``histogram_quantile(0.99, ...)`` would: per-command rates,
error rates and p99 (linear interpolation inside the bucket the 99th percentile falls in), and
per-protocol connection and message rates. The window actually used is reported with them: a
gateway up for 20 s has a 20 s window.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import trio
from prometheus_client import CollectorRegistry

from gateway import __version__
from gateway.redact import MaskedUrl, mask_url

Readiness = Callable[[], Awaitable[tuple[bool, str]]]
Buckets = tuple[tuple[float, float], ...]  # (upper bound, cumulative count), +Inf last

COMMAND_BUCKETS = "streamgate_command_duration_seconds_bucket"
BACKEND_UP = "streamgate_backend_up"
# Sample name -> the key a protocol's row carries it under. ``active`` is a gauge, shown as is;
# the counters are shown as per-second rates over the window (``accepted`` also as a total).
PER_PROTOCOL: Mapping[str, str] = {
    "streamgate_connections_active": "active",
    "streamgate_connections_total": "accepted",
    "streamgate_connection_errors_total": "connection_errors",
    "streamgate_messages_in_total": "messages_in",
    "streamgate_messages_out_total": "messages_out",
    "streamgate_bytes_received_total": "bytes_in",
    "streamgate_bytes_sent_total": "bytes_out",
}
GAUGES = frozenset({"active"})
SAMPLE_EVERY_S = 5.0
WINDOW_S = 60.0
P99 = 0.99


@dataclass(frozen=True, slots=True)
class Sample:
    at: float  # trio.current_time()
    latency: Mapping[tuple[str, str], Buckets]  # (protocol, command), every outcome summed
    errors: Mapping[tuple[str, str], float]  # (protocol, command) -> commands that failed
    per_protocol: Mapping[str, Mapping[str, float]]  # protocol -> PER_PROTOCOL key -> value
    backend_up: float | None  # the lowest, under --workers


def take_sample(registry: CollectorRegistry, at: float) -> Sample:
    """The registry's current values of what the page shows, label sets it does not show summed
    (wire command, backend, outcome, error type; connection error reasons)."""
    latency: dict[tuple[str, str], dict[float, float]] = {}
    errors: dict[tuple[str, str], float] = {}
    per_protocol: dict[str, dict[str, float]] = {}
    backend_up: float | None = None
    for family in registry.collect():
        for s in family.samples:
            if s.name == COMMAND_BUCKETS:
                key = (s.labels.get("protocol", ""), s.labels.get("command", ""))
                bound = float(s.labels["le"])
                buckets = latency.setdefault(key, {})
                buckets[bound] = buckets.get(bound, 0.0) + s.value
                if bound == math.inf and s.labels.get("outcome") == "error":
                    errors[key] = errors.get(key, 0.0) + s.value
            elif (field := PER_PROTOCOL.get(s.name)) is not None:
                row = per_protocol.setdefault(s.labels.get("protocol", ""), {})
                row[field] = row.get(field, 0.0) + s.value
            elif s.name == BACKEND_UP:
                backend_up = s.value if backend_up is None else min(backend_up, s.value)
    return Sample(
        at=at,
        latency={k: tuple(sorted(v.items())) for k, v in latency.items()},
        errors=errors,
        per_protocol=per_protocol,
        backend_up=backend_up,
    )


def increase(new: float, old: float) -> float:
    """A counter's increase; one that went down was reset (a new process), and counts anew."""
    return new - old if new >= old else new


def bucket_increase(new: Buckets, old: Buckets | None) -> Buckets:
    before = dict(old or ())
    if any(count < before.get(bound, 0.0) for bound, count in new):
        return new  # reset
    return tuple((bound, count - before.get(bound, 0.0)) for bound, count in new)


def quantile(q: float, buckets: Buckets) -> float | None:
    """The q-quantile of cumulative buckets as Prometheus's histogram_quantile estimates it:
    linear inside the bucket the rank falls in (the first from 0), and the highest finite bound
    when it falls in +Inf. None without observations."""
    if not buckets or buckets[-1][0] != math.inf or buckets[-1][1] <= 0:
        return None
    rank = q * buckets[-1][1]
    lower, below = 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if bound == math.inf:
                return lower
            return lower + (bound - lower) * (rank - below) / (count - below)
        lower, below = bound, count
    return lower


@dataclass(frozen=True, slots=True)
class CommandRate:
    protocol: str
    command: str
    count: float  # commands in the window
    per_s: float
    errors_per_s: float
    p99_s: float | None


def command_rates(base: Sample, now: Sample) -> list[CommandRate]:
    """Every (protocol, command) that ran between ``base`` and ``now``."""
    seconds = now.at - base.at
    if seconds <= 0:
        return []
    rates = []
    for key in sorted(now.latency):
        buckets = bucket_increase(now.latency[key], base.latency.get(key))
        count = buckets[-1][1] if buckets else 0.0
        if count <= 0:
            continue
        failed = increase(now.errors.get(key, 0.0), base.errors.get(key, 0.0))
        rates.append(
            CommandRate(
                protocol=key[0],
                command=key[1],
                count=count,
                per_s=count / seconds,
                errors_per_s=failed / seconds,
                p99_s=quantile(P99, buckets),
            )
        )
    return rates


def protocol_rows(base: Sample, now: Sample, protocols: Iterable[str]) -> list[dict[str, object]]:
    """One row per protocol: the listeners' first (in their order), then any other with series."""
    seconds = now.at - base.at
    order = list(dict.fromkeys([*protocols, *sorted(now.per_protocol)]))
    rows: list[dict[str, object]] = []
    for protocol in order:
        values = now.per_protocol.get(protocol, {})
        before = base.per_protocol.get(protocol, {})
        row: dict[str, object] = {"protocol": protocol}
        for field in PER_PROTOCOL.values():
            value = values.get(field, 0.0)
            if field in GAUGES:
                row[field] = value
                continue
            if field == "accepted":
                row["accepted_total"] = value
            grown = increase(value, before.get(field, 0.0))
            row[f"{field}_per_s"] = grown / seconds if seconds > 0 else None
        rows.append(row)
    return rows


class Ring:
    """The last minute of samples (and one more), oldest first."""

    def __init__(self, window_s: float = WINDOW_S, every_s: float = SAMPLE_EVERY_S) -> None:
        self.window_s = window_s
        self._samples: deque[Sample] = deque(maxlen=math.ceil(window_s / every_s) + 2)

    def add(self, sample: Sample) -> None:
        self._samples.append(sample)

    def base(self, now: float) -> Sample | None:
        """The oldest sample at most ``window_s`` old; the newest when all are older (sampling
        fell behind: the reported window says so)."""
        for sample in self._samples:
            if sample.at >= now - self.window_s:
                return sample
        return self._samples[-1] if self._samples else None

    def __len__(self) -> int:
        return len(self._samples)


@dataclass(frozen=True, slots=True)
class WorkerState:
    """One ``--workers`` process, as the supervisor sees it."""

    index: int
    pid: int | None
    running: bool
    starts: int


class StatusBoard:
    """The status page's state: what the gateway serves, and a ring of metric samples."""

    def __init__(
        self,
        registry: CollectorRegistry,
        *,
        backend: str,
        backend_url: str,
        listeners: Sequence[tuple[str, str, int]],
        scope: str,
        workers: Callable[[], Sequence[WorkerState]] | None = None,
        every_s: float = SAMPLE_EVERY_S,
        window_s: float = WINDOW_S,
    ) -> None:
        self.registry = registry
        self.backend = backend
        self.url: MaskedUrl = mask_url(backend_url)  # the URL itself is not kept
        self.listeners = tuple(listeners)
        self.scope = scope
        self.workers = workers
        self.every_s = every_s
        self.ring = Ring(window_s, every_s)
        self.started: float | None = None

    def redact(self, text: str) -> str:
        return self.url.redact(text)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Sample every ``every_s`` until cancelled; the first sample before ``started``."""
        self.started = trio.current_time()
        self.ring.add(take_sample(self.registry, self.started))
        task_status.started()
        while True:
            await trio.sleep(self.every_s)
            self.ring.add(take_sample(self.registry, trio.current_time()))

    async def document(self, ready: Readiness) -> dict[str, object]:
        """``/status.json``: plain JSON types only, secrets masked."""
        ok, why = await ready()
        now = take_sample(self.registry, trio.current_time())
        base = self.ring.base(now.at) or now
        seconds = now.at - base.at
        return {
            "version": __version__,
            "scope": self.scope,
            "uptime_s": None if self.started is None else now.at - self.started,
            "window_s": seconds,
            "ready": ok,
            "reason": self.redact(why),
            "backend": {"name": self.backend, "url": self.url.shown, "up": now.backend_up},
            "listeners": [
                {"protocol": p, "address": f"[{h}]:{port}" if ":" in h else f"{h}:{port}"}
                for p, h, port in self.listeners
            ],
            "protocols": protocol_rows(base, now, (p for p, _, _ in self.listeners)),
            "commands": [
                {
                    "protocol": r.protocol,
                    "command": r.command,
                    "count": r.count,
                    "per_s": r.per_s,
                    "errors_per_s": r.errors_per_s,
                    "p99_s": r.p99_s,
                }
                for r in command_rates(base, now)
            ],
            "workers": None
            if self.workers is None
            else [
                {"index": w.index, "pid": w.pid, "running": w.running, "starts": w.starts}
                for w in self.workers()
            ],
        }


__all__ = [
    "CommandRate",
    "Ring",
    "Sample",
    "StatusBoard",
    "WorkerState",
    "bucket_increase",
    "command_rates",
    "increase",
    "protocol_rows",
    "quantile",
    "take_sample",
]
