"""rstream 1.1.1 against a RabbitMQ Stream endpoint: publish throughput with every message
confirmed, then consume throughput from the first offset. Not a test: it prints figures.

Publish: one ``Producer`` with a ``publisher_name`` (deduplication on, as most applications run it;
``dedup=False`` leaves it out) sends batches with ``send_batch`` (one Publish frame each, not
waiting) and keeps at most ``in_flight`` unconfirmed batches; a confirm callback counts each
message's PublishConfirm. The clock stops when the last message is confirmed. A batch's latency
runs from its ``send_batch`` call to the confirm of its last message, so with several batches in
flight it includes queueing behind the earlier ones. ``send_batch`` was chosen over the async
``send``: ``send`` buffers per message under a lock and flushes on a 0.5 s timer, which is slower
and makes the batch a timer artefact. Publishing ids are set by the bench (1, 2, ...), which
rstream keeps, so a confirm maps to its batch by arithmetic. Then, when ``singles`` is set, that
many more messages go one at a time (a batch of one, confirmed before the next is sent): the
publish latency without queueing.

Consume: a fresh ``Consumer`` subscribes from ``OffsetType.FIRST`` with ``decoder=None`` (the
callback gets each entry's raw bytes) and rstream's default credit (10 chunks, one more per
chunk); the clock stops when the last message arrives. Counted, not found by its offset:
offsets have gaps where a tracking chunk took one (a StoreOffset on the stream, which is how
streamgate keeps a deduplicating publisher's sequence on the RabbitMQ backend).

Message kinds: ``amqp`` (``AMQPMessage(body=payload)``, the interoperable default that other
clients and the gateway's translators read as AMQP 1.0 data sections) or ``raw``
(``RawMessage``: the payload as the entry, no AMQP encoding on either side); the CLI runs
both. The gateway treats them alike (entries are stored as sent); ``raw`` saves the client its
AMQP encoding. MB/s counts payload bytes only.

Each size (and kind) runs in a fresh asyncio loop on the calling thread, on a fresh stream that
is deleted at the end. Without ``--address`` ``streamgate run`` is started as a child on the
embedded backend in a temporary directory (see ``bench.kafka.gateway_process``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

KINDS = ("amqp", "raw")
STALL_S = 60.0  # no confirm / no delivery for this long: the bench fails instead of hanging
FRAME_MAX = 1_048_576  # rstream's default, and what the gateway proposes in Tune
_PUBLISH_OVERHEAD = 13  # frame header, publisher id, count (rstream.producer)
_MESSAGE_OVERHEAD = 12  # publishing id, entry length
_AMQP_OVERHEAD = 8  # a data section: descriptor 0x00 0x53 0x75, vbin32 code and length


@dataclass(frozen=True, slots=True, kw_only=True)
class RabbitStreamBenchResult:
    message_size: int
    kind: str  # "amqp" | "raw"
    batch: int
    in_flight: int
    messages: int
    confirmed: int
    consumed: int
    publish_seconds: float
    consume_seconds: float
    publish_p50_ms: float  # send_batch to the confirm of its last message
    publish_p99_ms: float
    singles: int = 0  # published one at a time after the others (consumed counts them)
    one_p50_ms: float = float("nan")  # send_batch of one message to its confirm
    one_p99_ms: float = float("nan")
    publish_cpu_s: float | None = None  # the server's CPU while publishing / consuming (``cpu``)
    consume_cpu_s: float | None = None

    def format(self) -> str:
        size = self.message_size
        return (
            f"rabbitmq-stream {size:>6} B x {self.messages} {self.kind:<4} "
            f"(batches of {self.batch}, {self.in_flight} in flight): "
            f"publish {self.confirmed / self.publish_seconds:,.0f} msg/s "
            f"({self.confirmed * size / 1e6 / self.publish_seconds:,.1f} MB/s), batch p50 "
            f"{self.publish_p50_ms:.2f} ms p99 {self.publish_p99_ms:.2f} ms{self._one()}; "
            f"consume {self.consumed / self.consume_seconds:,.0f} msg/s "
            f"({self.consumed * size / 1e6 / self.consume_seconds:,.1f} MB/s)"
        )

    def _one(self) -> str:
        if not self.singles:
            return ""
        return f", one at a time p50 {self.one_p50_ms:.2f} ms p99 {self.one_p99_ms:.2f} ms"


def _split(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host.strip("[]") or "127.0.0.1", int(port)


def _percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def _factory(kind: str, payload: bytes) -> Callable[[int], Any]:
    """A message carrying ``payload`` with the given publishing id."""
    from rstream import AMQPMessage, RawMessage

    if kind == "raw":
        return lambda publishing_id: RawMessage(payload, publishing_id)

    def amqp(publishing_id: int) -> AMQPMessage:
        message = AMQPMessage(body=payload)  # a NamedTuple: the id is set after __new__
        message.publishing_id = publishing_id
        return message

    return amqp


async def _publish(
    producer: Any, stream: str, *, payload: bytes, kind: str, batch: int, messages: int,
    in_flight: int, reference: str | None,
) -> tuple[float, int, list[float]]:  # fmt: skip
    """Seconds until the last confirm, messages confirmed, and each batch's latency (sorted)."""
    from rstream import ConfirmationStatus

    batches = -(-messages // batch)
    left = [min(batch, messages - i * batch) for i in range(batches)]
    started = [0.0] * batches
    latencies: list[float] = []
    failed: list[ConfirmationStatus] = []
    progress = asyncio.Event()
    clock = time.perf_counter
    confirmed = 0

    def on_confirm(status: ConfirmationStatus) -> None:
        nonlocal confirmed
        if not status.is_confirmed:
            failed.append(status)
            progress.set()
            return
        i = (status.message_id - 1) // batch
        left[i] -= 1
        confirmed += 1
        if not left[i]:
            latencies.append(clock() - started[i])
            progress.set()

    async def settle(sent: int, until: int) -> None:
        """Wait until at most ``until`` of the ``sent`` batches are unconfirmed."""
        while sent - len(latencies) > until and not failed:
            progress.clear()
            try:
                await asyncio.wait_for(progress.wait(), STALL_S)
            except TimeoutError:
                stalled = f"no confirm for {STALL_S:.0f} s ({confirmed} confirmed)"
                raise RuntimeError(stalled) from None
        if failed:
            raise RuntimeError(f"{len(failed)}+ messages not confirmed, e.g. {failed[0]}")

    make = _factory(kind, payload)
    send = producer.send_batch
    next_id = 1
    t0 = clock()
    for i in range(batches):
        await settle(i, in_flight - 1)
        one = [make(publishing_id) for publishing_id in range(next_id, next_id + left[i])]
        next_id += left[i]
        started[i] = clock()
        await send(stream, one, publisher_name=reference, on_publish_confirm=on_confirm)
    await settle(batches, 0)
    seconds = clock() - t0
    latencies.sort()
    return seconds, confirmed, latencies


async def _publish_singles(
    producer: Any, stream: str, *, payload: bytes, kind: str, first_id: int, count: int,
    reference: str | None,
) -> list[float]:  # fmt: skip
    """Publish ``count`` messages one at a time; each one's send-to-confirm latency, sorted."""
    from rstream import ConfirmationStatus

    confirmed = asyncio.Event()
    failed: list[ConfirmationStatus] = []

    def on_confirm(status: ConfirmationStatus) -> None:
        if not status.is_confirmed:
            failed.append(status)
        confirmed.set()

    make = _factory(kind, payload)
    clock = time.perf_counter
    latencies: list[float] = []
    for publishing_id in range(first_id, first_id + count):
        confirmed.clear()
        t0 = clock()
        await producer.send_batch(
            stream, [make(publishing_id)], publisher_name=reference, on_publish_confirm=on_confirm
        )
        try:
            await asyncio.wait_for(confirmed.wait(), STALL_S)
        except TimeoutError:
            raise RuntimeError(f"no confirm for {STALL_S:.0f} s (one at a time)") from None
        latencies.append(clock() - t0)
        if failed:
            raise RuntimeError(f"a message was not confirmed: {failed[0]}")
    latencies.sort()
    return latencies


async def _consume(
    host: str, port: int, stream: str, *, payload: bytes, messages: int, vhost: str,
    username: str, password: str, cpu: Callable[[], float] | None,
) -> tuple[float, int, float | None]:  # fmt: skip
    """Seconds until the ``messages``-th message arrived, the messages received and the
    server's CPU meanwhile (``cpu`` given)."""
    from rstream import Consumer, ConsumerOffsetSpecification, MessageContext, OffsetType

    consumer = Consumer(host, port, vhost=vhost, username=username, password=password)
    done = asyncio.Event()
    got = 0
    last: list[bytes] = []

    def on_message(entry: Any, context: MessageContext) -> None:  # entry: bytes (decoder None)
        nonlocal got
        got += 1
        if got == messages:
            last.append(bytes(entry))
            done.set()

    await consumer.start()
    try:
        cpu0 = cpu() if cpu is not None else 0.0
        t0 = time.perf_counter()
        await consumer.subscribe(
            stream, on_message, decoder=None,
            offset_specification=ConsumerOffsetSpecification(OffsetType.FIRST, None),
        )  # fmt: skip
        seen = -1
        while not done.is_set():
            if got == seen:
                raise RuntimeError(f"no delivery for {STALL_S:.0f} s ({got} of {messages})")
            seen = got
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), STALL_S)
        seconds = time.perf_counter() - t0
        spent = cpu() - cpu0 if cpu is not None else None
    finally:
        await consumer.close()
    if not last[0].endswith(payload):  # raw: the payload; amqp: a data section ending with it
        raise RuntimeError("the last message consumed differs from the one published")
    return seconds, got, spent


async def _bench(
    address: str, *, size: int, kind: str, batch: int, in_flight: int, messages: int,
    singles: int, dedup: bool, vhost: str, username: str, password: str,
    cpu: Callable[[], float] | None,
) -> RabbitStreamBenchResult:  # fmt: skip
    from rstream import Producer

    host, port = _split(address)
    stream = f"bench-{size}-{kind}-{uuid.uuid4().hex[:8]}"
    payload = os.urandom(size)
    producer = Producer(host, port, vhost=vhost, username=username, password=password)
    reference = stream if dedup else None
    await producer.start()
    try:
        await producer.create_stream(stream)
        cpu0 = cpu() if cpu is not None else 0.0
        publish_s, confirmed, latencies = await _publish(
            producer, stream, payload=payload, kind=kind, batch=batch, messages=messages,
            in_flight=in_flight, reference=reference,
        )  # fmt: skip
        publish_cpu = cpu() - cpu0 if cpu is not None else None
        one = await _publish_singles(
            producer, stream, payload=payload, kind=kind, first_id=messages + 1, count=singles,
            reference=reference,
        )  # fmt: skip
        consume_s, consumed, consume_cpu = await _consume(
            host, port, stream, payload=payload, messages=messages + singles, vhost=vhost,
            username=username, password=password, cpu=cpu,
        )  # fmt: skip
        await producer.delete_stream(stream)
    finally:
        await producer.close()
    return RabbitStreamBenchResult(
        message_size=size,
        kind=kind,
        batch=batch,
        in_flight=in_flight,
        messages=messages,
        confirmed=confirmed,
        consumed=consumed,
        publish_seconds=publish_s,
        consume_seconds=consume_s,
        publish_p50_ms=_percentile(latencies, 0.50) * 1000,
        publish_p99_ms=_percentile(latencies, 0.99) * 1000,
        singles=singles,
        one_p50_ms=_percentile(one, 0.50) * 1000,
        one_p99_ms=_percentile(one, 0.99) * 1000,
        publish_cpu_s=publish_cpu,
        consume_cpu_s=consume_cpu,
    )


def bench_rabbitmq_stream(
    address: str,
    *,
    message_size: int,
    kind: str = "amqp",
    batch: int = 1000,
    in_flight: int = 10,
    messages: int = 1_000_000,
    singles: int = 0,
    dedup: bool = True,
    vhost: str = "/",
    username: str = "guest",
    password: str = "guest",
    cpu: Callable[[], float] | None = None,
) -> RabbitStreamBenchResult:
    """Publish ``messages`` to a fresh stream at ``address`` (host:port), then ``singles`` one
    at a time, then consume them all. ``cpu`` (the server's CPU seconds so far), when given, is
    sampled before and after publishing the batches and before and after consuming: the
    figures leave out connecting, logging in, the singles and making and deleting the stream,
    as ``bench_kafka``'s do."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
    if batch < 1 or in_flight < 1 or messages < 1 or singles < 0:
        raise ValueError("batch, in_flight and messages must be positive, singles not negative")
    entry = message_size + (_AMQP_OVERHEAD if kind == "amqp" else 0)
    if _PUBLISH_OVERHEAD + min(batch, messages) * (entry + _MESSAGE_OVERHEAD) > FRAME_MAX:
        # send_batch sends one frame whatever its size; the server would close the connection
        raise ValueError(f"{batch} messages of {message_size} B exceed one {FRAME_MAX} B frame")
    return asyncio.run(
        _bench(address, size=message_size, kind=kind, batch=batch, in_flight=in_flight,
               messages=messages, singles=singles, dedup=dedup, vhost=vhost,
               username=username, password=password, cpu=cpu)
    )  # fmt: skip


__all__ = ["KINDS", "RabbitStreamBenchResult", "bench_rabbitmq_stream"]
