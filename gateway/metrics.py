"""Every streamgate metric, created on one registry object that tests inject fresh (DESIGN.md §5).

Label values come from bounded sets (protocols, command names, error types); known combinations
are created at start so dashboards never show "no data". No topic names as labels.
"""

from __future__ import annotations

import platform
from collections.abc import Callable, Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from gateway import __version__
from gateway.model import COMMAND_NAMES, ERROR_TYPES

# 50 µs .. 30 s: sub-millisecond resolution at the low end, where an embedded append lives.
LATENCY_BUCKETS = (
    0.00005, 0.0001, 0.00025, 0.0005, 0.00075, 0.001, 0.0025, 0.005, 0.0075, 0.01, 0.025,
    0.05, 0.075, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
)  # fmt: skip

PROTOCOLS = ("kafka", "rabbitmq_stream", "iggy", "rog")
OUTCOMES = ("ok", "error")


class Metrics:
    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        backend: str = "embedded",
        protocols: Iterable[str] = PROTOCOLS,
    ) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        self.backend = backend
        r = self.registry
        self.command_duration = Histogram(
            "streamgate_command_duration_seconds",
            "Time to execute one canonical command, long-poll waiting excluded.",
            ["protocol", "command", "wire_command", "backend", "outcome", "error_type"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.long_poll_wait = Histogram(
            "streamgate_long_poll_wait_seconds",
            "Time reads spent waiting for data (excluded from command_duration).",
            ["protocol", "backend"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.backend_request_duration = Histogram(
            "streamgate_backend_request_duration_seconds",
            "Time the backend took for one command.",
            ["backend", "command", "outcome"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.gateway_overhead = Histogram(
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
        self._precreate(tuple(protocols))

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
            for outcome in OUTCOMES:
                self.backend_request_duration.labels(b, cmd, outcome)
        self.backend_up.labels(b)
        for reason in ACCESS_LOG_DROP_REASONS:
            self.access_log_dropped.labels(reason)

    def observe_command(
        self,
        protocol: str,
        command: str,
        wire_command: str,
        seconds: float,
        error_type: str = "",
    ) -> None:
        outcome = "error" if error_type else "ok"
        self.command_duration.labels(
            protocol, command, wire_command, self.backend, outcome, error_type
        ).observe(seconds)


ACCESS_LOG_DROP_REASONS = ("queue_full", "write_error")
CONNECTION_ERROR_REASONS = (
    "protocol_error",
    "frame_too_large",
    "idle_timeout",
    "too_many_connections",
    "reset",
    "internal",
)

__all__ = [
    "ACCESS_LOG_DROP_REASONS",
    "CONNECTION_ERROR_REASONS",
    "ERROR_TYPES",
    "LATENCY_BUCKETS",
    "PROTOCOLS",
    "Metrics",
]
