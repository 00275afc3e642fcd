"""Backend: how the one backend behind the gateways answers: latency per command, failures
(unavailable, timeouts), the adapters' retries, readiness."""

from __future__ import annotations

from grafana_foundation_sdk.builders.dashboard import Dashboard

from grafana.panels import (
    INSTANCE,
    UNAVAILABLE,
    Board,
    graph,
    quantile,
    sel,
    sum_rate,
    target,
    targets,
)

REQUESTS = "streamgate_backend_request_duration_seconds"


def dashboard() -> Dashboard:
    board = Board(
        "streamgate-backend",
        "streamgate / Backend",
        "Latency of the backend (embedded log, RabbitMQ, Kafka, Iggy) by command, its failures"
        " and its readiness.",
        protocol_multi=True,
    )
    board.row("Latency")
    board.add(
        graph(
            "Backend p99 by backend and command",
            "The backend's own time per canonical command, slowest 1%.",
            "s",
            [
                target(
                    quantile(0.99, REQUESTS, (INSTANCE,), ("backend", "command")),
                    "{{backend}} {{command}}",
                )
            ],
        )
    )
    board.add(
        graph(
            "Backend p50 by backend and command",
            "The backend's own time per canonical command, median.",
            "s",
            [
                target(
                    quantile(0.5, REQUESTS, (INSTANCE,), ("backend", "command")),
                    "{{backend}} {{command}}",
                )
            ],
        )
    )
    board.add(
        graph(
            "Backend requests/s by command and outcome",
            "Commands the backend ran, ok or failed.",
            "ops",
            [
                target(
                    sum_rate("backend, command, outcome", f"{REQUESTS}_count", INSTANCE),
                    "{{backend}} {{command}} {{outcome}}",
                )
            ],
        )
    )
    board.row("Failures and readiness")
    board.add(
        graph(
            "Unavailable and timeouts/s",
            "Commands that failed because the backend did not answer (backend_unavailable) or"
            " not in time (timeout); the adapters reconnect meanwhile.",
            "ops",
            [
                target(
                    sum_rate(
                        "backend, error_type",
                        "streamgate_backend_errors_total",
                        INSTANCE,
                        UNAVAILABLE,
                    ),
                    "{{backend}} {{error_type}}",
                )
            ],
        )
    )
    board.add(
        graph(
            "Backend retries/s by reason",
            "The adapters' own retries: reconnect attempts after a connection failed or broke,"
            " and requests sent again after a transient refusal (a stream without a leader for a"
            " moment).",
            "ops",
            [
                target(
                    sum_rate("backend, reason", "streamgate_backend_retries_total", INSTANCE),
                    "{{backend}} {{reason}}",
                )
            ],
        )
    )
    board.add(
        graph(
            "Backend errors/s by type",
            "Every failed backend command by canonical error type.",
            "ops",
            [
                target(
                    sum_rate("backend, error_type", "streamgate_backend_errors_total", INSTANCE),
                    "{{backend}} {{error_type}}",
                )
            ],
        )
    )
    board.add(
        graph(
            "Readiness",
            "Backend answering its ping (1/0) per instance, and Prometheus reaching the instance.",
            "short",
            targets(
                (
                    f"min by (instance, backend) (streamgate_backend_up{sel(INSTANCE)})",
                    "{{instance}} backend {{backend}} up",
                ),
                (f"up{sel(INSTANCE)}", "{{instance}} scraped"),
            ),
        )
    )
    board.add(
        graph(
            "Lag sampling time",
            "How long the last consumer-lag sample took (the backend queries of every"
            " opted-in group x topic).",
            "s",
            [
                target(
                    "max by (instance) (streamgate_consumer_group_lag_sample_seconds"
                    f"{sel(INSTANCE)})",
                    "{{instance}}",
                )
            ],
        )
    )
    return board.dashboard
