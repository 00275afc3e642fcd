"""Overview: what a streamgate serves, how fast, how well, and to whom; one screen per fleet."""

from __future__ import annotations

from grafana_foundation_sdk.builders.dashboard import Dashboard

from grafana.panels import (
    ERROR,
    INSTANCE,
    PROTOCOL,
    Board,
    graph,
    listing,
    number,
    quantile,
    sel,
    sum_rate,
    target,
    targets,
)

COMMANDS = "streamgate_command_duration_seconds"
BY_PROTOCOL = (INSTANCE, PROTOCOL)


def _traffic(board: Board) -> None:
    board.row("Traffic")
    board.add(
        graph(
            "Commands/s by protocol and command",
            "Canonical commands executed, whatever the wire request that carried them.",
            "ops",
            [
                target(
                    sum_rate("protocol, command", f"{COMMANDS}_count", *BY_PROTOCOL),
                    "{{protocol}} {{command}}",
                )
            ],
        )
    )
    board.add(
        graph(
            "Command latency p50 / p95 / p99",
            "Time to execute a command, long-poll waiting excluded (DESIGN.md §5).",
            "s",
            targets(
                (quantile(0.5, COMMANDS, BY_PROTOCOL), "p50"),
                (quantile(0.95, COMMANDS, BY_PROTOCOL), "p95"),
                (quantile(0.99, COMMANDS, BY_PROTOCOL), "p99"),
            ),
        )
    )
    board.add(
        graph(
            "Gateway overhead vs backend time",
            "Per wire request: the time spent in the gateway outside the backend (decode,"
            " translate, encode), against the backend's own time per command.",
            "s",
            targets(
                (quantile(0.5, "streamgate_gateway_overhead_seconds", BY_PROTOCOL), "gateway p50"),
                (quantile(0.99, "streamgate_gateway_overhead_seconds", BY_PROTOCOL), "gateway p99"),
                (
                    quantile(0.5, "streamgate_backend_request_duration_seconds", (INSTANCE,)),
                    "backend p50",
                ),
                (
                    quantile(0.99, "streamgate_backend_request_duration_seconds", (INSTANCE,)),
                    "backend p99",
                ),
            ),
        )
    )
    board.add(
        graph(
            "Errors/s by type",
            "Failed commands by the canonical error type each protocol's error code maps from.",
            "ops",
            [
                target(
                    sum_rate("protocol, error_type", f"{COMMANDS}_count", *BY_PROTOCOL, ERROR),
                    "{{protocol}} {{error_type}}",
                )
            ],
        )
    )
    board.add(
        graph(
            "Bytes/s in and out",
            "Read from and written to client sockets (protocol framing included).",
            "Bps",
            targets(
                (
                    sum_rate("protocol", "streamgate_bytes_received_total", *BY_PROTOCOL),
                    "{{protocol}} in",
                ),
                (
                    sum_rate("protocol", "streamgate_bytes_sent_total", *BY_PROTOCOL),
                    "{{protocol}} out",
                ),
            ),
        )
    )
    board.add(
        graph(
            "Messages/s in and out",
            "Messages appended through a listener, and delivered to clients.",
            "short",
            targets(
                (
                    sum_rate("protocol", "streamgate_messages_in_total", *BY_PROTOCOL),
                    "{{protocol}} in",
                ),
                (
                    sum_rate("protocol", "streamgate_messages_out_total", *BY_PROTOCOL),
                    "{{protocol}} out",
                ),
            ),
        )
    )


def _health(board: Board) -> None:
    board.row("Connections and health")
    board.add(
        graph(
            "Active connections",
            "Open client connections per protocol.",
            "short",
            [
                target(
                    f"sum by (protocol) (streamgate_connections_active{sel(*BY_PROTOCOL)})",
                    "{{protocol}}",
                )
            ],
            width=8,
        )
    )
    board.add(
        graph(
            "Lossy translations/s by field",
            "Fields a protocol could not carry (dropped or approximated) when a message crossed"
            " from one protocol to another.",
            "ops",
            [
                target(
                    sum_rate("from, to, field", "streamgate_translation_lossy_total", INSTANCE),
                    "{{from}} -> {{to}}: {{field}}",
                )
            ],
            width=8,
        )
    )
    board.add(
        graph(
            "Consumer group lag",
            "Messages between a group's committed offsets and the end of each topic, for the"
            " groups and topics [metrics] lag_groups / lag_topics opt in (max over gateways:"
            " each samples the same backend).",
            "short",
            [
                target(
                    f"max by (group, stream, topic) (streamgate_consumer_group_lag{sel(INSTANCE)})",
                    "{{group}} on {{stream}}/{{topic}}",
                )
            ],
            width=8,
        )
    )
    board.add(
        number(
            "Backend up",
            "1 when the backend answered its last ping (every 5 s); the lowest over instances.",
            "bool_yes_no",
            target(f"min by (backend) (streamgate_backend_up{sel(INSTANCE)})", "{{backend}}"),
            width=8,
        )
    )
    board.add(
        listing(
            "Build",
            "What runs: version, Python and backend of each instance.",
            target(f"streamgate_build_info{sel(INSTANCE)}", "{{instance}}"),
            width=16,
        )
    )


def _topics(board: Board) -> None:
    board.row("Topics (opted in by [metrics] topic_patterns)")
    board.add(
        graph(
            "Messages/s per topic",
            "Appended to and read from each topic that metrics.topic_patterns names.",
            "short",
            targets(
                (
                    sum_rate("stream, topic", "streamgate_topic_messages_in_total", INSTANCE),
                    "{{stream}}/{{topic}} in",
                ),
                (
                    sum_rate("stream, topic", "streamgate_topic_messages_out_total", INSTANCE),
                    "{{stream}}/{{topic}} out",
                ),
            ),
        )
    )
    board.add(
        graph(
            "Bytes/s per topic",
            "Batches as sent and as stored, or values plus keys where a batch was decoded.",
            "Bps",
            targets(
                (
                    sum_rate("stream, topic", "streamgate_topic_bytes_in_total", INSTANCE),
                    "{{stream}}/{{topic}} in",
                ),
                (
                    sum_rate("stream, topic", "streamgate_topic_bytes_out_total", INSTANCE),
                    "{{stream}}/{{topic}} out",
                ),
            ),
        )
    )


def _process(board: Board) -> None:
    board.row("Process and trio run loop")
    board.add(
        graph(
            "CPU",
            "CPU seconds per second of each instance (under --workers: the supervisor, every"
            " worker and, on the embedded store, its owner summed).",
            "percentunit",
            [
                target(
                    sum_rate("instance", "process_cpu_seconds_total", INSTANCE),
                    "{{instance}}",
                )
            ],
            width=6,
        )
    )
    board.add(
        graph(
            "Resident memory and open files",
            "RSS and open file descriptors of each instance (workers and store owner summed).",
            "bytes",
            targets(
                (
                    f"sum by (instance) (process_resident_memory_bytes{sel(INSTANCE)})",
                    "{{instance}} RSS",
                ),
                (
                    f"sum by (instance) (process_open_fds{sel(INSTANCE)})",
                    "{{instance}} open fds",
                ),
            ),
            width=6,
        )
    )
    board.add(
        graph(
            "trio tasks and worker threads",
            "Tasks alive and runnable in the run loop; trio.to_thread worker threads busy.",
            "short",
            targets(
                (f"sum by (instance) (streamgate_trio_tasks{sel(INSTANCE)})", "{{instance}} tasks"),
                (
                    f"sum by (instance) (streamgate_trio_tasks_runnable{sel(INSTANCE)})",
                    "{{instance}} runnable",
                ),
                (
                    f"sum by (instance) (streamgate_trio_worker_threads_busy{sel(INSTANCE)})",
                    "{{instance}} threads busy",
                ),
            ),
            width=6,
        )
    )
    board.add(
        graph(
            "Run loop scheduling delay p99",
            "How late a sleeping task wakes up: time the loop spent busy elsewhere. A rise means"
            " a saturated process (one core per worker).",
            "s",
            [
                target(
                    quantile(
                        0.99, "streamgate_trio_scheduling_delay_seconds", (INSTANCE,), ("instance",)
                    ),
                    "{{instance}}",
                )
            ],
            width=6,
        )
    )


def dashboard() -> Dashboard:
    board = Board(
        "streamgate-overview",
        "streamgate / Overview",
        "Commands, latency, errors, connections, traffic, lag and health of streamgate gateways.",
        protocol_multi=True,
    )
    _traffic(board)
    _health(board)
    _topics(board)
    _process(board)
    return board.dashboard
