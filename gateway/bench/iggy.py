"""apache-iggy 0.9.0 against an Iggy endpoint: send and poll throughput in batches (the issue's
1,000 x 100 B and 1,000 x 1 KiB). Not a test: it prints figures.

One client sends batches back to back (the client allows one request in flight per connection,
§1.1 of iggy.md), then a second client polls everything back from offset 0 in batches of the same
size. Without ``--address`` ``streamgate run`` is started as a child on the embedded backend in a
temporary directory and stopped by pid at the end (see ``bench.kafka.gateway_process``).
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

_STREAM = "bench"


@dataclass(frozen=True, slots=True, kw_only=True)
class IggyBenchResult:
    message_size: int
    batch: int
    messages: int
    send_seconds: float
    poll_seconds: float
    polled: int
    send_p50_ms: float  # one batch sent and confirmed
    send_p99_ms: float
    send_cpu_s: float | None = None  # the server's CPU while sending / polling (``cpu``)
    poll_cpu_s: float | None = None

    def format(self) -> str:
        size = self.message_size
        return (
            f"iggy {size:>6} B x {self.messages} (batches of {self.batch}): "
            f"send {self.messages / self.send_seconds:,.0f} msg/s "
            f"({self.messages * size / 1e6 / self.send_seconds:,.1f} MB/s), batch p50 "
            f"{self.send_p50_ms:.2f} ms p99 {self.send_p99_ms:.2f} ms; "
            f"poll {self.polled / self.poll_seconds:,.0f} msg/s "
            f"({self.polled * size / 1e6 / self.poll_seconds:,.1f} MB/s)"
        )


async def _client(address: str, username: str, password: str) -> object:
    from apache_iggy import IggyClient

    client = IggyClient(address)
    await client.connect()
    await client.login_user(username, password)
    return client


async def _bench(
    address: str,
    *,
    size: int,
    batch: int,
    messages: int,
    username: str,
    password: str,
    cpu: Callable[[], float] | None,
) -> IggyBenchResult:
    from apache_iggy import Consumer, IggyClient, PollingStrategy, SendMessage

    producer = await _client(address, username, password)
    assert isinstance(producer, IggyClient)
    if await producer.get_stream(_STREAM) is None:
        await producer.create_stream(_STREAM)
    topic = f"t-{size}-{uuid.uuid4().hex[:8]}"
    await producer.create_topic(_STREAM, topic, 1)
    payload = os.urandom(size)
    one_batch = [SendMessage(payload) for _ in range(batch)]
    latencies = []
    sent = 0
    cpu0 = cpu() if cpu is not None else 0.0
    t0 = time.perf_counter()
    while sent < messages:
        n = min(batch, messages - sent)
        t = time.perf_counter()
        await producer.send_messages(_STREAM, topic, 0, one_batch[:n])
        latencies.append(time.perf_counter() - t)
        sent += n
    send_seconds = time.perf_counter() - t0
    send_cpu = cpu() - cpu0 if cpu is not None else None

    consumer = await _client(address, username, password)
    assert isinstance(consumer, IggyClient)
    polled = 0
    offset = 0
    cpu0 = cpu() if cpu is not None else 0.0
    t0 = time.perf_counter()
    while polled < messages:
        got = await consumer.poll_messages(
            _STREAM, topic, consumer=Consumer.Single("bench"),
            polling_strategy=PollingStrategy.Offset(offset), count=batch, auto_commit=False,
            partition_id=0,
        )  # fmt: skip
        if not got:
            raise RuntimeError(f"poll returned nothing at offset {offset} of {messages}")
        if got[-1].payload() != payload:
            raise RuntimeError("a polled payload differs from the one sent")
        polled += len(got)
        offset = got[-1].offset() + 1
    poll_seconds = time.perf_counter() - t0
    poll_cpu = cpu() - cpu0 if cpu is not None else None
    await producer.delete_topic(_STREAM, topic)
    await producer.ping()  # iggy.md §1.1: settle the heartbeat before the runtime exits
    latencies.sort()
    return IggyBenchResult(
        message_size=size,
        batch=batch,
        messages=messages,
        send_seconds=send_seconds,
        poll_seconds=poll_seconds,
        polled=polled,
        send_p50_ms=latencies[len(latencies) // 2] * 1000,
        send_p99_ms=latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000,
        send_cpu_s=send_cpu,
        poll_cpu_s=poll_cpu,
    )


def bench_iggy(
    address: str,
    *,
    message_size: int,
    batch: int = 1000,
    messages: int = 1_000_000,
    username: str = "iggy",
    password: str = "iggy",
    cpu: Callable[[], float] | None = None,
) -> IggyBenchResult:
    """``cpu`` (the server's CPU seconds so far), when given, is sampled before and after
    sending and before and after polling: the figures leave out connecting, logging in and
    making and deleting the topic, as ``bench_kafka``'s do."""
    return asyncio.run(
        _bench(address, size=message_size, batch=batch, messages=messages, username=username,
               password=password, cpu=cpu)
    )  # fmt: skip


__all__ = ["IggyBenchResult", "bench_iggy"]
