"""Issue 18's pre-authentication probes against a real ``streamgate run`` (small limits set with
``--set``): frames above the pre-login limit are refused at their size and cost no memory, a
client that does not log in is dropped at the login deadline, and bytes trickled one a second
do not keep a connection open past the request deadline on any listener, while a real Kafka
client goes on producing.
"""

from __future__ import annotations

import struct
import threading
import urllib.request
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path

import trio
from confluent_kafka import Producer
from prometheus_client.parser import text_string_to_metric_families

from protocols.rog import Publish, RogClientCodec
from tests.helpers.connections import until_closed
from tests.helpers.gateways import Gateway, running_gateway
from tests.helpers.producers import Acked, kafka_producer
from tests.helpers.waiting import eventually

AUTHENTICATING = ("kafka", "iggy", "rabbitmq_stream")
LISTENERS = ("rog", *AUTHENTICATING)
PREAUTH = 64 << 10
SASL = ("listeners.kafka.sasl=true", "auth.users=alice:s3cret")


@asynccontextmanager
async def gateway(tmp_path: Path, *settings: str) -> AsyncIterator[Gateway]:
    args = [arg for setting in settings for arg in ("--set", setting)]
    async with running_gateway(f"embedded:{tmp_path / 'data'}", tmp_path, "a", *args) as gw:
        yield gw


def host_port(gw: Gateway, endpoint: str) -> tuple[str, int]:
    host, port = gw.addresses[endpoint].rsplit(":", 1)
    return host, int(port)


async def connect(gw: Gateway, endpoint: str) -> trio.SocketStream:
    return await trio.open_tcp_stream(*host_port(gw, endpoint))


async def connection_errors(gw: Gateway) -> dict[tuple[str, str], float]:
    url = f"http://{gw.addresses['admin']}/metrics"

    def get() -> str:
        with urllib.request.urlopen(url, timeout=5) as response:
            return str(response.read().decode())

    text = await trio.to_thread.run_sync(get)
    return {
        (sample.labels["protocol"], sample.labels["reason"]): sample.value
        for family in text_string_to_metric_families(text)
        if family.name == "streamgate_connection_errors"
        for sample in family.samples
        if sample.name == "streamgate_connection_errors_total"
    }


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


def head(endpoint: str, size: int) -> bytes:
    """The beginning of a request frame declaring ``size`` bytes after its size field."""
    if endpoint == "iggy":  # classic framing: [length u32 LE][code u32 LE] (101 SendMessages)
        return struct.pack("<II", size, 101)
    if endpoint == "rog":
        frame = RogClientCodec().send(Publish(name="slow", partition=0, data=b"r" * size))
        return frame[: len(frame) - size]
    return struct.pack(">I", size)  # Kafka, RabbitMQ Stream: [size u32 BE]


async def send_ignoring_close(stream: trio.SocketStream, data: bytes) -> None:
    # Refused while we were still sending: what is being tested.
    with suppress(trio.BrokenResourceError, trio.ClosedResourceError):
        await stream.send_all(data)


async def test_big_frames_before_login_are_refused_at_once_and_cost_no_memory(
    tmp_path: Path,
) -> None:
    async with gateway(tmp_path, *SASL, f"limits.max_preauth_frame_bytes={PREAUTH}") as gw:
        with trio.fail_after(60):
            for endpoint in ("kafka", "iggy"):
                # Half of a 1 MiB frame: closed as soon as its size is read, the rest unread.
                stream = await connect(gw, endpoint)
                async with stream:
                    await stream.send_all(head(endpoint, 1 << 20) + b"x" * 4096)
                    with trio.fail_after(2):
                        assert await until_closed(stream) == b""
                    await send_ignoring_close(stream, b"x" * (512 << 10))

            # Six connections per listener each half-send a frame of 1 MiB, and then of 48 MiB
            # (below max_frame_bytes, 64 MiB: buffered, they would cost 6 x 24 MiB each).
            baseline = rss_bytes(gw.pid)
            for size in (1 << 20, 48 << 20):
                streams = [
                    (endpoint, await connect(gw, endpoint))
                    for endpoint in ("kafka", "iggy")
                    for _ in range(6)
                ]
                async with trio.open_nursery() as nursery:
                    for endpoint, stream in streams:
                        nursery.start_soon(
                            send_ignoring_close, stream, head(endpoint, size) + b"h" * (size // 2)
                        )
                with trio.fail_after(5):
                    for _, stream in streams:
                        await until_closed(stream)
                        await stream.aclose()
            grown = rss_bytes(gw.pid) - baseline
            assert grown < 32 << 20, f"RSS grew by {grown >> 20} MiB"

            errors = await connection_errors(gw)
            for endpoint in ("kafka", "iggy"):
                assert errors[endpoint, "preauth_frame_too_large"] == 13
                assert errors[endpoint, "frame_too_large"] == 0

            # A client that logs in is then held to max_frame_bytes only: 200 KiB goes through.
            def produce() -> str:
                producer = Producer(
                    {"bootstrap.servers": gw.kafka, "security.protocol": "SASL_PLAINTEXT",
                     "sasl.mechanisms": "PLAIN", "sasl.username": "alice",
                     "sasl.password": "s3cret", "message.timeout.ms": 10000}
                )  # fmt: skip
                outcome: list[str] = []
                producer.produce(
                    "big", value=b"b" * (200 << 10),
                    on_delivery=lambda err, _msg: outcome.append(str(err) if err else "ok"),
                )  # fmt: skip
                producer.flush(15)
                return outcome[0] if outcome else "no delivery report"

            assert await trio.to_thread.run_sync(produce) == "ok"


async def test_a_client_that_does_not_log_in_is_dropped_at_the_deadline(tmp_path: Path) -> None:
    async with gateway(tmp_path, *SASL, "limits.auth_timeout_s=1.5") as gw:
        with trio.fail_after(30):
            streams = {endpoint: await connect(gw, endpoint) for endpoint in LISTENERS}
            t0 = trio.current_time()
            for endpoint in AUTHENTICATING:
                with trio.fail_after(5):
                    assert await until_closed(streams[endpoint]) == b""
                assert trio.current_time() - t0 >= 1.2, endpoint
            # Rog has no login: nothing to wait for.
            with trio.move_on_after(1.0) as still_open:
                await until_closed(streams["rog"])
            assert still_open.cancelled_caught
            for stream in streams.values():
                await stream.aclose()
            errors = await connection_errors(gw)
            assert {e: errors[e, "auth_timeout"] for e in LISTENERS} == {
                "rog": 0, "kafka": 1, "iggy": 1, "rabbitmq_stream": 1,
            }  # fmt: skip


async def test_slowloris_connections_are_closed_at_the_request_deadline(tmp_path: Path) -> None:
    request_s = 3.0
    settings = (
        f"limits.request_timeout_s={request_s}",
        "limits.idle_timeout_s=2",  # longer than the 1 s between two bytes
        "limits.auth_timeout_s=60",
    )
    async with gateway(tmp_path, *settings) as gw:
        stop, acked = threading.Event(), Acked()
        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                canary = trio.Event()

                async def produce() -> None:
                    try:
                        await trio.to_thread.run_sync(
                            kafka_producer, gw.kafka, "canary", stop, acked
                        )
                    finally:
                        canary.set()

                nursery.start_soon(produce)
                with trio.fail_after(15):
                    await eventually(lambda: acked.count >= 10)
                before = acked.count
                closed_after: dict[str, list[float]] = {e: [] for e in LISTENERS}

                async def slowloris(endpoint: str) -> None:
                    stream = await connect(gw, endpoint)
                    data = head(endpoint, 100) + b"s" * 100  # 1 byte/s: 2 minutes for all
                    t0 = trio.current_time()
                    async with stream, trio.open_nursery() as inner:

                        async def trickle() -> None:
                            for i in range(len(data)):
                                await send_ignoring_close(stream, data[i : i + 1])
                                await trio.sleep(1.0)

                        inner.start_soon(trickle)
                        await until_closed(stream)
                        inner.cancel_scope.cancel()
                    closed_after[endpoint].append(trio.current_time() - t0)

                async with trio.open_nursery() as attackers:
                    for endpoint in LISTENERS:
                        for _ in range(20):
                            attackers.start_soon(slowloris, endpoint)
                # The canary kept going through the attack.
                assert acked.failure == ""
                assert acked.count > before + 10
                stop.set()
                await canary.wait()
            assert acked.failure == ""
        for endpoint, times in closed_after.items():
            assert len(times) == 20
            assert all(request_s - 0.5 <= t < request_s + 3 for t in times), (endpoint, times)
        errors = await connection_errors(gw)
        assert {e: errors[e, "request_timeout"] for e in LISTENERS} == dict.fromkeys(LISTENERS, 20)
        assert {e: errors[e, "idle_timeout"] for e in LISTENERS} == dict.fromkeys(LISTENERS, 0)
