"""confluent-kafka (librdkafka) against a Kafka endpoint: produce and consume throughput, produce
latency. Not a test: it prints figures.

Without ``--bootstrap`` it starts ``streamgate run`` as a child process on the embedded backend
in a temporary directory (the gateway and the client then share the machine, as a sidecar
does), and stops it by pid at the end. With ``--tls`` that gateway's Kafka listener serves TLS
beside plaintext (certificates made on the spot by trustme, the test extra), and every figure
is measured over both, plaintext first, so that the two can be compared from one run.

The producer is plain by default; ``idempotent`` turns on ``enable.idempotence``, and
``transaction_every`` (N > 0) makes it transactional (KIP-98): a ``transactional.id`` of its own,
``init_transactions`` before the clock starts, and a transaction committed every N messages (and
once at the end for the remainder), read back with ``isolation.level=read_committed``.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

_START_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True, kw_only=True)
class KafkaBenchResult:
    transport: str = "plaintext"  # or "tls"
    message_size: int
    messages: int  # produced at full speed
    consumed: int  # those plus the ones sent one at a time (and an idempotent warm-up one)
    produce_seconds: float
    consume_seconds: float
    latency_p50_ms: float  # produce() to delivery report, at full throughput (mostly queueing)
    latency_p99_ms: float
    one_p50_ms: float  # one message at a time, acknowledged before the next is sent
    one_p99_ms: float
    # CPU seconds the started gateway (every worker included) spent while producing at full
    # speed and while consuming; None when the endpoint was not started here.
    produce_cpu_s: float | None = None
    consume_cpu_s: float | None = None
    idempotent: bool = False  # enable.idempotence (a transactional producer is, too)
    transaction_every: int = 0  # messages per committed transaction; 0: no transactions
    transactions: int = 0  # committed while producing at full speed

    @property
    def mode(self) -> str:
        """How the producer wrote: ``plain``, ``idempotent`` or ``transactional, commit every
        N`` (its consumer reading committed messages only)."""
        if self.transaction_every:
            return f"transactional, commit every {self.transaction_every:,}"
        return "idempotent" if self.idempotent else "plain"

    def format(self) -> str:
        mb = self.messages * self.message_size / 1e6
        tag = ""
        if self.transaction_every:
            tag = f" ({self.mode}: {self.transactions:,} transactions, read_committed)"
        elif self.idempotent:
            tag = f" ({self.mode})"
        return (
            f"kafka {self.transport:<9} {self.message_size:>6} B x {self.messages}{tag}: "
            f"produce {self.messages / self.produce_seconds:,.0f} msg/s "
            f"({mb / self.produce_seconds:,.1f} MB/s), latency under load p50 "
            f"{self.latency_p50_ms:.1f} ms p99 {self.latency_p99_ms:.1f} ms, one at a time p50 "
            f"{self.one_p50_ms:.2f} ms p99 {self.one_p99_ms:.2f} ms; "
            f"consume {self.consumed / self.consume_seconds:,.0f} msg/s "
            f"({self.consumed * self.message_size / 1e6 / self.consume_seconds:,.1f} MB/s)"
            + self._cpu()
        )

    def _cpu(self) -> str:
        if self.produce_cpu_s is None or self.consume_cpu_s is None:
            return ""
        return (
            f"; gateway CPU per message: produce {self.produce_cpu_s / self.messages * 1e6:.2f}"
            f" us, consume {self.consume_cpu_s / self.consumed * 1e6:.2f} us"
        )


_TICKS = os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(pid: int) -> float:
    """User + system CPU of ``pid`` and of its live descendants (a supervisor's workers), from
    /proc (proc(5)); what is gone (a worker that died) no longer counts."""
    total = 0.0
    pending = [pid]
    while pending:
        current = pending.pop()
        try:
            stat = Path(f"/proc/{current}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # from field 3; utime is 14, stime 15
        total += (int(fields[11]) + int(fields[12])) / _TICKS
        for task in Path(f"/proc/{current}/task").glob("*"):
            try:
                pending += [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                continue
    return total


@dataclass(frozen=True, slots=True)
class GatewayChild:
    """A started ``streamgate run``: where its listener is, and its process tree's CPU."""

    address: str
    pid: int
    tls_address: str | None = None  # where the same listener serves TLS, when it does

    def cpu_seconds(self) -> float:
        return tree_cpu_seconds(self.pid)


@contextmanager
def gateway_process(
    data_dir: str,
    fsync: str,
    protocol: str = "kafka",
    *,
    backend: str | None = None,
    workers: int = 1,
    extra: Sequence[str] = (),
) -> Iterator[GatewayChild]:
    """A ``streamgate run`` child on ephemeral ports, on the embedded backend in ``data_dir``
    or on the ``backend`` URL (e.g. a real broker), with ``workers`` processes; yields it (the
    address of its ``protocol`` listener, ``host:port``) once ``/readyz`` says the backend
    answers. ``extra`` arguments go to ``run`` as they are (``--set key=value``)."""
    cmd = [
        sys.executable, "-m", "gateway.cli", "run", "--backend", backend or f"embedded:{data_dir}",
        "--fsync", fsync, "--kafka-port", "0", "--rog-port", "0", "--iggy-port", "0",
        "--rabbitmq-stream-port", "0", "--admin-port", "0", "--log-level", "warning",
        "--log-format", "json", "--workers", str(workers), *extra,
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + _START_TIMEOUT_S
        address = admin = ""
        tls_address = None
        while not admin and time.monotonic() < deadline:  # the admin line comes last
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError(f"streamgate exited with {proc.wait()}")
            words = line.split()
            if words[:3] == [protocol, "listening", "on"] and words[4:5] == ["(tls)"]:
                tls_address = words[3]
            elif words[:3] == [protocol, "listening", "on"]:
                address = words[3]
            elif words[:3] == ["admin", "listening", "on"]:
                admin = words[3]
        if not address:
            raise RuntimeError(f"streamgate did not report its {protocol} listener in time")
        _wait_ready(admin, deadline)
        yield GatewayChild(address or (tls_address or ""), proc.pid, tls_address)
    finally:
        proc.send_signal(signal.SIGTERM)  # by pid: the child this function started
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def _wait_ready(admin: str, deadline: float) -> None:
    """Until the child's ``/readyz`` answers 200: its backend (a real broker) answers a ping."""
    why = "no answer"
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{admin}/readyz", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError as exc:  # HTTPError 503 while the backend connects
            why = str(exc)
        time.sleep(0.1)
    raise RuntimeError(f"streamgate did not get ready in time ({why})")


@dataclass(frozen=True, slots=True)
class BenchTls:
    """Certificates made for one benchmark run: the CA the client trusts, the server's pair."""

    ca_file: str
    cert_file: str
    key_file: str

    def run_args(self, *, fixed: bool = False) -> list[str]:
        """``streamgate run`` arguments: the Kafka listener's TLS beside its plaintext port, on
        a port the gateway picks, or (``fixed``, as ``--workers`` needs) one free now (another
        process could take it first)."""
        port = 0
        if fixed:
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", 0))
                port = probe.getsockname()[1]
        sets = {
            "listeners.kafka.tls.enabled": "true",
            "listeners.kafka.tls.port": str(port),
            "listeners.kafka.tls.cert_file": self.cert_file,
            "listeners.kafka.tls.key_file": self.key_file,
        }
        return [arg for key, value in sets.items() for arg in ("--set", f"{key}={value}")]

    def client_config(self) -> dict[str, str]:
        return {"security.protocol": "SSL", "ssl.ca.location": self.ca_file}


def make_bench_tls(directory: str) -> BenchTls:
    """A private CA and a server certificate for 127.0.0.1 and localhost, as PEM files."""
    import trustme  # the test extra, like the clients the benchmarks drive

    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    paths = BenchTls(*(os.path.join(directory, n) for n in ("ca.pem", "server.pem", "server.key")))
    ca.cert_pem.write_to_path(paths.ca_file)
    server.cert_chain_pems[0].write_to_path(paths.cert_file)
    for pem in server.cert_chain_pems[1:]:
        pem.write_to_path(paths.cert_file, append=True)
    server.private_key_pem.write_to_path(paths.key_file)
    return paths


def _percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def bench_kafka(
    bootstrap: str, *, message_size: int, messages: int, partitions: int = 1, acks: str = "all",
    singles: int = 2000, cpu: Callable[[], float] | None = None,
    client_config: Mapping[str, str] | None = None, transport: str = "plaintext",
    idempotent: bool = False, transaction_every: int = 0, delete_topic: bool = False,
) -> KafkaBenchResult:  # fmt: skip
    """Produce ``messages`` at full speed, then ``singles`` (at most ``messages``) one at a
    time, each acknowledged before the next; consume them all from offset 0. Every client gets
    ``client_config`` too (``security.protocol`` and what goes with it).

    ``idempotent``: both producers with ``enable.idempotence`` (``acks`` must be ``all``).
    ``transaction_every`` > 0: the full-speed producer is transactional, committing every that
    many messages and the remainder at the end (the one-at-a-time one is idempotent, outside
    transactions), and the consumer reads with ``isolation.level=read_committed``.
    ``delete_topic``: the topic is deleted at the end (else it is left for a look at it)."""
    if transaction_every < 0:
        raise ValueError(f"transaction_every must be 0 (off) or more, not {transaction_every}")
    transactional = transaction_every > 0
    from confluent_kafka import KafkaException, Producer
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    topic = f"bench-{message_size}-{uuid.uuid4().hex[:8]}"
    common: dict[str, str | int | float | bool] = {
        "bootstrap.servers": bootstrap,
        **(client_config or {}),
    }
    admin = AdminClient(common)
    admin.create_topics([NewTopic(topic, num_partitions=partitions)])[topic].result(30)

    exactly: dict[str, str | int | float | bool] = {}  # idempotence, or a transactional id
    if transactional:
        exactly["transactional.id"] = f"bench-{uuid.uuid4().hex}"  # unique to this run
    elif idempotent:
        exactly["enable.idempotence"] = True
    producer = Producer(
        {
            **common,
            "acks": acks,
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 2_000_000,
            "queue.buffering.max.kbytes": 2_000_000,
            **exactly,
        }
    )
    # The producer's setup, before the clock: its producer id. A transactional producer gets it
    # in init_transactions; an idempotent one only asks once connected (librdkafka retries on a
    # 500 ms timer), so the first message waits for it: one is sent and flushed here.
    warm_up = 0
    if transactional:
        producer.init_transactions(30)
    elif idempotent:
        producer.produce(topic, b"warm-up")
        if producer.flush(30):
            raise RuntimeError("the idempotent producer got no producer id in 30 s")
        warm_up = 1
    payload = os.urandom(message_size)
    latencies: list[float] = []
    record = latencies.append
    failures: list[object] = []

    def delivered(err: object, msg: object) -> None:
        if err is not None:
            failures.append(err)
        else:
            record(msg.latency())  # type: ignore[attr-defined]

    produce, poll = producer.produce, producer.poll  # (the producer is deleted further on)

    def produce_all(count: int) -> None:
        for _ in range(count):
            while True:
                try:
                    produce(topic, payload, on_delivery=delivered)
                    break
                except BufferError:
                    poll(0.01)

    transactions = 0
    cpu0 = cpu() if cpu is not None else 0.0
    t0 = time.perf_counter()
    if not transactional:
        produce_all(messages)
    else:  # every transaction_every messages, and the remainder
        for start in range(0, messages, transaction_every):
            producer.begin_transaction()
            produce_all(min(transaction_every, messages - start))
            producer.commit_transaction(120)  # flushes the transaction's messages first
            transactions += 1
    left = producer.flush(120)
    produce_s = time.perf_counter() - t0
    produce_cpu = cpu() - cpu0 if cpu is not None else None
    if left or failures or len(latencies) != messages:
        raise RuntimeError(
            f"{left} messages undelivered, {len(failures)} failed "
            f"({len(latencies)} of {messages} delivered): {failures[:3]}"
        )

    # Round-trip latency without queueing: each message is delivered before the next one.
    idempotence = {"enable.idempotence": True} if idempotent or transactional else {}
    single = Producer({**common, "acks": acks, "linger.ms": 0, **idempotence})
    one: list[float] = []
    for _ in range(min(singles, messages)):
        t1 = time.perf_counter()
        single.produce(topic, payload)
        single.flush(10)
        one.append(time.perf_counter() - t1)
    one.sort()
    del producer, single  # their librdkafka threads would compete with the consumer

    total = warm_up + messages + len(one)
    # The consumer runs in a fresh process: in this one the producers' threads and a million
    # delivery reports' garbage would be measured along with the gateway.
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        cpu0 = cpu() if cpu is not None else 0.0
        reader = {**common, "isolation.level": "read_committed"} if transactional else common
        consume_s = pool.apply(_consume, (reader, topic, partitions, total))
        consume_cpu = cpu() - cpu0 if cpu is not None else None
    if delete_topic:  # a broker keeping every run's data (Tansu in memory) weighs on later runs
        with contextlib.suppress(KafkaException):
            admin.delete_topics([topic], operation_timeout=30)[topic].result(30)
    latencies.sort()
    return KafkaBenchResult(
        transport=transport,
        message_size=message_size,
        messages=messages,
        consumed=total,
        produce_seconds=produce_s,
        consume_seconds=consume_s,
        latency_p50_ms=_percentile(latencies, 0.50) * 1000,
        latency_p99_ms=_percentile(latencies, 0.99) * 1000,
        one_p50_ms=_percentile(one, 0.50) * 1000,
        one_p99_ms=_percentile(one, 0.99) * 1000,
        produce_cpu_s=produce_cpu,
        consume_cpu_s=consume_cpu,
        idempotent=idempotent or transactional,
        transaction_every=transaction_every,
        transactions=transactions,
    )


def _consume(
    common: dict[str, str | int | float | bool], topic: str, partitions: int, total: int
) -> float:
    """Read ``total`` messages from offset 0; the seconds it took."""
    from operator import methodcaller

    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            **common,
            "group.id": f"bench-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "fetch.max.bytes": 50 << 20,
            "max.partition.fetch.bytes": 10 << 20,
            # librdkafka stops fetching at 100k queued messages and then backs off for a whole
            # second (fetch.queue.backoff.ms); at 100 B a message that is one 10 MB fetch.
            "queued.min.messages": 1_000_000,
            "fetch.queue.backoff.ms": 5,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    failed = methodcaller("error")
    got = 0
    t0 = time.perf_counter()
    deadline = t0 + 300
    while got < total and time.perf_counter() < deadline:
        # never more than are left: consume() waits its whole timeout for a batch to fill
        batch = consumer.consume(num_messages=min(10_000, total - got), timeout=1.0)
        if any(map(failed, batch)):
            raise RuntimeError(next(m.error() for m in batch if m.error()))
        got += len(batch)
    elapsed = time.perf_counter() - t0
    consumer.close()
    if got < total:
        raise RuntimeError(f"consumed {got} of {total} messages in 300 s")
    return elapsed


__all__ = [
    "BenchTls", "GatewayChild", "KafkaBenchResult", "bench_kafka", "gateway_process",
    "make_bench_tls", "tree_cpu_seconds",
]  # fmt: skip
