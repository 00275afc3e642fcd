"""The drain that Kubernetes relies on (deploy/kubernetes): SIGTERM to a real ``streamgate run``
while real clients of every protocol produce through it.

What a pod's termination needs, in order: ``/readyz`` fails at once (the pod leaves the
Service's endpoints), the listeners stop accepting (new connections are refused, not accepted
and dropped), requests in flight are still answered (one is held open across the signal: a Rog
publish whose second half is sent only after the checks above), everything acknowledged is in
the store (read back from the embedded directory once the process is gone), and the process
exits 0 before the time the pods' grace period gives it: the configured drain time plus the
margin for closing the backend.

The gateway runs on the Kubernetes ConfigMap's own TOML (listeners moved to loopback and free
ports); the producers are confluent-kafka, rstream and apache-iggy, each in a thread
(tests/helpers/producers.py). Every wait is bounded.
"""

from __future__ import annotations

import gc
import threading
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import trio

from gateway.backends.embedded import open_embedded
from gateway.config import load
from gateway.model import DEFAULT_STREAM, Read, Topic
from protocols._wire import NEED_DATA
from protocols.rog import CONNECTION_CLOSED, Ok, Publish, Response, RogClientCodec
from tests.helpers.gateways import Gateway, running_gateway
from tests.helpers.producers import Acked, iggy_producer, kafka_producer, rabbitmq_stream_producer
from tests.helpers.rog_client import RogClient

ROOT = Path(__file__).resolve().parents[2]
K8S_CONFIG = ROOT / "deploy" / "kubernetes" / "base" / "config" / "streamgate.toml"
# What the pods' terminationGracePeriodSeconds leaves after the drain for closing the backend
# (tests/deploy/test_kubernetes.py holds the manifests to the same figure).
CLOSE_MARGIN_S = 5.0
LIMIT_S = 120.0
WARM_UP_ACKS = 20  # each producer has had this many acknowledged before the signal
LISTENERS = ("rog", "kafka", "iggy", "rabbitmq_stream")
KAFKA_TOPIC, RABBIT_STREAM, ROG_LOG = "drain-kafka", "drain-rabbit", "drain-rog"
IGGY_STREAM, IGGY_TOPIC = "drain", "events"
HELD_BODY = bytes(range(256)) * 64  # the in-flight publish's body: its frame goes in two halves


async def admin_get(gateway: Gateway, path: str) -> tuple[int, str]:
    def get() -> tuple[int, str]:
        url = f"http://{gateway.addresses['admin']}{path}"
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    return await trio.to_thread.run_sync(get)


async def metric(gateway: Gateway, name: str, **labels: str) -> float:
    _, text = await admin_get(gateway, "/metrics")
    series = name + "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "} "
    found = [line for line in text.splitlines() if line.startswith(series)]
    assert len(found) == 1, (series, found)
    return float(found[0].rsplit(" ", 1)[1])


async def refused(address: str) -> bool:
    """Whether a connection to ``address`` is refused: nobody listens there."""
    host, port = address.rsplit(":", 1)
    with trio.socket.socket() as sock:
        try:
            await sock.connect((host, int(port)))
        except ConnectionRefusedError:
            return True
    return False


async def until(check: Callable[[], Awaitable[bool]]) -> None:
    """Poll ``check`` until it holds (callers bound it): for what another process changes."""
    while not await check():  # noqa: ASYNC110 - state of another process: no event to await
        await trio.sleep(0.02)


async def stored(data: Path, topic: Topic) -> dict[int, bytes]:
    """Partition 0 of ``topic`` in the embedded store at ``data``: offset -> value."""
    out: dict[int, bytes] = {}
    async with open_embedded(data, fsync="never") as backend:
        offset = 0
        while True:
            result = await backend.read(Read(topic=topic, partition=0, offset=offset))
            messages = [m for b in result.batches for m in b.messages if m.offset >= offset]
            if not messages:
                assert offset == result.high_watermark, (topic, offset, result)
                return out
            out.update((m.offset, m.value) for m in messages)
            offset = messages[-1].offset + 1


class HeldPublish:
    """A Rog publish whose frame goes out in two halves on one connection: in flight from the
    moment the gateway has read the first."""

    def __init__(self, address: str) -> None:
        host, port = address.rsplit(":", 1)
        self.address = (host, int(port))
        self.codec = RogClientCodec()
        frame = self.codec.send(Publish(name=ROG_LOG, partition=0, data=HELD_BODY))
        self.first, self.rest = frame[: len(frame) // 2], frame[len(frame) // 2 :]
        self.stream: trio.SocketStream | None = None

    async def start(self) -> None:
        self.stream = await trio.open_tcp_stream(*self.address)
        await self.stream.send_all(self.first)

    async def finish(self) -> Response | None:
        """Send the rest; the answer, or None when the gateway closed without one."""
        assert self.stream is not None
        async with self.stream:
            try:
                await self.stream.send_all(self.rest)
            except trio.BrokenResourceError:
                return None
            while (frame := self.codec.next_frame()) is NEED_DATA:
                try:
                    data = await self.stream.receive_some(65536)
                except trio.BrokenResourceError:
                    return None
                if data:
                    self.codec.receive_data(data)
                else:
                    self.codec.receive_eof()
            return None if frame is CONNECTION_CLOSED else frame


def failures_after_sigterm(log: str) -> list[str]:
    """Connections the gateway closed as failures (the lines counted in
    streamgate_connection_errors_total) once it was told to stop."""
    after = log.partition("shutting down")[2]
    return [
        line for line in after.splitlines()
        if "connection failed" in line or ("connection closed" in line and "reason=" in line)
    ]  # fmt: skip


# rstream 1.1.1 leaves the socket and StreamWriter of a connection whose server went away open
# (its reader task ends without closing them): unraisable ResourceWarnings of the library's,
# collected below, inside this filter.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.slow
async def test_sigterm_drains_while_every_protocol_produces(tmp_path: Path) -> None:
    drain_s = load(K8S_CONFIG).limits.drain_timeout_s
    data = tmp_path / "data"
    stop = threading.Event()
    acked = {"kafka": Acked(), "rabbitmq_stream": Acked(), "iggy": Acked()}

    async def run(produce: Callable[[], None]) -> None:
        await trio.to_thread.run_sync(produce, abandon_on_cancel=True)

    with trio.fail_after(LIMIT_S):
        async with running_gateway(
            f"embedded:{data}", tmp_path, "drained", "--config", str(K8S_CONFIG),
            "--host", "127.0.0.1",
        ) as gateway:  # fmt: skip
            rog_host, rog_port = gateway.addresses["rog"].rsplit(":", 1)
            assert await RogClient(rog_host, int(rog_port)).create_log(ROG_LOG, 1) == Ok()
            rabbit_host, rabbit_port = gateway.addresses["rabbitmq_stream"].rsplit(":", 1)
            try:
                async with trio.open_nursery() as producers:
                    producers.start_soon(
                        run,
                        lambda: kafka_producer(gateway.kafka, KAFKA_TOPIC, stop, acked["kafka"]),
                    )
                    producers.start_soon(
                        run,
                        lambda: rabbitmq_stream_producer(
                            rabbit_host,
                            int(rabbit_port),
                            RABBIT_STREAM,
                            stop,
                            acked["rabbitmq_stream"],
                        ),
                    )
                    producers.start_soon(
                        run,
                        lambda: iggy_producer(
                            gateway.addresses["iggy"], IGGY_STREAM, IGGY_TOPIC, stop, acked["iggy"]
                        ),
                    )

                    async def warm() -> bool:
                        return all(a.count >= WARM_UP_ACKS for a in acked.values())

                    with trio.fail_after(30):
                        await until(warm)
                    assert await admin_get(gateway, "/readyz") == (200, "ok\n")

                    held = HeldPublish(gateway.addresses["rog"])
                    rog_bytes = await metric(gateway, "streamgate_bytes_received_total",
                                             protocol="rog")  # fmt: skip
                    await held.start()

                    async def first_half_read() -> bool:
                        received = await metric(
                            gateway, "streamgate_bytes_received_total", protocol="rog"
                        )
                        return received == rog_bytes + len(held.first)

                    with trio.fail_after(10):
                        await until(first_half_read)

                    signalled = trio.current_time()
                    gateway.process.terminate()

                    async def not_ready() -> bool:
                        return (await admin_get(gateway, "/readyz"))[0] == 503

                    async def not_accepting() -> bool:
                        return all([await refused(gateway.addresses[p]) for p in LISTENERS])

                    # While a request is still being answered: not ready, and every listener
                    # refuses new connections.
                    with trio.fail_after(5):
                        await until(not_ready)
                    assert await admin_get(gateway, "/readyz") == (503, "draining\n")
                    with trio.fail_after(5):
                        await until(not_accepting)
                    assert gateway.process.returncode is None, gateway.log()
                    # The request in flight is answered (and stored: read back below).
                    assert await held.finish() == Ok(), gateway.log()
                    with trio.move_on_at(signalled + drain_s + CLOSE_MARGIN_S):
                        await gateway.process.wait()
                    assert gateway.process.returncode == 0, gateway.log()
            finally:
                stop.set()
    log = gateway.log_path.read_text(errors="replace")
    assert failures_after_sigterm(log) == [], log
    for name, a in acked.items():
        # Each stopped by itself (the producers were told to only after the checks): because
        # its gateway went away.
        assert a.failure, name

    kafka = await stored(data, Topic(DEFAULT_STREAM, KAFKA_TOPIC))
    missing = {v: o for v, o in acked["kafka"].offsets.items() if kafka.get(o) != v}
    assert missing == {}, (len(missing), len(acked["kafka"].offsets))
    for name, topic in (
        ("rabbitmq_stream", Topic(DEFAULT_STREAM, RABBIT_STREAM)),
        ("iggy", Topic(IGGY_STREAM, IGGY_TOPIC)),
    ):
        values = set((await stored(data, topic)).values())
        lost = [v for v in acked[name].values if v not in values]
        assert lost == [], (name, len(lost), acked[name].count)
    assert list((await stored(data, Topic(DEFAULT_STREAM, ROG_LOG))).values()) == [HELD_BODY]
    gc.collect()  # rstream's leftovers go now, inside this test's filter
