"""The live half of the abuse suite: fuzz connections against a real ``streamgate run``, a
confluent-kafka canary producing beside them, a watch on the gateway's process (alive, RSS), and
each protocol's real client for the round trip at the end.

Every network wait is bounded. A fuzz connection sends one case, half-closes when the case says
so, and then must see bytes or the end of the connection within ``ANSWER_S``; a case that is only
the beginning of a valid frame must see the end within the request deadline (plus slack).
"""

from __future__ import annotations

import os
import random
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio
from kio.index import load_request_schema
from prometheus_client.parser import text_string_to_metric_families

from protocols._wire import NEED_DATA
from protocols.iggy import Era, Framing, IggyClientCodec
from protocols.kafka.build import build
from protocols.kafka.framing import KafkaClientCodec, KafkaResponse, KafkaServerCodec
from protocols.kafka.versions import advertised
from tests.abuse.corpus import Case, Target, iggy_commands, mutate, valid_frames
from tests.helpers.gateways import Gateway
from tests.helpers.iggy_wire import IggyWire, login_command
from tests.helpers.producers import Acked, kafka_producer
from tests.helpers.rabbitmq_stream_wire import RabbitWire

# --- settings ------------------------------------------------------------------------------------

REQUEST_S = 1.5  # limits.request_timeout_s of the gateway under test
IDLE_S = 2.0  # limits.idle_timeout_s
AUTH_S = 10.0  # limits.auth_timeout_s (the default: a whole handshake on a loaded machine)
SLACK_S = 4.0  # a loaded 2-core machine
# A single case's connection goes quiet after its bytes, so the idle deadline closes it first.
ANSWER_S = max(REQUEST_S, IDLE_S) + SLACK_S
CONNECT_S = 5.0
SEND_S = 5.0
WORKERS = 12  # fuzz connections at once, per listener
RSS_GROWTH_MB = 150
CANARY_GAP_S = 5.0
USER, PASSWORD = "alice", "s3cret"  # the Kafka SASL user (auth.users)
SASL = {
    "security.protocol": "SASL_PLAINTEXT",
    "sasl.mechanisms": "PLAIN",
    "sasl.username": USER,
    "sasl.password": PASSWORD,
}
GATEWAY_SETTINGS = (
    "listeners.kafka.sasl=true",
    f"auth.users={USER}:{PASSWORD}",
    # Rog has no login: with SASL on Kafka its anonymous user would otherwise be refused all.
    "auth.anonymous=manage",
    # Throttled logins are the login-flood test's subject; here they would only refuse the
    # fuzz connections' own good logins.
    "auth.login_failures=0",
    "auth.peer_login_rate=0",
    f"limits.request_timeout_s={REQUEST_S}",
    f"limits.idle_timeout_s={IDLE_S}",
    f"limits.auth_timeout_s={AUTH_S}",
    "groups.initial_rebalance_delay_ms=200",
)
# What must never show in the gateway's output (a connection that failed on a bug is logged
# with its traceback as "connection failed"; a backend bug as "backend command failed").
LOG_ALARMS = ("Traceback", "connection failed", "backend command failed", "internal error")


# Read by the tests only (not STREAMGATE_*: the gateway takes every such variable as a setting).
FUZZ_VARIABLES = ("FUZZ_S", "FUZZ_SEED")


def fuzz_seconds() -> float:
    """FUZZ_S: how long each listener is flooded (default 3 s)."""
    return float(os.environ.get("FUZZ_S", "3"))


def fuzz_seed() -> int:
    """FUZZ_SEED: the flood's seed (default: a new one each run, printed)."""
    value = os.environ.get("FUZZ_SEED")
    return int(value, 0) if value else random.SystemRandom().randrange(1 << 32)


# --- what a run found ----------------------------------------------------------------------------


@dataclass
class Report:
    target: Target
    seed: int
    outcomes: Counter[str] = field(default_factory=Counter)
    kinds: Counter[str] = field(default_factory=Counter)
    hangs: list[str] = field(default_factory=list)
    login_failures: list[str] = field(default_factory=list)
    peak_mb: int = 0
    baseline_mb: int = 0
    canary_gap_s: float = 0.0

    def reproduce(self) -> str:
        return f"FUZZ_SEED={self.seed} (target {self.target.value})"

    def summary(self) -> str:
        return (
            f"{self.reproduce()}: {sum(self.outcomes.values())} connections, "
            f"outcomes {dict(self.outcomes)}, cases {dict(self.kinds)}, RSS "
            f"{self.baseline_mb} -> {self.peak_mb} MB, canary gap {self.canary_gap_s:.2f} s"
        )


def rss_mb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) // 1024
    raise AssertionError(f"no VmRSS for {pid}")


def metric_samples(gw: Gateway, name: str) -> dict[tuple[str, ...], float]:
    """Samples of counter ``name`` (without _total), keyed by their label values."""
    url = f"http://{gw.addresses['admin']}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    return {
        tuple(sample.labels.values()): sample.value
        for family in text_string_to_metric_families(text)
        if family.name == name
        for sample in family.samples
        if sample.name == f"{name}_total"
    }


# --- the canary ----------------------------------------------------------------------------------


def kafka_canary(bootstrap: str, stop: threading.Event, acked: Acked) -> None:
    """confluent-kafka logged in with SASL PLAIN producing ``c0``, ``c1``... to ``canary``
    partition 0 until ``stop`` (tests/helpers/producers.py's producer); the first failed
    delivery ends it."""
    config: dict[str, str | int] = {**SASL, "message.timeout.ms": 5000}
    kafka_producer(bootstrap, "canary", stop, acked, prefix=b"c", config=config)


# --- logging in on a raw connection --------------------------------------------------------------

Login = Callable[[trio.SocketStream], Awaitable[tuple[bytes, ...]]]


async def _kafka_login(stream: trio.SocketStream) -> tuple[bytes, ...]:
    """SaslHandshake v1 and SaslAuthenticate v1 (PLAIN) by hand; the captured frames follow."""
    codec = KafkaClientCodec("abuse")
    handshake = build(load_request_schema(17, 1), {"mechanism": "PLAIN"})
    auth_bytes = b"\0" + USER.encode() + b"\0" + PASSWORD.encode()
    authenticate = build(load_request_schema(36, 1), {"auth_bytes": auth_bytes})
    for body in (handshake, authenticate):
        _, data = codec.send(body)
        await stream.send_all(data)
        while True:
            response = codec.next_response()
            if response is not NEED_DATA:
                break
            chunk = await stream.receive_some(65536)
            assert chunk, "the gateway closed during the SASL login"
            codec.receive_data(chunk)
        assert isinstance(response, KafkaResponse), response
        assert response.body.error_code == 0, response.body
    return valid_frames(Target.KAFKA)


async def _rabbit_login(stream: trio.SocketStream) -> tuple[bytes, ...]:
    wire = RabbitWire(stream)
    await wire.hello()
    reply = await wire.authenticate()
    assert reply.code == 1, reply
    await wire.tune(frame_max=1_048_576, heartbeat=0)
    opened = await wire.open_vhost("/")
    assert opened.code == 1, opened
    return valid_frames(Target.RABBITMQ_STREAM)


def _iggy_login(era: Era) -> Login:
    async def login(stream: trio.SocketStream) -> tuple[bytes, ...]:
        framing = Framing.VSR if era is Era.C else Framing.LEGACY
        wire = IggyWire(stream, IggyClientCodec(framing, era=era))
        await wire.ok(login_command(era))
        # Framed by this connection's codec after its login: the VSR header carries the
        # session and the next request number, as a logged-in client's would.
        return tuple(wire.codec.send(c) for c in iggy_commands(era))

    return login


def login_for(target: Target) -> Login | None:
    match target:
        case Target.KAFKA:
            return _kafka_login
        case Target.RABBITMQ_STREAM:
            return _rabbit_login
        case Target.IGGY_VSR | Target.IGGY_LEGACY:
            return _iggy_login(target.iggy_era)
        case Target.ROG:
            return None  # Rog has no login (rog.md §1)


# --- legitimately silent requests ----------------------------------------------------------------

_KAFKA_WAITS = {1, 11, 14}  # Fetch (max_wait), JoinGroup and SyncGroup (the rebalance)


def may_wait(target: Target, data: bytes) -> bool:
    """Whether ``data`` holds a request a broker may rightly leave unanswered for long: Kafka's
    long polls (kafka.md: a Fetch waits up to its max_wait, a JoinGroup or SyncGroup for the
    rebalance)."""
    if target is not Target.KAFKA:
        return False
    codec = KafkaServerCodec(advertised(sasl=True))
    codec.receive_data(data)
    try:
        while (request := codec.next_request()) is not NEED_DATA:
            if getattr(request, "api_key", None) in _KAFKA_WAITS:
                return True
            if not hasattr(request, "api_key"):
                return False
    except Exception:
        return False
    return False


# --- one fuzz connection -------------------------------------------------------------------------


async def _until_closed(stream: trio.SocketStream) -> None:
    while True:
        try:
            if not await stream.receive_some(65536):
                return
        except trio.BrokenResourceError:
            return


async def _first_answer(stream: trio.SocketStream) -> str:
    try:
        return "answered" if await stream.receive_some(65536) else "closed"
    except trio.BrokenResourceError:
        return "reset"


async def fuzz_connection(
    gw: Gateway, target: Target, rng: random.Random, report: Report, *, logged_in: bool
) -> None:
    host, port = gw.addresses[target.endpoint].rsplit(":", 1)
    with trio.fail_after(CONNECT_S):
        stream = await trio.open_tcp_stream(host, int(port))
    async with stream:
        frames = valid_frames(target)
        login = login_for(target)
        if logged_in and login is not None:
            try:
                with trio.fail_after(AUTH_S):
                    frames = await login(stream)
            except (AssertionError, trio.TooSlowError, trio.BrokenResourceError) as exc:
                report.login_failures.append(f"{type(exc).__name__}: {exc}")
                return
        case = mutate(target, rng, frames)
        phase = "after login" if logged_in and login is not None else "before login"
        report.kinds[case.kind] += 1
        outcome = await _play(stream, case)
        report.outcomes[outcome] += 1
        if outcome == "hung" and not may_wait(target, case.data):
            report.hangs.append(f"{case.kind} {phase}, eof={case.eof}: {case.data[:512].hex()}")


async def _play(stream: trio.SocketStream, case: Case) -> str:
    try:
        with trio.fail_after(SEND_S):
            await stream.send_all(case.data)
            if case.eof:
                await stream.send_eof()
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        return "refused while sending"
    except trio.TooSlowError:
        # The gateway stopped reading (a frame refused at its size, the rest of it unread)
        # and has not closed yet: what follows tells whether it does.
        pass
    if case.incomplete:
        with trio.move_on_after(REQUEST_S + SLACK_S):
            await _until_closed(stream)
            return "closed at the deadline"
        return "hung"
    with trio.move_on_after(ANSWER_S):
        return await _first_answer(stream)
    return "hung"


async def flood(gw: Gateway, target: Target, seed: int, seconds: float, report: Report) -> None:
    """WORKERS connections at a time, each worker on its own ``Random(seed + i)``, half of
    them logged in first, until ``seconds`` have passed."""
    end = trio.current_time() + seconds

    async def worker(i: int) -> None:
        rng = random.Random(seed + i)
        while trio.current_time() < end:
            logged_in = rng.random() < 0.5
            try:
                await fuzz_connection(gw, target, rng, report, logged_in=logged_in)
            except (OSError, trio.BrokenResourceError) as exc:  # connect refused: noted
                report.outcomes[f"connect failed: {type(exc).__name__}"] += 1

    async with trio.open_nursery() as nursery:
        for i in range(WORKERS):
            nursery.start_soon(worker, i)


async def watch(gw: Gateway, acked: Acked, report: Report, done: trio.Event) -> None:
    """Sample RSS and the canary's progress every 50 ms until ``done``."""
    last, last_at = acked.count, time.monotonic()
    while not done.is_set():
        assert gw.process.returncode is None, f"the gateway exited {gw.process.returncode}"
        report.peak_mb = max(report.peak_mb, rss_mb(gw.pid))
        now, count = time.monotonic(), acked.count
        if count != last:
            last, last_at = count, now
        report.canary_gap_s = max(report.canary_gap_s, now - last_at)
        with trio.move_on_after(0.05):
            await done.wait()


def run_in_thread(fn: Callable[..., Any], *args: Any) -> Awaitable[Any]:
    return trio.to_thread.run_sync(lambda: fn(*args), abandon_on_cancel=True)


__all__ = [
    "FUZZ_VARIABLES",
    "GATEWAY_SETTINGS",
    "LOG_ALARMS",
    "Report",
    "flood",
    "fuzz_seconds",
    "fuzz_seed",
    "kafka_canary",
    "metric_samples",
    "rss_mb",
    "run_in_thread",
    "watch",
]
