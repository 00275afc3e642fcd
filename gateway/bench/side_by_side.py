"""One client straight against a real broker, and the same client through streamgate with that
broker as its backend, side by side in one run (``streamgate bench backends``). Not a test: it
prints one table.

For each broker URL given, a ``streamgate run`` child is started with ``--backend <url>``
(``bench.kafka.gateway_process``, ready once its ``/readyz`` says the broker answers), and the
client of that broker's protocol runs the same measure both ways: rstream with
``bench_rabbitmq_stream`` against a ``rabbitmq-stream://`` URL (publish with every message
confirmed, then consume from the first offset), confluent-kafka with ``bench_kafka`` against a
``kafka://`` URL (produce with acks=all, then consume from offset 0). Each measure uses a fresh
stream or topic.

Fairness: both ways see the same message counts, sizes and client settings, and run one right
after the other for each size, so a load elsewhere on the machine hits both alike. Before the
first size each way is warmed up once (a small run that is not reported): connections, the
broker's first stream or topic, the gateway's imports and its backend connection. With
``rounds`` above one, each size runs that many times with the order swapped every round
(direct first, then gateway first, ...) and each figure is the median of its rounds.

Figures, per client and size: throughput both ways (msg/s; publish counts confirmed or
acknowledged messages) and the ratio gateway/direct; the publish latency one message at a time
(each confirmed before the next is sent: what the gateway adds to one request) and under load
(rstream: a batch's send to its last confirm, ``in_flight`` batches outstanding; confluent-kafka:
produce() to the delivery report, mostly queueing), p50 and p99 both ways and what the gateway
adds. The gateway and the client share the machine, as a sidecar does.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from gateway.backends.kafka.cluster import parse_url as parse_kafka_url
from gateway.backends.rabbitmq_stream.backend import parse_url as parse_rabbitmq_url
from gateway.bench.kafka import KafkaBenchResult, bench_kafka, gateway_process
from gateway.bench.rabbitmq_stream import RabbitStreamBenchResult, bench_rabbitmq_stream

WARM_UP_MESSAGES = 2000
WARM_UP_SINGLES = 50
AIM_RATIO = 0.8  # the aim: proxied throughput >= 0.8 of direct ...
AIM_ADDED_P50_MS = 1.0  # ... and at most 1 ms added to the p50 publish latency


@dataclass(frozen=True, slots=True, kw_only=True)
class Figures:
    """One client, one size, one way (direct or through the gateway)."""

    published: int  # at full speed; then ``singles`` one at a time
    singles: int
    consumed: int  # all of them
    batches: int  # latency samples under load
    publish_rate: float  # msg/s
    consume_rate: float
    one_p50_ms: float
    one_p99_ms: float
    load_p50_ms: float
    load_p99_ms: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Comparison:
    client: str  # "rstream" | "confluent-kafka"
    size: int
    direct: Figures
    gateway: Figures
    rounds: int = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    sizes: tuple[int, ...]
    messages: tuple[int, ...]  # one count per size
    singles: int = 1000  # one at a time, after the full-speed ones
    rounds: int = 1
    warm_up: bool = True
    kind: str = "amqp"  # rstream: amqp | raw
    dedup: bool = True  # rstream: a publisher_name (deduplication), as most applications run
    batch: int = 1000  # rstream: messages per Publish frame
    in_flight: int = 10  # rstream: unconfirmed batches at most
    acks: str = "all"  # confluent-kafka
    fsync: str = "interval:1000"  # the gateway child's (it stores nothing on these backends)

    def plan(self) -> list[tuple[int, int]]:
        return list(zip(self.sizes, self.messages, strict=True))


def counts_per_size(sizes: Sequence[int], messages: Sequence[int]) -> tuple[int, ...]:
    """One message count per size: as given, or the one count for every size."""
    if len(messages) == 1:
        return tuple(messages) * len(sizes)
    if len(messages) != len(sizes):
        raise ValueError(f"{len(messages)} message counts for {len(sizes)} sizes")
    return tuple(messages)


def _rstream_figures(r: RabbitStreamBenchResult) -> Figures:
    return Figures(
        published=r.confirmed,
        singles=r.singles,
        consumed=r.consumed,
        batches=-(-r.messages // r.batch),
        publish_rate=r.confirmed / r.publish_seconds,
        consume_rate=r.consumed / r.consume_seconds,
        one_p50_ms=r.one_p50_ms,
        one_p99_ms=r.one_p99_ms,
        load_p50_ms=r.publish_p50_ms,
        load_p99_ms=r.publish_p99_ms,
    )


def _kafka_figures(r: KafkaBenchResult) -> Figures:
    return Figures(
        published=r.messages,
        singles=r.consumed - r.messages,
        consumed=r.consumed,
        batches=r.messages,  # a delivery report per message
        publish_rate=r.messages / r.produce_seconds,
        consume_rate=r.consumed / r.consume_seconds,
        one_p50_ms=r.one_p50_ms,
        one_p99_ms=r.one_p99_ms,
        load_p50_ms=r.latency_p50_ms,
        load_p99_ms=r.latency_p99_ms,
    )


def _median(runs: Sequence[Figures]) -> Figures:
    if len(runs) == 1:
        return runs[0]
    first = runs[0]
    for f in runs[1:]:
        if (f.published, f.singles, f.consumed) != (first.published, first.singles, first.consumed):
            raise RuntimeError("rounds delivered different message counts")

    def med(pick: Callable[[Figures], float]) -> float:
        return statistics.median(pick(f) for f in runs)

    return Figures(
        published=first.published,
        singles=first.singles,
        consumed=first.consumed,
        batches=first.batches,
        publish_rate=med(lambda f: f.publish_rate),
        consume_rate=med(lambda f: f.consume_rate),
        one_p50_ms=med(lambda f: f.one_p50_ms),
        one_p99_ms=med(lambda f: f.one_p99_ms),
        load_p50_ms=med(lambda f: f.load_p50_ms),
        load_p99_ms=med(lambda f: f.load_p99_ms),
    )


WAYS = ("direct", "gateway")
Measure = Callable[[str, int, int, int], Figures]  # (way, size, messages, singles)


def _compare(
    client: str, measure: Measure, settings: Settings, report: Callable[[str], None]
) -> Iterator[Comparison]:
    """Each size both ways, interleaved; the warm-up first."""
    if settings.warm_up:
        for way in WAYS:
            report(f"{client}: warming up {way}")
            warm_up = min(WARM_UP_MESSAGES, settings.messages[0])
            measure(way, settings.sizes[0], warm_up, WARM_UP_SINGLES)
    for size, messages in settings.plan():
        runs: dict[str, list[Figures]] = {"direct": [], "gateway": []}
        for round_ in range(settings.rounds):
            for way in WAYS if round_ % 2 == 0 else WAYS[::-1]:
                report(f"{client}: {size} B x {messages}, {way}, round {round_ + 1}")
                figures = measure(way, size, messages, settings.singles)
                expected = messages + min(settings.singles, messages)
                if figures.consumed != expected:  # the bench raises first; a last guard
                    raise RuntimeError(f"{client} {way}: {figures.consumed} of {expected} back")
                runs[way].append(figures)
        yield Comparison(
            client=client, size=size, direct=_median(runs["direct"]),
            gateway=_median(runs["gateway"]), rounds=settings.rounds,
        )  # fmt: skip


def compare_rabbitmq(
    url: str, settings: Settings, report: Callable[[str], None] = print
) -> list[Comparison]:
    """rstream straight to the RabbitMQ at ``url``, and through a gateway on it."""
    broker = parse_rabbitmq_url(url)
    ways = {"direct": f"{broker.host}:{broker.port}"}

    def measure(way: str, size: int, messages: int, singles: int) -> Figures:
        direct = way == "direct"
        result = bench_rabbitmq_stream(
            ways[way], message_size=size, kind=settings.kind, batch=settings.batch,
            in_flight=settings.in_flight, messages=messages, singles=min(singles, messages),
            dedup=settings.dedup,
            # the gateway maps its default namespace ("/") onto the backend's virtual host,
            # and lets the default user in on loopback
            vhost=broker.vhost if direct else "/",
            username=broker.username if direct else "guest",
            password=broker.password if direct else "guest",
        )  # fmt: skip
        return _rstream_figures(result)

    with gateway_process("", settings.fsync, "rabbitmq_stream", backend=url) as gateway:
        ways["gateway"] = gateway.address
        report(f"rstream: broker {ways['direct']}, streamgate {ways['gateway']} on it")
        return list(_compare("rstream", measure, settings, report))


def compare_kafka(
    url: str, settings: Settings, report: Callable[[str], None] = print
) -> list[Comparison]:
    """confluent-kafka straight to the broker at ``url``, and through a gateway on it."""
    servers, _ = parse_kafka_url(url)
    ways = {"direct": ",".join(f"{host}:{port}" for host, port in servers)}

    def measure(way: str, size: int, messages: int, singles: int) -> Figures:
        result = bench_kafka(
            ways[way], message_size=size, messages=messages, acks=settings.acks, singles=singles
        )
        return _kafka_figures(result)

    with gateway_process("", settings.fsync, "kafka", backend=url) as gateway:
        ways["gateway"] = gateway.address
        report(f"confluent-kafka: broker {ways['direct']}, streamgate {ways['gateway']} on it")
        return list(_compare("confluent-kafka", measure, settings, report))


def _size(size: int) -> str:
    return f"{size // 1024} KiB" if size >= 1024 and size % 1024 == 0 else f"{size} B"


def _rate(value: float) -> str:
    return f"{value:,.0f}"


def _ms(value: float) -> str:
    return f"{value:.3f}"


def format_table(comparisons: Sequence[Comparison], settings: Settings) -> str:
    """One row per client, size and figure: direct, through the gateway, ratio or added."""
    head = ("client", "size", "figure", "count", "direct", "gateway", "ratio", "added")
    rows: list[tuple[str, ...]] = []
    for c in comparisons:
        d, g = c.direct, c.gateway
        publish = f"produce acks={settings.acks}"
        if c.client == "rstream":
            publish = "publish confirmed" + (", dedup" if settings.dedup else "")
        load = (
            f"batch of {settings.batch}, {settings.in_flight} in flight"
            if c.client == "rstream"
            else "per message, full speed"
        )
        name, size = c.client, _size(c.size)

        def count(a: int, b: int) -> str:
            return f"{a}" if a == b else f"{a}/{b}"

        rows.append((name, size, f"{publish} msg/s", count(d.published, g.published),
                     _rate(d.publish_rate), _rate(g.publish_rate),
                     f"{g.publish_rate / d.publish_rate:.2f}", ""))  # fmt: skip
        rows.append((name, size, "consume msg/s", count(d.consumed, g.consumed),
                     _rate(d.consume_rate), _rate(g.consume_rate),
                     f"{g.consume_rate / d.consume_rate:.2f}", ""))  # fmt: skip
        for label, samples, p50, p99 in (
            ("one at a time", count(d.singles, g.singles), "one_p50_ms", "one_p99_ms"),
            (load, count(d.batches, g.batches), "load_p50_ms", "load_p99_ms"),
        ):
            for q, field in (("p50", p50), ("p99", p99)):
                dv, gv = getattr(d, field), getattr(g, field)
                rows.append((name, size, f"publish {q} ms, {label}", samples, _ms(dv), _ms(gv),
                             "", f"{gv - dv:+.3f}"))  # fmt: skip
    widths = [max(len(r[i]) for r in (head, *rows)) for i in range(len(head))]
    left = {0, 1, 2}

    def line(row: tuple[str, ...]) -> str:
        cells = (v.ljust(w) if i in left else v.rjust(w) for i, (v, w) in
                 enumerate(zip(row, widths, strict=True)))  # fmt: skip
        return "  ".join(cells).rstrip()

    rounds = max((c.rounds for c in comparisons), default=1)
    caption = (
        "direct: the client straight to the broker; gateway: through streamgate on it; "
        "ratio: gateway/direct; added: gateway - direct"
        + (f"; medians of {rounds} rounds" if rounds > 1 else "")
    )
    out = [caption, "", line(head), "  ".join("-" * w for w in widths)]
    previous = ""
    for row in rows:
        key = f"{row[0]} {row[1]}"
        if previous and key != previous:
            out.append("")
        previous = key
        out.append(line(row))
    return "\n".join(out)


def verdicts(comparisons: Sequence[Comparison]) -> list[str]:
    """The issue's aim per client and size: publish and consume ratios, added p50 one at a
    time."""
    lines = []
    for c in comparisons:
        d, g = c.direct, c.gateway
        ratio = min(g.publish_rate / d.publish_rate, g.consume_rate / d.consume_rate)
        added = g.one_p50_ms - d.one_p50_ms
        met = ratio >= AIM_RATIO and added <= AIM_ADDED_P50_MS
        lines.append(
            f"{c.client} {_size(c.size)}: lowest ratio {ratio:.2f} (aim >= {AIM_RATIO}), "
            f"added p50 {added:+.3f} ms (aim <= {AIM_ADDED_P50_MS:g} ms): "
            f"{'met' if met else 'missed'}"
        )
    return lines


def run_side_by_side(
    *, rabbitmq_url: str | None, kafka_url: str | None, settings: Settings,
    report: Callable[[str], None] = print,
) -> list[Comparison]:  # fmt: skip
    """Both brokers given (either may be None), one after the other."""
    if rabbitmq_url is None and kafka_url is None:
        raise ValueError("give a RabbitMQ and/or a Kafka URL")
    if settings.rounds < 1 or settings.singles < 0:
        raise ValueError("rounds must be positive, singles not negative")
    if rabbitmq_url is not None:  # a bad URL fails before anything runs
        parse_rabbitmq_url(rabbitmq_url)
    if kafka_url is not None:
        parse_kafka_url(kafka_url)
    comparisons: list[Comparison] = []
    if rabbitmq_url is not None:
        comparisons += compare_rabbitmq(rabbitmq_url, settings, report)
    if kafka_url is not None:
        comparisons += compare_kafka(kafka_url, settings, report)
    return comparisons


__all__ = [
    "Comparison",
    "Figures",
    "Settings",
    "compare_kafka",
    "compare_rabbitmq",
    "counts_per_size",
    "format_table",
    "run_side_by_side",
    "verdicts",
]
