"""Per protocol: one row per protocol (a repeat on ``$protocol``) with its wire commands, latency
heatmap, connection errors and long-poll waits, the waits kept apart from the work."""

from __future__ import annotations

from grafana_foundation_sdk.builders.dashboard import Dashboard

from grafana.panels import (
    ERROR,
    INSTANCE,
    PROTOCOL,
    Board,
    graph,
    heat,
    quantile,
    sel,
    sum_rate,
    target,
    targets,
)

COMMANDS = "streamgate_command_duration_seconds"
WAITS = "streamgate_long_poll_wait_seconds"
ONE = (INSTANCE, PROTOCOL)


def dashboard() -> Dashboard:
    board = Board(
        "streamgate-protocol",
        "streamgate / Per protocol",
        "One row per protocol: its commands, latency heatmap, connection errors and long-poll"
        " waits (measured apart: a consumer waiting for data is not slow work).",
        protocol_multi=True,
    )
    board.row("$protocol", repeat="protocol")
    board.add(
        graph(
            "Wire requests/s by command",
            "Commands by the protocol's own request name (wire_command) and the canonical"
            " command it became.",
            "ops",
            [
                target(
                    sum_rate("wire_command, command", f"{COMMANDS}_count", *ONE),
                    "{{wire_command}} ({{command}})",
                )
            ],
            width=8,
        )
    )
    board.add(
        heat(
            "Command latency heatmap",
            "Every command of this protocol by latency bucket (long-poll waits excluded).",
            sum_rate("le", f"{COMMANDS}_bucket", *ONE),
            width=8,
        )
    )
    board.add(
        graph(
            "p99 latency by wire command",
            "The slowest 1% of each request type's commands.",
            "s",
            [target(quantile(0.99, COMMANDS, ONE, ("wire_command",)), "{{wire_command}}")],
            width=8,
        )
    )
    board.add(
        graph(
            "Errors/s by command and type",
            "Commands answered with an error, by canonical error type.",
            "ops",
            [
                target(
                    sum_rate("command, error_type", f"{COMMANDS}_count", *ONE, ERROR),
                    "{{command}}: {{error_type}}",
                )
            ],
            width=8,
        )
    )
    board.add(
        graph(
            "Connection errors/s by reason",
            "Connections closed because of an error: protocol_error, frame_too_large,"
            " idle_timeout, too_many_connections, reset, internal.",
            "ops",
            [
                target(
                    sum_rate("reason", "streamgate_connection_errors_total", *ONE),
                    "{{reason}}",
                )
            ],
            width=8,
        )
    )
    board.add(
        graph(
            "Connections",
            "Open connections, accepted per second, requests in flight.",
            "short",
            targets(
                (f"sum(streamgate_connections_active{sel(*ONE)})", "open"),
                (sum_rate("", "streamgate_connections_total", *ONE), "accepted/s"),
                (f"sum(streamgate_inflight_requests{sel(*ONE)})", "in flight"),
            ),
            width=8,
        )
    )
    board.add(
        graph(
            "Long-poll waits",
            "Reads that waited for data, and the seconds spent waiting per second: kept out of"
            " the command latency above.",
            "short",
            targets(
                (sum_rate("", f"{WAITS}_count", *ONE), "waits/s"),
                (sum_rate("", f"{WAITS}_sum", *ONE), "seconds waiting/s"),
            ),
            width=8,
        )
    )
    board.add(
        graph(
            "Long-poll wait p50 / p99",
            "How long reads waited for data (max wait of the client, or until data came).",
            "s",
            targets(
                (quantile(0.5, WAITS, ONE), "p50"),
                (quantile(0.99, WAITS, ONE), "p99"),
            ),
            width=8,
        )
    )
    board.add(
        graph(
            "Traffic",
            "Bytes and messages in and out, and reads paused because the client did not read.",
            "short",
            targets(
                (sum_rate("", "streamgate_bytes_received_total", *ONE), "bytes in/s"),
                (sum_rate("", "streamgate_bytes_sent_total", *ONE), "bytes out/s"),
                (sum_rate("", "streamgate_messages_in_total", *ONE), "messages in/s"),
                (sum_rate("", "streamgate_messages_out_total", *ONE), "messages out/s"),
                (sum_rate("", "streamgate_paused_reads_total", *ONE), "paused reads/s"),
            ),
            width=8,
        )
    )
    return board.dashboard
