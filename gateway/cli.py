"""``streamgate``: run the gateway, use any endpoint as a client, or measure throughput."""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib.util
import os
import sys
import tempfile
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import trio

from gateway import __version__
from gateway.backends.base import BackendUrlError
from gateway.client import add_client_commands, run_client
from gateway.client.users import add_users_command, run_users
from gateway.config import Config, ConfigError, load, parse_assignment
from gateway.model import GatewayError
from gateway.redact import mask_url

if TYPE_CHECKING:
    from gateway.bench.kafka import GatewayChild

# Shortcuts for the settings people change most; anything else: --set key=value.
_RUN_FLAGS: tuple[tuple[str, str, str], ...] = (
    ("--backend", "backend.url", "backend URL, e.g. embedded:./data"),
    ("--host", "host", "address the listeners bind (default 127.0.0.1)"),
    ("--advertised-host", "advertised_host", "host discovery answers carry"),
    ("--fsync", "backend.fsync", "embedded store: always | interval:<ms> | never"),
    ("--rog-port", "listeners.rog.port", "Rog listener port (default 7878, 0 = any)"),
    ("--kafka-port", "listeners.kafka.port", "Kafka listener port (default 9092, 0 = any)"),
    ("--iggy-port", "listeners.iggy.port", "Iggy listener port (default 8090, 0 = any)"),
    (
        "--rabbitmq-stream-port",
        "listeners.rabbitmq_stream.port",
        "RabbitMQ Stream listener port (default 5552, 0 = any)",
    ),
    ("--admin-port", "admin.port", "metrics/health HTTP port (default 9464, 0 = any)"),
    ("--log-level", "log.level", "debug | info | warning | error"),
    ("--log-format", "log.format", "auto | console | json"),
    ("--workers", "workers", "processes sharing each listener port (default 1)"),
)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="streamgate", description=__doc__)
    p.add_argument("--version", action="version", version=f"streamgate {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run every listener and the admin HTTP server")
    run.add_argument("--config", "-c", default=os.environ.get("STREAMGATE_CONFIG"),
                     help="TOML config file (env STREAMGATE_CONFIG)")  # fmt: skip
    for flag, key, text in _RUN_FLAGS:
        run.add_argument(flag, dest=key, metavar=key.rsplit(".", 1)[-1].upper(), help=text)
    run.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE",
        help="any setting by its dotted name, e.g. limits.idle_timeout_s=30",
    )  # fmt: skip
    verify = sub.add_parser("verify", help="check an embedded store's segments and indexes")
    verify.add_argument("data_dir", metavar="DATA_DIR", help="the embedded backend's directory")
    verify.add_argument(
        "--repair", action="store_true",
        help="make the next open rescan (and repair) every damaged segment",
    )  # fmt: skip
    add_client_commands(sub)  # topics, produce, consume (gateway/client)
    add_users_command(sub)  # users, permissions, tokens (gateway/client/users.py)
    # Listed for --help only: main() hands both over to the pipeline before parsing.
    sub.add_parser("pipeline", help="Spark jobs: archive, mirror, report (the pipeline extra)")

    bench = sub.add_parser("bench", help="measure throughput (not a test)")
    bench_sub = bench.add_subparsers(dest="target", required=True)
    bench_sub.add_parser("spark", help="the Spark data source vs consume (the pipeline extra)")
    emb = bench_sub.add_parser("embedded", help="append and read the embedded log directly")
    emb.add_argument("--dir", default=None, help="where to write (default: a temp dir)")
    emb.add_argument("--sizes", default="100,1024", help="message sizes in bytes, e.g. 100,1024")
    emb.add_argument("--batch", type=int, default=1000, help="messages per append")
    emb.add_argument("--messages", type=int, default=500_000, help="messages per size")
    emb.add_argument("--fsync", default="never", help="always | interval:<ms> | never")
    kafka = bench_sub.add_parser("kafka", help="confluent-kafka producer and consumer")
    kafka.add_argument(
        "--bootstrap",
        default=None,
        help="endpoint to measure (default: start streamgate on a temp dir)",
    )
    kafka.add_argument("--sizes", default="100,1024", help="message sizes in bytes")
    kafka.add_argument("--messages", type=int, default=1_000_000, help="messages per size")
    kafka.add_argument("--partitions", type=int, default=1, help="partitions of the topic")
    kafka.add_argument("--acks", default="all", help="producer acks: 0 | 1 | all")
    kafka.add_argument(
        "--backend", default=None, help="start streamgate on this backend URL (default: a temp dir)"
    )
    kafka.add_argument("--workers", type=int, default=1, help="of the started streamgate")
    kafka.add_argument("--dir", default=None, help="where the started gateway stores data")
    kafka.add_argument("--fsync", default="interval:1000", help="fsync of the started gateway")
    kafka.add_argument(
        "--tls", action="store_true",
        help="the started gateway serves TLS beside plaintext: every figure over both",
    )  # fmt: skip
    kafka.add_argument(
        "--idempotent", action="store_true", help="idempotent producers (enable.idempotence)"
    )
    kafka.add_argument(
        "--transaction-every", type=int, default=0, metavar="N",
        help="a transactional producer committing every N messages (and the rest at the end), "
        "read back read_committed (default 0: no transactions)",
    )  # fmt: skip
    iggy = bench_sub.add_parser("iggy", help="apache-iggy send and poll in batches")
    iggy.add_argument(
        "--address", default=None, help="host:port to measure (default: start streamgate)"
    )
    iggy.add_argument("--sizes", default="100,1024", help="message sizes in bytes")
    iggy.add_argument("--batch", type=int, default=1000, help="messages per send and per poll")
    iggy.add_argument("--messages", type=int, default=1_000_000, help="messages per size")
    _login_and_gateway_args(iggy, "iggy")
    rabbit = bench_sub.add_parser(
        "rabbitmq-stream", help="rstream publish with confirms, then consume from the first"
    )
    rabbit.add_argument(
        "--address", default=None, help="host:port to measure (default: start streamgate)"
    )
    rabbit.add_argument("--sizes", default="100,1024", help="message sizes in bytes")
    rabbit.add_argument("--kinds", default="amqp,raw", help="message kinds: amqp and/or raw")
    rabbit.add_argument("--batch", type=int, default=1000, help="messages per Publish frame")
    rabbit.add_argument("--in-flight", type=int, default=10, help="unconfirmed batches at most")
    rabbit.add_argument("--messages", type=int, default=1_000_000, help="messages per size")
    _login_and_gateway_args(rabbit, "guest")
    side = bench_sub.add_parser(
        "backends", help="clients straight to real brokers vs through streamgate on them"
    )
    side.add_argument("--rabbitmq-url", default=None, help="rabbitmq-stream://u:p@host:port/vhost")
    side.add_argument("--kafka-url", default=None, help="kafka://host:port[?broker=tansu]")
    side.add_argument("--sizes", default="100,1024", help="message sizes in bytes")
    side.add_argument("--messages", default="100000,20000", help="messages per size (or one count)")
    side.add_argument("--singles", type=int, default=1000, help="then sent one at a time")
    side.add_argument("--rounds", type=int, default=1, help="per size; each figure the median")
    side.add_argument("--no-warm-up", dest="warm_up", action="store_false", help="skip warm-up")
    side.add_argument("--kind", default="amqp", help="rstream messages: amqp | raw")
    side.add_argument("--no-dedup", dest="dedup", action="store_false", help="no publisher_name")
    side.add_argument("--batch", type=int, default=1000, help="rstream messages per Publish")
    side.add_argument("--in-flight", type=int, default=10, help="rstream unconfirmed batches")
    side.add_argument("--acks", default="all", help="confluent-kafka producer acks")
    from gateway.bench.compare import add_parser as add_compare_parser

    add_compare_parser(bench_sub)  # server CPU per message (gateway/bench/compare.py)
    return p


def _login_and_gateway_args(parser: argparse.ArgumentParser, default_user: str) -> None:
    parser.add_argument("--username", default=default_user, help="user to log in as")
    parser.add_argument("--password", default=default_user, help="its password")
    parser.add_argument("--dir", default=None, help="where the started gateway stores data")
    parser.add_argument("--fsync", default="interval:1000", help="fsync of the started gateway")


def _run(args: argparse.Namespace) -> int:
    from gateway.app import Running, run_until_signalled
    from gateway.logs import configure_logging
    from gateway.store_owner import serve_store_owner

    overrides: dict[str, Any] = {key: getattr(args, key) for _, key, _ in _RUN_FLAGS
                                 if getattr(args, key) is not None}  # fmt: skip
    try:
        overrides.update(parse_assignment(a) for a in args.set)
        config = load(args.config, environ=os.environ, overrides=overrides)
    except ConfigError as exc:
        print(f"streamgate: {exc}", file=sys.stderr)
        return 2
    configure_logging(config.log.level, config.log.format)
    if config.store_socket:  # the store owner of --workers on the embedded backend
        return _trio_run(serve_store_owner, config)
    if config.workers != 1:
        return _run_workers(config)

    def announce(running: Running) -> None:
        # A TLS port is said first, so that a reader taking the last line of a protocol finds
        # the plaintext one when both run.
        ordered = sorted(running.listeners, key=lambda i: not i.tls)
        _announce(
            [(i.protocol, host, port, i.tls) for i in ordered for host, port in i.addresses],
            running.admin,
            running.admin_tls,
        )

    return _trio_run(run_until_signalled, config, announce)


def _run_workers(config: Any) -> int:
    from gateway.supervisor import Supervised, WorkersRefused, check_workers, run_workers

    try:
        check_workers(config)
    except WorkersRefused as exc:
        print(f"streamgate: {exc}", file=sys.stderr)
        return 2

    def announce(running: Supervised) -> None:
        # The workers serve TLS as configured: on a listener's port (TLS only), or on its fixed
        # tls.port beside it (port 0 is refused with --workers), said first as ``run`` does.
        listeners: list[tuple[str, str, int, bool]] = []
        for protocol, host, port in running.listeners:
            tls = getattr(config.listeners, protocol).tls
            if tls.enabled and tls.port >= 0:
                listeners += [(protocol, host, tls.port, True), (protocol, host, port, False)]
            else:
                listeners.append((protocol, host, port, tls.enabled))
        _announce(listeners, running.admin, running.admin_tls)
        print(f"workers: {' '.join(str(pid) for pid in running.workers)}", flush=True)
        if running.owner is not None:
            print(f"store owner: {running.owner}", flush=True)

    return _trio_run(run_workers, config, sys.argv[1:], announce)


def _announce(
    listeners: Sequence[tuple[str, str, int] | tuple[str, str, int, bool]],
    admin: tuple[str, int] | None,
    admin_tls: tuple[str, int] | None = None,
) -> None:
    """One line per endpoint on stdout: people read it, scripts and tests parse it. A TLS
    endpoint ends in ``(tls)`` (admin: ``https://``)."""
    for protocol, host, port, *tls in listeners:
        print(f"{protocol} listening on {host}:{port}" + (" (tls)" if any(tls) else ""),
              flush=True)  # fmt: skip
    endpoints = "/ /status.json /metrics /livez /readyz"
    if admin_tls is not None:
        print(f"admin listening on https://{admin_tls[0]}:{admin_tls[1]} ({endpoints})",
              flush=True)  # fmt: skip
    if admin is not None and admin != admin_tls:
        print(f"admin listening on http://{admin[0]}:{admin[1]} ({endpoints})", flush=True)


def _trio_run(fn: Any, config: Config, *args: Any) -> int:
    try:
        trio.run(fn, config, *args)
    except BaseException as exc:
        found = _startup_failure(exc)
        if found is None:
            raise
        # One line, no traceback: a port in use, a data directory another process owns, a
        # backend URL refused (a usage error: 2)... and whatever the backend URL holds secret
        # taken out of it, whoever wrote the message.
        message = mask_url(config.backend.url).redact(_one_line(found))
        print(f"streamgate: {message}", file=sys.stderr)
        if isinstance(found, BackendUrlError):
            return 2
        return int(getattr(found, "exit_code", 1))  # a worker's (supervisor.WorkerFailed)
    return 0


def _startup_failure(exc: BaseException) -> BaseException | None:
    """What stopped ``run`` when it is reported as one line (an ``OSError``, a
    ``GatewayError``, a refused backend URL), looking inside the nurseries' exception groups."""
    if isinstance(exc, GatewayError | OSError | BackendUrlError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            if (found := _startup_failure(inner)) is not None:
                return found
    return None


def _one_line(exc: BaseException) -> str:
    text = exc.message if isinstance(exc, GatewayError) else str(exc)
    return " ".join(text.split())


def _endpoint(stack: contextlib.ExitStack, args: argparse.Namespace, given: str | None,
              protocol: str) -> str:  # fmt: skip
    """The endpoint to measure: ``given``, else a ``streamgate run`` child on a temp dir."""
    if given is not None:
        return given
    return _started(stack, args, protocol).address


def _started(
    stack: contextlib.ExitStack, args: argparse.Namespace, protocol: str, extra: Sequence[str] = ()
) -> GatewayChild:
    """A ``streamgate run`` child (``extra`` arguments given to it): on ``--backend`` with
    ``--workers`` where the command has them, else on the embedded backend in a temp dir."""
    from gateway.bench.kafka import gateway_process

    backend = getattr(args, "backend", None)
    workers = getattr(args, "workers", 1)
    if backend is None:
        tmp = stack.enter_context(
            tempfile.TemporaryDirectory(dir=args.dir, prefix="streamgate-bench-")
        )
        child = stack.enter_context(
            gateway_process(tmp, args.fsync, protocol, workers=workers, extra=extra)
        )
        print(f"started streamgate (embedded, fsync {args.fsync}) on {child.address}", flush=True)
    else:
        child = stack.enter_context(
            gateway_process("", args.fsync, protocol, backend=backend, workers=workers, extra=extra)
        )
        print(f"started streamgate ({workers} worker(s)) on {child.address}", flush=True)
    return child


def _bench_kafka(args: argparse.Namespace) -> int:
    from gateway.bench.kafka import bench_kafka, make_bench_tls

    sizes = [int(s) for s in args.sizes.split(",") if s]
    if args.tls and args.bootstrap is not None:
        print("streamgate: --tls measures a gateway it starts: not with --bootstrap",
              file=sys.stderr)  # fmt: skip
        return 2
    if args.transaction_every < 0:
        print("streamgate: --transaction-every takes a count of messages (0: off)",
              file=sys.stderr)  # fmt: skip
        return 2
    if (args.idempotent or args.transaction_every) and args.acks != "all":
        print("streamgate: an idempotent or transactional producer needs --acks all",
              file=sys.stderr)  # fmt: skip
        return 2
    with contextlib.ExitStack() as stack:
        cpu = None
        # (transport, bootstrap, client settings) measured one after the other, per size
        endpoints: list[tuple[str, str, dict[str, str]]] = []
        if args.bootstrap is not None:
            endpoints.append(("plaintext", args.bootstrap, {}))
        else:
            tls = None
            if args.tls:
                certs_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="sg-tls-"))
                tls = make_bench_tls(certs_dir)
            run_args = tls.run_args(fixed=args.workers > 1) if tls is not None else []
            child = _started(stack, args, "kafka", run_args)
            cpu = child.cpu_seconds
            endpoints.append(("plaintext", child.address, {}))
            if tls is not None:
                assert child.tls_address is not None, "the gateway reported no TLS listener"
                print(f"with TLS on {child.tls_address}", flush=True)
                endpoints.append(("tls", child.tls_address, tls.client_config()))
        for size in sizes:
            for transport, bootstrap, client in endpoints:
                result = bench_kafka(
                    bootstrap, message_size=size, messages=args.messages,
                    partitions=args.partitions, acks=args.acks, cpu=cpu,
                    client_config=client, transport=transport, idempotent=args.idempotent,
                    transaction_every=args.transaction_every,
                )  # fmt: skip
                print(result.format(), flush=True)
    return 0


def _bench_iggy(args: argparse.Namespace) -> int:
    from gateway.bench.iggy import bench_iggy

    sizes = [int(s) for s in args.sizes.split(",") if s]
    with contextlib.ExitStack() as stack:
        address = _endpoint(stack, args, args.address, "iggy")
        for size in sizes:
            result = bench_iggy(
                address, message_size=size, batch=args.batch, messages=args.messages,
                username=args.username, password=args.password,
            )  # fmt: skip
            print(result.format(), flush=True)
    return 0


def _bench_rabbitmq_stream(args: argparse.Namespace) -> int:
    from gateway.bench.rabbitmq_stream import bench_rabbitmq_stream

    sizes = [int(s) for s in args.sizes.split(",") if s]
    kinds = [k for k in args.kinds.split(",") if k]
    with contextlib.ExitStack() as stack:
        address = _endpoint(stack, args, args.address, "rabbitmq_stream")
        for size in sizes:
            for kind in kinds:
                result = bench_rabbitmq_stream(
                    address, message_size=size, kind=kind, batch=args.batch,
                    in_flight=args.in_flight, messages=args.messages, username=args.username,
                    password=args.password,
                )  # fmt: skip
                print(result.format(), flush=True)
    return 0


def _bench_backends(args: argparse.Namespace) -> int:
    from gateway.bench import side_by_side as sbs

    sizes = tuple(int(s) for s in args.sizes.split(",") if s)
    counts = [int(m) for m in args.messages.split(",") if m]
    settings = sbs.Settings(
        sizes=sizes, messages=sbs.counts_per_size(sizes, counts),
        singles=args.singles, rounds=args.rounds, warm_up=args.warm_up, kind=args.kind,
        dedup=args.dedup, batch=args.batch, in_flight=args.in_flight, acks=args.acks,
    )  # fmt: skip
    report = functools.partial(print, flush=True)
    if args.rabbitmq_url is None and args.kafka_url is None:
        print("streamgate: give --rabbitmq-url and/or --kafka-url", file=sys.stderr)
        return 2
    try:
        found = sbs.run_side_by_side(
            rabbitmq_url=args.rabbitmq_url, kafka_url=args.kafka_url, settings=settings,
            report=report,
        )  # fmt: skip
    except KeyboardInterrupt:  # the gateway children are stopped by then
        print("streamgate: interrupted", file=sys.stderr)
        return 130
    print(f"\n{sbs.format_table(found, settings)}\n", flush=True)
    print("\n".join(sbs.verdicts(found)), flush=True)
    return 0


def _bench(args: argparse.Namespace) -> int:
    from gateway.bench.embedded import bench_embedded, format_result

    if args.target == "kafka":
        return _bench_kafka(args)
    if args.target == "iggy":
        return _bench_iggy(args)
    if args.target == "rabbitmq-stream":
        return _bench_rabbitmq_stream(args)
    if args.target == "backends":
        return _bench_backends(args)
    if args.target == "compare":
        from gateway.bench.compare import main as compare

        return compare(args)

    sizes = [int(s) for s in args.sizes.split(",") if s]
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="streamgate-bench-") as tmp:
        for size in sizes:
            run = functools.partial(
                bench_embedded, tmp, message_size=size, batch_size=args.batch,
                total_messages=args.messages, fsync=args.fsync,
            )  # fmt: skip
            result = trio.run(run)
            print(format_result(result), flush=True)
    return 0


def _verify(data_dir: str, *, repair: bool) -> int:
    """One line per problem on stdout, a summary on stderr; 0 clean, 1 damage found."""
    from gateway.backends.embedded.verify import Summary, verify

    summary = Summary()
    for line in verify(data_dir, summary, repair=repair):
        print(line, flush=True)
    print(f"streamgate verify: {summary.segments} segment(s) in {summary.partitions}"
          f" partition(s), {summary.problems} problem(s)", file=sys.stderr)  # fmt: skip
    return 1 if summary.problems else 0


# What the pipeline needs that `make run` does not install (pyproject's `pipeline` extra).
_PIPELINE_MODULES = ("pyspark", "pyarrow")


def _pipeline_argv(argv: Sequence[str]) -> list[str] | None:
    """The pipeline's arguments for ``streamgate pipeline ...`` and ``streamgate bench spark``."""
    if argv[:1] == ["pipeline"]:
        return list(argv[1:])
    if argv[:2] == ["bench", "spark"]:
        return ["bench", *argv[2:]]
    return None


def _hand_over(argv: list[str]) -> int:
    """``python -m pipeline ARGV`` in this process's place (same pid, stdio and signals): the
    gateway never imports the pipeline (DESIGN.md §1), it hands the command over. With
    PYTHONSAFEPATH (inherited by Spark's Python workers too), a ``pipeline`` directory in the
    current directory does not stand in for streamgate's."""
    missing = [m for m in _PIPELINE_MODULES if importlib.util.find_spec(m) is None]
    if missing:
        print(f"streamgate: the Spark pipeline needs the pipeline extra (pip install "
              f"'streamgate[pipeline]'); not installed: {', '.join(missing)}",
              file=sys.stderr)  # fmt: skip
        return 2
    sys.stdout.flush()
    sys.stderr.flush()
    env = {**os.environ, "PYTHONSAFEPATH": "1"}
    os.execve(sys.executable, [sys.executable, "-m", "pipeline", *argv], env)


def main(argv: Sequence[str] | None = None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    if (handed := _pipeline_argv(given)) is not None:
        return _hand_over(handed)
    args = _parser().parse_args(given)
    if args.command == "run":
        return _run(args)
    if args.command == "bench":
        return _bench(args)
    if args.command == "verify":
        return _verify(args.data_dir, repair=args.repair)
    if args.command == "users":
        return run_users(args)
    if getattr(args, "client", None):
        return run_client(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
