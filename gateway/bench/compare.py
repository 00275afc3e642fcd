"""Server CPU per message, streamgate beside the reference brokers (``streamgate bench compare``),
the yardstick of the performance issue. Not a test: it prints a table and writes JSON.

What it counts is the servers' CPU, not the clients': user + system time from /proc of the
gateway's process tree (a ``streamgate run`` child started here, ``bench.kafka.gateway_process``)
and of the broker's (the pid given: Tansu's process, RabbitMQ's beam.smp with its children),
read before and after each phase (``bench.kafka.tree_cpu_seconds``), divided by the messages of
that phase. Whatever else the process does meanwhile (RabbitMQ's schedulers spin while idle)
is part of its figure. Throughput (msg/s) is printed beside it.

Ways, each a client against one server, every one measured with the existing benchmarks:
``bench_kafka`` (confluent-kafka, acks=all, produce then consume), ``bench_iggy``
(apache-iggy, batches of 1,000 sent then polled) and ``bench_rabbitmq_stream`` (rstream, AMQP
messages in batches of 1,000, every one confirmed, then consumed), each with the CPU of each
phase: connecting, logging in and making and deleting the topic or stream are left out. The
rows (``ROWS``) put ways side by side: streamgate embedded against the broker direct,
streamgate as a proxy on the broker (its own CPU and the broker's behind it, against the broker
direct), and 1,000 Kafka partitions against one.

Fairness: per size, every way runs once per round and the order rotates by one each round,
so a load elsewhere on the machine falls on each way in turn; every figure is the median of the
rounds, every ratio the ratio of two medians. Before the first round each way runs once on a
few messages (not reported): imports, connections, a first topic or stream. Every run deletes
its topic or stream afterwards (out of the measure), so no broker carries the earlier runs' data
(Tansu keeps it in memory). Rows whose broker
(its URL and its pid) was not given are skipped, and the output says so.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import importlib.metadata
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field

from gateway.bench.iggy import bench_iggy
from gateway.bench.kafka import bench_kafka, gateway_process, tree_cpu_seconds
from gateway.bench.rabbitmq_stream import bench_rabbitmq_stream

PARTITIONS = 1000
WARM_UP_MESSAGES = 2000
ROLES = ("gateway", "broker")
_TICKS = os.sysconf("SC_CLK_TCK")  # what /proc counts CPU in (proc(5))


@dataclass(frozen=True, slots=True, kw_only=True)
class Phase:
    """One way, one round, one phase: its messages, its seconds and each server's CPU."""

    name: str  # "produce", "consume", "produce+consume", "send+poll", ...
    messages: int
    seconds: float
    cpu_s: Mapping[str, float] = field(default_factory=dict)  # role -> CPU seconds

    def rate(self) -> float:
        return self.messages / self.seconds

    def us_per_message(self) -> dict[str, float]:
        return {role: cpu / self.messages * 1e6 for role, cpu in self.cpu_s.items()}


def _together(name: str, *phases: Phase) -> Phase:
    """The phases one after the other (a message's whole trip, produced and consumed), with
    their CPU summed."""
    roles = sorted({role for p in phases for role in p.cpu_s})
    summed = {role: sum(p.cpu_s.get(role, 0.0) for p in phases) for role in roles}
    return Phase(name=name, messages=phases[0].messages, seconds=sum(p.seconds for p in phases),
                 cpu_s=summed)  # fmt: skip


class Meter:
    """CPU of named process trees, sampled at each call. The call returns the first tree's
    total, so that it serves as ``bench_kafka``'s and ``bench_iggy``'s ``cpu``, which each
    samples four times: before and after producing (sending), before and after consuming
    (polling)."""

    def __init__(self, pids: Mapping[str, int]) -> None:
        self.pids = dict(pids)
        self.samples: list[dict[str, float]] = []

    def __call__(self) -> float:
        sample = {role: tree_cpu_seconds(pid) for role, pid in self.pids.items()}
        self.samples.append(sample)
        return next(iter(sample.values()))

    def spent(self, start: int, end: int) -> dict[str, float]:
        a, b = self.samples[start], self.samples[end]
        return {role: b[role] - a[role] for role in self.pids}


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where a way's client goes, the trees to meter, and (rstream) how it logs in."""

    address: str
    pids: Mapping[str, int]
    login: tuple[str, str, str] = ("/", "guest", "guest")  # vhost, user, password


def _phases(meter: Meter, bench: str, first: tuple[str, int, float],
            second: tuple[str, int, float]) -> list[Phase]:  # fmt: skip
    """A bench's two phases (name, messages, seconds), each with the CPU ``meter`` read around
    it (the bench samples it four times: before and after each), and both together."""
    if len(meter.samples) != 4:
        raise RuntimeError(f"{bench} sampled the CPU {len(meter.samples)} times, not 4")
    a = Phase(name=first[0], messages=first[1], seconds=first[2], cpu_s=meter.spent(0, 1))
    b = Phase(name=second[0], messages=second[1], seconds=second[2], cpu_s=meter.spent(2, 3))
    return [a, b, _together(f"{a.name}+{b.name}", a, b)]


def _kafka(end: Endpoint, size: int, messages: int, partitions: int = 1) -> list[Phase]:
    meter = Meter(end.pids)
    r = bench_kafka(end.address, message_size=size, messages=messages, partitions=partitions,
                    singles=0, cpu=meter, delete_topic=True)  # fmt: skip
    return _phases(meter, "bench_kafka", ("produce", r.messages, r.produce_seconds),
                   ("consume", r.consumed, r.consume_seconds))  # fmt: skip


def _iggy(end: Endpoint, size: int, messages: int) -> list[Phase]:
    meter = Meter(end.pids)
    r = bench_iggy(end.address, message_size=size, messages=messages, cpu=meter)
    return _phases(meter, "bench_iggy", ("send", r.messages, r.send_seconds),
                   ("poll", r.polled, r.poll_seconds))  # fmt: skip


def _rstream(end: Endpoint, size: int, messages: int) -> list[Phase]:
    vhost, username, password = end.login
    meter = Meter(end.pids)
    r = bench_rabbitmq_stream(end.address, message_size=size, messages=messages, vhost=vhost,
                              username=username, password=password, cpu=meter)  # fmt: skip
    return _phases(meter, "bench_rabbitmq_stream", ("publish", r.confirmed, r.publish_seconds),
                   ("consume", r.consumed, r.consume_seconds))  # fmt: skip


Ratio = tuple[str, str, str]  # label, "way:role" over "way:role"


@dataclass(frozen=True, slots=True)
class Row:
    name: str
    title: str
    needs: str | None  # the broker it measures ("kafka" | "rabbitmq"), None: streamgate alone
    ways: tuple[str, ...]
    ratios: tuple[Ratio, ...]


def _against_broker(broker: str, gateway_way: str) -> tuple[Ratio, ...]:
    """A row's ratios: the gateway's CPU over the broker's direct; for a proxy also the
    broker's behind it over its own direct."""
    direct = f"{broker}-direct:broker"
    if gateway_way.endswith("proxy"):
        return (("proxy streamgate / broker direct", f"{gateway_way}:gateway", direct),
                ("broker behind / broker direct", f"{gateway_way}:broker", direct))  # fmt: skip
    return (("streamgate / broker direct", f"{gateway_way}:gateway", direct),)


ROWS = (
    Row("kafka", "Kafka: streamgate embedded vs the broker direct", "kafka",
        ("kafka-embedded", "kafka-direct"), _against_broker("kafka", "kafka-embedded")),
    Row("kafka-proxy", "Kafka: streamgate on the broker (--backend) vs the broker direct",
        "kafka", ("kafka-proxy", "kafka-direct"), _against_broker("kafka", "kafka-proxy")),
    Row("iggy", "Iggy: streamgate embedded", None, ("iggy-embedded",), ()),
    Row("rabbitmq", "RabbitMQ Stream: streamgate embedded vs the broker direct", "rabbitmq",
        ("rabbitmq-embedded", "rabbitmq-direct"),
        _against_broker("rabbitmq", "rabbitmq-embedded")),
    Row("rabbitmq-proxy", "RabbitMQ Stream: streamgate on the broker vs the broker direct",
        "rabbitmq", ("rabbitmq-proxy", "rabbitmq-direct"),
        _against_broker("rabbitmq", "rabbitmq-proxy")),
    Row("kafka-partitions", f"Kafka: streamgate embedded, {PARTITIONS} partitions vs 1", None,
        ("kafka-embedded", "kafka-embedded-1000p"),
        ((f"{PARTITIONS} / 1 partition", "kafka-embedded-1000p:gateway",
          "kafka-embedded:gateway"),)),
)  # fmt: skip
WAYS = ("kafka-embedded", "kafka-direct", "kafka-proxy", "kafka-embedded-1000p", "iggy-embedded",
        "rabbitmq-embedded", "rabbitmq-direct", "rabbitmq-proxy")  # fmt: skip
Measure = Callable[[int, int], list[Phase]]  # (size, messages) -> phases


@dataclass(frozen=True, slots=True, kw_only=True)
class Brokers:
    kafka_url: str | None = None
    kafka_pid: int | None = None
    rabbitmq_url: str | None = None
    rabbitmq_pid: int | None = None

    def missing(self, broker: str | None) -> str | None:
        """Why a row on ``broker`` cannot run, None when it can."""
        if broker is None or (getattr(self, f"{broker}_url") and getattr(self, f"{broker}_pid")):
            return None
        return f"needs --{broker}-url and --{broker}-pid"


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    sizes: tuple[int, ...] = (100, 1024)
    messages: int = 100_000
    rounds: int = 3
    rows: tuple[str, ...] = tuple(r.name for r in ROWS)
    warm_up: bool = True
    fsync: str = "interval:1000"  # the embedded gateways'


def _measures(stack: contextlib.ExitStack, ways: Sequence[str], brokers: Brokers,
              settings: Settings, tmp: str) -> dict[str, Measure]:  # fmt: skip
    """A measure per way, the gateways they need started (each once, on ephemeral ports)."""
    from gateway.backends.kafka.cluster import parse_url as parse_kafka_url
    from gateway.backends.rabbitmq_stream.backend import parse_url as parse_rabbitmq_url

    started: dict[tuple[str, str | None], Endpoint] = {}

    def gateway(
        protocol: str, backend: str | None = None, broker_pid: int | None = None
    ) -> Endpoint:
        if (protocol, backend) not in started:
            data = os.path.join(tmp, protocol)
            child = stack.enter_context(
                gateway_process(data, settings.fsync, protocol, backend=backend)
            )
            pids = {"gateway": child.pid} | ({"broker": broker_pid} if broker_pid else {})
            started[protocol, backend] = Endpoint(child.address, pids)
        return started[protocol, backend]

    measures: dict[str, Measure] = {}
    for way in ways:
        if way.startswith("kafka"):
            url, pid = brokers.kafka_url, brokers.kafka_pid
            if way == "kafka-direct":
                assert url and pid
                servers = ",".join(f"{h}:{p}" for h, p in parse_kafka_url(url)[0])
                end = Endpoint(servers, {"broker": pid})
            else:
                end = gateway("kafka", url, pid) if way == "kafka-proxy" else gateway("kafka")
            parts = PARTITIONS if way == "kafka-embedded-1000p" else 1
            measures[way] = functools.partial(_kafka, end, partitions=parts)
        elif way == "iggy-embedded":
            end = gateway("iggy")
            measures[way] = functools.partial(_iggy, end)
        else:
            url, pid = brokers.rabbitmq_url, brokers.rabbitmq_pid
            if way == "rabbitmq-direct":
                assert url and pid
                b = parse_rabbitmq_url(url)
                login = (b.vhost, b.username, b.password)
                end = Endpoint(f"{b.host}:{b.port}", {"broker": pid}, login)
            elif way == "rabbitmq-proxy":
                # the gateway maps its default namespace ("/") onto the backend's virtual
                # host, and lets the default user in on loopback (Endpoint's login)
                end = gateway("rabbitmq_stream", url, pid)
            else:
                end = gateway("rabbitmq_stream")
            measures[way] = functools.partial(_rstream, end)
    return measures


@dataclass(slots=True)
class Results:
    settings: Settings
    skipped: dict[str, str]  # row -> why
    rows: list[Row]
    versions: dict[str, str] = field(default_factory=dict)
    runs: dict[tuple[int, str], list[list[Phase]]] = field(default_factory=dict)  # per round

    def median(self, size: int, way: str) -> dict[str, dict[str, float]]:
        """Per phase: messages, msg/s and each role's CPU us/msg, medians of the rounds."""
        rounds = self.runs[size, way]
        out: dict[str, dict[str, float]] = {}
        for i, phase in enumerate(rounds[0]):
            same = [r[i] for r in rounds]
            if len({p.messages for p in same}) != 1:
                raise RuntimeError(f"{way} {size} B: rounds moved different message counts")
            figures = {"messages": phase.messages,
                       "msg_per_s": statistics.median(p.rate() for p in same)}  # fmt: skip
            for role in phase.cpu_s:
                us = statistics.median(p.us_per_message()[role] for p in same)
                figures[f"{role}_cpu_us_per_msg"] = us
            out[phase.name] = figures
        return out

    def ratios(self, size: int, row: Row) -> list[tuple[str, str, float]]:
        """(label, phase, value) for every phase where both sides have their CPU."""
        found = []
        for label, over, under in row.ratios:
            (top_way, top_role), (bottom_way, bottom_role) = over.split(":"), under.split(":")
            top, bottom = self.median(size, top_way), self.median(size, bottom_way)
            for phase, figures in top.items():
                a = figures.get(f"{top_role}_cpu_us_per_msg")
                b = bottom.get(phase, {}).get(f"{bottom_role}_cpu_us_per_msg")
                if a is not None and b:
                    found.append((label, phase, a / b))
        return found


def run_compare(
    brokers: Brokers, settings: Settings, report: Callable[[str], None] = print
) -> Results:
    unknown = set(settings.rows) - {r.name for r in ROWS}
    if unknown:
        raise ValueError(f"no such rows: {', '.join(sorted(unknown))}")
    if settings.rounds < 1 or settings.messages < 1 or not settings.sizes:
        raise ValueError("rounds, messages and sizes: at least one")
    wanted = [r for r in ROWS if r.name in settings.rows]
    skipped = {r.name: why for r in wanted if (why := brokers.missing(r.needs)) is not None}
    for name, why in skipped.items():
        report(f"skipping row {name}: {why}")
    rows = [r for r in wanted if r.name not in skipped]
    results = Results(settings, skipped, rows, versions(brokers))
    ways = [w for w in WAYS if any(w in r.ways for r in rows)]
    if not ways:
        return results
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="streamgate-compare-"))
        measures = _measures(stack, ways, brokers, settings, tmp)
        if settings.warm_up:
            for way in ways:
                report(f"warming up {way}")
                measures[way](settings.sizes[0], min(WARM_UP_MESSAGES, settings.messages))
        for size in settings.sizes:
            for round_ in range(settings.rounds):
                turn = round_ % len(ways)
                for way in ways[turn:] + ways[:turn]:
                    report(f"{size} B x {settings.messages}, {way}, round {round_ + 1}")
                    phases = measures[way](size, settings.messages)
                    results.runs.setdefault((size, way), []).append(phases)
    return results


def _version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def versions(brokers: Brokers) -> dict[str, str]:
    """The clients', streamgate's and, when cheap, the brokers'."""
    from gateway import __version__

    found = {"python": platform.python_version(), "streamgate": __version__}
    for name in ("confluent-kafka", "rstream", "apache-iggy"):
        found[name] = _version(name)
    with contextlib.suppress(ImportError):
        from confluent_kafka import libversion

        found["librdkafka"] = libversion()[0]
    if brokers.kafka_pid:  # Tansu answers --version; another broker's binary may not
        try:
            exe = os.readlink(f"/proc/{brokers.kafka_pid}/exe")
            done = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=5)
            found["kafka broker"] = done.stdout.strip() or f"unknown ({exe})"
        except (OSError, subprocess.SubprocessError) as exc:
            found["kafka broker"] = f"unknown ({exc})"
    if brokers.rabbitmq_url:
        try:
            found["rabbitmq broker"] = asyncio.run(_rabbitmq_version(brokers.rabbitmq_url))
        except Exception as exc:  # a version is not worth failing the run
            found["rabbitmq broker"] = f"unknown ({exc})"
    return found


async def _rabbitmq_version(url: str) -> str:
    """From the server's PeerProperties answer (product, version)."""
    from rstream import Producer

    from gateway.backends.rabbitmq_stream.backend import parse_url

    b = parse_url(url)
    producer = Producer(b.host, b.port, vhost=b.vhost, username=b.username, password=b.password)
    await producer.start()
    try:
        props = (await producer.default_client).server_properties or {}
    finally:
        await producer.close()
    return f"{props.get('product', '?')} {props.get('version', '?')}"


def to_json(results: Results) -> dict[str, object]:
    rows = []
    for row in results.rows:
        for size in results.settings.sizes:
            ways = {way: {"median": results.median(size, way),
                          "rounds": [[asdict(p) for p in phases]
                                     for phases in results.runs[size, way]]}
                    for way in row.ways}  # fmt: skip
            ratios = [{"label": label, "phase": phase, "value": value}
                      for label, phase, value in results.ratios(size, row)]  # fmt: skip
            rows.append({"row": row.name, "title": row.title, "size": size, "ways": ways,
                         "ratios": ratios})  # fmt: skip
    settings = asdict(results.settings)
    return {"settings": settings, "versions": results.versions, "skipped": results.skipped,
            "rows": rows}  # fmt: skip


def format_table(results: Results) -> str:
    """A line per row, size, way and phase; after each row and size its ratios, one line each."""
    head = ("row", "size", "way", "phase", "messages", "msg/s", "gateway us/msg", "broker us/msg")
    lines: list[tuple[str, ...] | str] = []
    for row in results.rows:
        for size in results.settings.sizes:
            for way in row.ways:
                for phase, f in results.median(size, way).items():
                    cpu = [f.get(f"{role}_cpu_us_per_msg") for role in ROLES]
                    shown = tuple(f"{c:.2f}" if c is not None else "-" for c in cpu)
                    lines.append((row.name, f"{size} B", way, phase, f"{f['messages']:.0f}",
                                  f"{f['msg_per_s']:,.0f}", *shown))  # fmt: skip
            by_label: dict[str, list[str]] = {}
            for label, phase, value in results.ratios(size, row):
                by_label.setdefault(label, []).append(f"{phase} {value:.2f}")
            lines += [f"  {size} B CPU ratio {k}: {', '.join(v)}" for k, v in by_label.items()]
            lines.append("")
    rows = [r for r in lines if isinstance(r, tuple)]
    widths = [max(len(r[i]) for r in (head, *rows)) for i in range(len(head))]

    def line(cells: tuple[str, ...] | str) -> str:
        if isinstance(cells, str):
            return cells
        pairs = enumerate(zip(cells, widths, strict=True))
        return "  ".join(c.ljust(w) if i < 4 else c.rjust(w) for i, (c, w) in pairs)

    out = [f"server CPU (user+sys from /proc, in {1000 / _TICKS:g} ms ticks) per message; every "
           f"figure the median of {results.settings.rounds} round(s) in rotated order",
           "", line(head), "  ".join("-" * w for w in widths)]  # fmt: skip
    out += map(line, lines)
    out += [f"skipped {name}: {why}" for name, why in results.skipped.items()]
    out += ["versions: " + ", ".join(f"{k} {v}" for k, v in results.versions.items())]
    return "\n".join(out).rstrip()


def add_parser(bench_sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = bench_sub.add_parser(
        "compare", help="server CPU per message: streamgate vs the reference brokers"
    )
    p.add_argument("--kafka-url", default=None, help="kafka://host:port[?broker=tansu]")
    p.add_argument("--kafka-pid", type=int, default=None, help="that broker's process id")
    p.add_argument("--rabbitmq-url", default=None, help="rabbitmq-stream://u:p@host:port/vhost")
    p.add_argument("--rabbitmq-pid", type=int, default=None, help="its beam.smp process id")
    p.add_argument("--sizes", default="100,1024", help="message sizes in bytes")
    p.add_argument("--messages", type=int, default=100_000, help="per size, way and round")
    p.add_argument("--rounds", type=int, default=3, help="each figure the median of these")
    p.add_argument("--rows", default=",".join(r.name for r in ROWS), help="rows to measure")
    p.add_argument("--no-warm-up", dest="warm_up", action="store_false", help="skip warm-up")
    p.add_argument("--fsync", default="interval:1000", help="of the embedded gateways")
    p.add_argument("--json", default=None, metavar="PATH", help="write every figure here")


def main(args: argparse.Namespace) -> int:
    """``streamgate bench compare``."""
    brokers = Brokers(kafka_url=args.kafka_url, kafka_pid=args.kafka_pid,
                      rabbitmq_url=args.rabbitmq_url, rabbitmq_pid=args.rabbitmq_pid)  # fmt: skip
    settings = Settings(
        sizes=tuple(int(s) for s in args.sizes.split(",") if s), messages=args.messages,
        rounds=args.rounds, rows=tuple(r for r in args.rows.split(",") if r),
        warm_up=args.warm_up, fsync=args.fsync,
    )  # fmt: skip
    report = lambda line: print(line, flush=True)  # noqa: E731
    try:
        results = run_compare(brokers, settings, report)
    except ValueError as exc:
        print(f"streamgate: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # the gateway children are stopped by then
        print("streamgate: interrupted", file=sys.stderr)
        return 130
    print(f"\n{format_table(results)}", flush=True)
    if args.json is not None:
        with open(args.json, "w") as out:
            json.dump(to_json(results), out, indent=1)
        print(f"written to {args.json}", flush=True)
    return 0


__all__ = ["ROWS", "Brokers", "Meter", "Phase", "Results", "Settings", "add_parser", "main",
           "run_compare", "to_json", "versions"]  # fmt: skip
