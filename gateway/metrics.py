"""Every streamgate metric, created on one registry object that tests inject fresh (DESIGN.md §5).

Label values come from bounded sets (protocols, command names, error types); known combinations
are created at start so dashboards never show "no data". Topic and group names become labels
only where the configuration opts them in by pattern (``[metrics]``: ``TopicFilter``,
``GroupFilter``), so their number stays what the operator chose. No ``_created`` series: they
would double every counter and histogram of a scrape for a value nobody graphs.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Callable, Iterable, Mapping
from fnmatch import fnmatchcase
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    disable_created_metrics,
)
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from gateway import __version__
from gateway.histograms import histogram
from gateway.model import COMMAND_NAMES, ERROR_TYPES, STORAGE_ERROR_KINDS, Topic

# 50 µs .. 30 s: sub-millisecond resolution at the low end, where an embedded append lives.
LATENCY_BUCKETS = (
    0.00005, 0.0001, 0.00025, 0.0005, 0.00075, 0.001, 0.0025, 0.005, 0.0075, 0.01, 0.025,
    0.05, 0.075, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
)  # fmt: skip

PROTOCOLS = ("kafka", "rabbitmq_stream", "iggy", "rog")
OUTCOMES = ("ok", "error")


BACKEND_RETRY_REASONS = ("reconnect", "request")  # streamgate_backend_retries_total's reasons


class Metrics:
    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        backend: str = "embedded",
        protocols: Iterable[str] = PROTOCOLS,
        topic_patterns: Iterable[str] = (),
        process: bool = True,
    ) -> None:
        # Process-wide in prometheus_client, and read when a metric is created: before any is.
        disable_created_metrics()  # type: ignore[no-untyped-call]
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        self.backend = backend
        # Label children by metric and labels: ``labels()`` checks and locks on every call, and
        # the router measures every command (every partition of a fetch) with the same few.
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        r = self.registry
        if process:
            # process_cpu_seconds_total, process_resident_memory_bytes, process_open_fds...
            # (this process's; under --workers the supervisor serves every worker's instead:
            # WorkerProcesses).
            ProcessCollector(registry=r)
        self.command_duration = histogram(
            "streamgate_command_duration_seconds",
            "Time to execute one canonical command, long-poll waiting excluded.",
            ["protocol", "command", "wire_command", "backend", "outcome", "error_type"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.long_poll_wait = histogram(
            "streamgate_long_poll_wait_seconds",
            "Time reads spent waiting for data (excluded from command_duration).",
            ["protocol", "backend"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.backend_request_duration = histogram(
            "streamgate_backend_request_duration_seconds",
            "Time the backend took for one command.",
            ["backend", "command", "outcome"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.gateway_overhead = histogram(
            "streamgate_gateway_overhead_seconds",
            "Per wire request: time spent in the gateway outside the backend (decode, translate,"
            " encode).",
            ["protocol", "wire_command"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.bytes_received = Counter(
            "streamgate_bytes_received", "Bytes read from client sockets.", ["protocol"],
            registry=r,
        )  # fmt: skip
        self.bytes_sent = Counter(
            "streamgate_bytes_sent", "Bytes written to client sockets.", ["protocol"],
            registry=r,
        )  # fmt: skip
        self.messages_in = Counter(
            "streamgate_messages_in", "Messages appended through a listener.", ["protocol"],
            registry=r,
        )  # fmt: skip
        self.messages_out = Counter(
            "streamgate_messages_out", "Messages delivered to clients.", ["protocol"],
            registry=r,
        )  # fmt: skip
        # multiprocess_mode: how ``--workers`` sum a gauge (prometheus_client's multiprocess
        # mode; ignored in one process).
        self.connections_active = Gauge(
            "streamgate_connections_active", "Open client connections.", ["protocol"], registry=r,
            multiprocess_mode="livesum",
        )  # fmt: skip
        self.connections = Counter(
            "streamgate_connections", "Client connections accepted.", ["protocol"], registry=r
        )
        self.connection_errors = Counter(
            "streamgate_connection_errors",
            "Connections closed because of an error.",
            ["protocol", "reason"],
            registry=r,
        )
        self.authorization_denied = Counter(
            "streamgate_authorization_denied",
            "Commands refused because the user lacks the permission (gateway/authorization.py).",
            ["protocol", "command"],
            registry=r,
        )
        self.inflight_requests = Gauge(
            "streamgate_inflight_requests", "Wire requests being processed.", ["protocol"],
            registry=r, multiprocess_mode="livesum",
        )  # fmt: skip
        self.paused_reads = Counter(
            "streamgate_paused_reads",
            "Times a connection stopped reading because its send queue was full.",
            ["protocol"],
            registry=r,
        )
        self.translation_lossy = Counter(
            "streamgate_translation_lossy",
            "Fields dropped or approximated when translating between protocols.",
            ["from", "to", "field"],
            registry=r,
        )
        self.access_log_dropped = Counter(
            "streamgate_access_log_dropped",
            "Access log lines not written: its queue was full (the writer fell behind) or the"
            " write failed.",
            ["reason"],
            registry=r,
        )
        self.backend_up = Gauge(
            "streamgate_backend_up", "1 when the backend answered the last readiness check.",
            ["backend"], registry=r, multiprocess_mode="livemin",
        )  # fmt: skip
        self.build_info = Gauge(
            "streamgate_build_info",
            "Always 1; labels say what is running.",
            ["version", "python", "backend"],
            registry=r,
            multiprocess_mode="livemax",
        )
        self.build_info.labels(__version__, platform.python_version(), backend).set(1)
        self.backend_retries = Counter(
            "streamgate_backend_retries",
            "The backend adapter's retries: reconnect (a connection attempt after one failed or"
            " broke), request (a request sent again after a transient refusal).",
            ["backend", "reason"],
            registry=r,
        )
        self.backend_errors = Counter(
            "streamgate_backend_errors",
            "Commands the backend failed, by error type (backend_unavailable and timeout: the"
            " backend did not answer).",
            ["backend", "error_type"],
            registry=r,
        )
        # Opt-in per topic (metrics.topic_patterns): what moved through each matching topic.
        topic_labels = ["stream", "topic"]
        self.topic_messages_in = Counter(
            "streamgate_topic_messages_in", "Messages appended to a topic (opted in by pattern).",
            topic_labels, registry=r,
        )  # fmt: skip
        self.topic_messages_out = Counter(
            "streamgate_topic_messages_out", "Messages read from a topic (opted in by pattern).",
            topic_labels, registry=r,
        )  # fmt: skip
        self.topic_bytes_in = Counter(
            "streamgate_topic_bytes_in",
            "Bytes appended to a topic: the batch as sent, or values plus keys (opted in).",
            topic_labels, registry=r,
        )  # fmt: skip
        self.topic_bytes_out = Counter(
            "streamgate_topic_bytes_out",
            "Bytes read from a topic: the batches as stored, or values plus keys (opted in).",
            topic_labels, registry=r,
        )  # fmt: skip
        # Sampled every metrics.lag_interval_s for the groups and topics the config names. Every
        # --workers worker samples the same backend: the freshest sample of a live one counts.
        self.consumer_group_lag = Gauge(
            "streamgate_consumer_group_lag",
            "Messages between a group's committed offsets and the end of a topic, summed over"
            " the partitions the group committed on (opted in by pattern).",
            ["group", "stream", "topic"],
            registry=r,
            multiprocess_mode="livemostrecent",
        )
        self.lag_sample_duration = Gauge(
            "streamgate_consumer_group_lag_sample_seconds",
            "How long the last lag sample took (the backend queries of every group x topic).",
            registry=r,
            multiprocess_mode="livemax",
        )
        # The trio run loop of each process, sampled every second (gateway.sampling).
        self.trio_tasks = Gauge(
            "streamgate_trio_tasks", "Tasks alive in the trio run loop.", registry=r,
            multiprocess_mode="livesum",
        )  # fmt: skip
        self.trio_tasks_runnable = Gauge(
            "streamgate_trio_tasks_runnable",
            "Tasks ready to run and waiting for the loop (a run queue that stays long means a"
            " saturated process).",
            registry=r,
            multiprocess_mode="livesum",
        )
        self.trio_threads_busy = Gauge(
            "streamgate_trio_worker_threads_busy",
            "trio.to_thread worker threads in use (of the default limiter).",
            registry=r,
            multiprocess_mode="livesum",
        )
        self.trio_threads_limit = Gauge(
            "streamgate_trio_worker_threads_limit",
            "Most trio.to_thread worker threads at once (the default limiter's tokens).",
            registry=r,
            multiprocess_mode="livesum",
        )
        self.trio_threads_waiting = Gauge(
            "streamgate_trio_worker_threads_waiting",
            "Tasks waiting for a trio.to_thread worker thread.",
            registry=r,
            multiprocess_mode="livesum",
        )
        self.trio_scheduling_delay = Histogram(
            "streamgate_trio_scheduling_delay_seconds",
            "How late a task that slept woke up: the time the run loop was busy elsewhere.",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        # The embedded store's disk (gateway/backends/embedded/faults.py).
        self.storage_errors = Counter(
            "streamgate_storage_errors",
            "Writes the embedded store's disk refused, by kind: no_space (ENOSPC, EFBIG), quota"
            " (EDQUOT), io (EIO), read_only (EROFS). Logged once per episode, counted here.",
            ["kind"],
            registry=r,
        )
        self.storage_writable = Gauge(
            "streamgate_storage_writable",
            "1 while the embedded store's writes succeed; 0 from a failed write (or fsync) until"
            " the next one succeeds (/readyz answers 503 meanwhile).",
            registry=r,
            multiprocess_mode="livemin",
        )
        self.storage_corrupt_batches = Counter(
            "streamgate_storage_corrupt_batches",
            "Damaged batches recovery found followed by intact data and cut out of a segment.",
            registry=r,
        )
        self.storage_lost_records = Counter(
            "streamgate_storage_lost_records",
            "Records in the damaged batches recovery cut out (their offsets are never reused).",
            registry=r,
        )
        for kind in STORAGE_ERROR_KINDS:
            self.storage_errors.labels(kind)
        self.storage_writable.set(1)
        self.topics = TopicFilter(topic_patterns)
        self._precreate(tuple(protocols))

    def storage_event(self, event: str, kind: str, n: int) -> None:
        """A ``StorageHealth`` listener (the embedded backend's ``storage.listen``)."""
        if event == "error":
            self.storage_errors.labels(kind).inc(n)
        elif event == "writable":
            self.storage_writable.set(n)
        elif event == "corrupt":
            self.storage_corrupt_batches.inc(n)
        elif event == "lost":
            self.storage_lost_records.inc(n)

    def lossy(self, to: str, source: str = "canonical") -> Callable[[str], None]:
        """A ``lossy(field)`` callback for what a translation to ``to`` could not carry."""
        counter = self.translation_lossy

        def count(field: str) -> None:
            counter.labels(source, to, field).inc()

        return count

    def _precreate(self, protocols: tuple[str, ...]) -> None:
        b = self.backend
        for p in protocols:
            for c in (
                self.bytes_received, self.bytes_sent, self.messages_in, self.messages_out,
                self.connections, self.paused_reads,
            ):  # fmt: skip
                c.labels(p)
            self.connections_active.labels(p)
            self.inflight_requests.labels(p)
            self.long_poll_wait.labels(p, b)
            for reason in CONNECTION_ERROR_REASONS:
                self.connection_errors.labels(p, reason)
            for cmd in COMMAND_NAMES:
                self.authorization_denied.labels(p, cmd)
        for cmd in COMMAND_NAMES:
            for outcome in OUTCOMES:
                self.backend_request_duration.labels(b, cmd, outcome)
        self.backend_up.labels(b)
        for reason in ACCESS_LOG_DROP_REASONS:
            self.access_log_dropped.labels(reason)
        for error_type in ERROR_TYPES:
            self.backend_errors.labels(b, error_type)
        for reason in BACKEND_RETRY_REASONS:
            self.backend_retries.labels(b, reason)

    def observe_command(
        self,
        protocol: str,
        command: str,
        wire_command: str,
        seconds: float,
        error_type: str = "",
    ) -> None:
        outcome = "error" if error_type else "ok"
        labels = (protocol, command, wire_command, self.backend, outcome, error_type)
        self.child(self.command_duration, *labels).observe(seconds)

    def child(self, metric: Any, *labels: str) -> Any:
        """``metric.labels(*labels)``, kept: for the labels every command is measured under
        (never for per-topic or per-client labels, which come and go)."""
        key = (id(metric), labels)
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = metric.labels(*labels)
        return found


class TopicFilter:
    """Which topics get labels of their own (``metrics.topic_patterns``): a pattern with a "/"
    matches "stream/topic", one without the topic name in any stream. Decisions are kept per
    topic, so the hot path pays one dict lookup; none at all when nothing is opted in."""

    __slots__ = ("_decided", "patterns")

    MAX_DECIDED = 100_000  # forget (and decide again) beyond this many distinct topics

    def __init__(self, patterns: Iterable[str]) -> None:
        self.patterns = tuple(patterns)
        self._decided: dict[Topic, bool] = {}

    def __bool__(self) -> bool:
        return bool(self.patterns)

    def __call__(self, topic: Topic) -> bool:
        found = self._decided.get(topic)
        if found is None:
            if len(self._decided) >= self.MAX_DECIDED:
                self._decided.clear()
            found = self._decided[topic] = topic_matches(self.patterns, topic)
        return found


def topic_matches(patterns: Iterable[str], topic: Topic) -> bool:
    qualified = f"{topic.stream}/{topic.name}"
    return any(fnmatchcase(qualified if "/" in p else topic.name, p) for p in patterns)


def group_matches(patterns: Iterable[str], group: str) -> bool:
    """Whether a group is opted in; one named "__..." (the gateway's own bookkeeping, e.g. the
    RabbitMQ publishers' sequences) only by a pattern that begins with "__" too."""
    internal = group.startswith("__")
    return any(fnmatchcase(group, p) for p in patterns if p.startswith("__") or not internal)


class WorkerProcesses(Collector):
    """``process_*`` of the ``--workers`` supervisor and of each live worker, labelled
    ``worker`` ("supervisor", "0", "1", ...): the workers' own registries never reach the
    supervisor's ``/metrics`` (only what they write to the multiprocess directory does).
    ``sum by (instance)`` of a series is the gateway's total."""

    def __init__(
        self, pids: Callable[[], Mapping[str, int]], registry: CollectorRegistry | None = None
    ) -> None:
        self._pids = pids
        if registry is not None:
            registry.register(self)

    def collect(self) -> Iterable[Metric]:
        families: dict[str, Metric] = {}
        for worker, pid in {"supervisor": os.getpid(), **self._pids()}.items():
            for family in ProcessCollector(pid=_constant(pid), registry=None).collect():
                merged = families.get(family.name)
                if merged is None:
                    merged = families[family.name] = Metric(
                        family.name, family.documentation, family.type
                    )
                for sample in family.samples:
                    merged.add_sample(
                        sample.name, {**sample.labels, "worker": worker}, sample.value
                    )
        return list(families.values())


def _constant(pid: int) -> Callable[[], int]:
    return lambda: pid


ACCESS_LOG_DROP_REASONS = ("queue_full", "write_error")
CONNECTION_ERROR_REASONS = (
    "protocol_error",
    "frame_too_large",
    "idle_timeout",
    "too_many_connections",
    "reset",
    "internal",
    "tls",  # a failed TLS handshake, or a TLS client on a plaintext port
    "preauth_frame_too_large",  # above limits.max_preauth_frame_bytes before the login
    "auth_timeout",  # not logged in within limits.auth_timeout_s
    "request_timeout",  # a frame not whole within limits.request_timeout_s of its first byte
    "memory",  # the process held limits.max_buffered_bytes of frames still arriving
    "login_throttled",  # a login refused unhashed: backoff, rate limit, full queue (auth.*)
    "fd_exhausted",  # refused: out of file descriptors (gateway/listeners/fd_guard.py)
)

__all__ = [
    "ACCESS_LOG_DROP_REASONS",
    "CONNECTION_ERROR_REASONS",
    "ERROR_TYPES",
    "LATENCY_BUCKETS",
    "PROTOCOLS",
    "Metrics",
    "TopicFilter",
    "WorkerProcesses",
    "group_matches",
    "topic_matches",
]
