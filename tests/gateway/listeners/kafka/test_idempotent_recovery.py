"""Issue 18 item 7: an idempotent confluent-kafka producer after local timeouts, and across a
gateway restart, against a real ``streamgate run`` on the embedded backend.

librdkafka times messages out locally (``message.timeout.ms``) while the gateway is stopped
(SIGSTOP): it then drains its in-flight requests and bumps its producer epoch itself, and goes
on at sequence 0 of the new epoch (librdkafka INTRODUCTION.md, "Message timeout
considerations"; ``rd_kafka_idemp_drain_done``). The gateway must take that batch, or the
producer never recovers. A producer whose batch lands on a gateway that is then killed retries
it on the next one; the restarted store must know it (dedup state survives the restart).

What is asserted is what the client was told against what the log holds: every acknowledged
value once, at its acknowledged offset, nothing twice, in produce order. Timings decide
nothing: every wait is for an event (a count reached), bounded only as a liveness limit.
"""

from __future__ import annotations

import signal
import threading
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import trio
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from kio.schema.errors import ErrorCode

from protocols.kafka import split_batches
from tests.helpers.gateways import Gateway, running_gateway
from tests.helpers.kafka_group_members import batch, kafka_call, produce
from tests.helpers.processes import free_ports, send_signal

pytestmark = pytest.mark.slow

TEST_S = 100.0
MESSAGE_TIMEOUT_MS = 1500
WINDOW = 200  # produced and not yet reported, at most
AFTER = 300  # acknowledged after the disturbance: the producer has recovered


@dataclass
class Log:
    """What the producer was told, per value, from its delivery reports and error callback."""

    acked: dict[bytes, int] = field(default_factory=dict)  # value -> offset
    failed: dict[bytes, int] = field(default_factory=dict)  # value -> error code
    fatal: list[str] = field(default_factory=list)
    produced: list[bytes] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self) -> tuple[int, int]:
        with self.lock:
            return len(self.acked), len(self.failed)


def _producer(bootstrap: str, topic: str, stop: threading.Event, log: Log) -> None:
    pending = 0

    def delivered(error: KafkaError | None, message: Message) -> None:
        nonlocal pending
        pending -= 1
        value = message.value() or b""
        with log.lock:
            if error is None:
                offset = message.offset()
                assert offset is not None
                log.acked[value] = offset
            else:
                log.failed[value] = error.code()

    def on_error(error: KafkaError) -> None:
        if error.fatal():
            with log.lock:
                log.fatal.append(str(error))

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "linger.ms": 5,
            "message.timeout.ms": MESSAGE_TIMEOUT_MS,
            "reconnect.backoff.ms": 50,
            "reconnect.backoff.max.ms": 200,
            "error_cb": on_error,
        }
    )
    sent = 0
    while not stop.is_set() and not log.fatal:
        if pending >= WINDOW:
            producer.poll(0.01)
            continue
        value = b"m%07d" % sent
        producer.produce(topic, value=value, partition=0, on_delivery=delivered)
        with log.lock:
            log.produced.append(value)
        pending += 1
        sent += 1
        producer.poll(0)
    producer.flush(MESSAGE_TIMEOUT_MS / 1000 + 5)


def _consume(bootstrap: str, topic: str) -> list[tuple[int, bytes]]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "verify", "enable.auto.commit": False}
    )
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        consumer.assign([TopicPartition(topic, 0, 0)])
        got: list[tuple[int, bytes]] = []
        while not got or got[-1][0] < high - 1:
            message = consumer.poll(1.0)
            if message is None:
                continue
            assert message.error() is None, message.error()
            offset = message.offset()
            assert offset is not None
            got.append((offset, message.value() or b""))
        return got
    finally:
        consumer.close()


async def _until(check: object, what: str, log: Log) -> None:
    assert callable(check)
    while not check():
        assert not log.fatal, f"the producer failed fatally while waiting for {what}: {log.fatal}"
        await trio.sleep(0.05)


def _verify(log: Log, stored: list[tuple[int, bytes]]) -> None:
    """Every acknowledged value once, at its offset; nothing twice; produce order kept."""
    values = [v for _, v in stored]
    assert len(values) == len(set(values)), "a value was stored twice"
    at = dict(stored)
    for value, offset in log.acked.items():
        assert at.get(offset) == value, f"acknowledged {value!r}@{offset} is not in the log"
    rank = {v: i for i, v in enumerate(log.produced)}
    assert all(v in rank for v in values), "the log holds a value nobody produced"
    order = [rank[v] for v in values]
    assert order == sorted(order), "the log is out of produce order"


async def _epochs(gw: Gateway, topic: str) -> set[tuple[int, int]]:
    """The (producer id, epoch) pairs of the stored batches, read back with Fetch v4."""
    seen: set[tuple[int, int]] = set()
    offset, high = 0, 1
    while offset < high:
        wanted = {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20}
        answer = await kafka_call(
            gw.kafka, 1, 4,
            {"replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20,
             "isolation_level": 0, "topics": [{"topic": topic, "partitions": [wanted]}]},
        )  # fmt: skip
        part = answer.responses[0].partitions[0]
        high = part.high_watermark
        batches, _ = split_batches(part.records or b"")
        for header, _ in batches:
            seen.add((header.producer_id, header.producer_epoch))
            offset = max(offset, header.base_offset + header.last_offset_delta + 1)
    return seen


async def _topic(gw: Gateway, name: str) -> None:
    topic = {"name": name, "num_partitions": 1, "replication_factor": 1,
             "assignments": [], "configs": []}  # fmt: skip
    await kafka_call(
        gw.kafka, 19, 2, {"topics": [topic], "timeout": 10_000, "validate_only": False}
    )


async def test_idempotent_producer_recovers_after_local_timeouts(tmp_path: Path) -> None:
    log = Log()
    stop = threading.Event()
    with trio.fail_after(TEST_S):
        async with running_gateway("embedded:./data", tmp_path, "timeouts") as gw:
            await _topic(gw, "bumped")
            async with trio.open_nursery() as nursery:
                nursery.start_soon(
                    trio.to_thread.run_sync, _producer, gw.kafka, "bumped", stop, log
                )
                try:
                    await _until(lambda: log.count()[0] >= AFTER, "the first acks", log)
                    send_signal(gw.pid, signal.SIGSTOP)
                    try:
                        # Nothing is answered now: what is queued and in flight times out.
                        await _until(lambda: log.count()[1] >= 1, "local timeouts", log)
                    finally:
                        send_signal(gw.pid, signal.SIGCONT)
                    resumed = log.count()[0]
                    await _until(lambda: log.count()[0] >= resumed + AFTER, "recovery", log)
                finally:
                    stop.set()
            assert not log.fatal
            assert set(log.failed.values()) == {KafkaError._MSG_TIMED_OUT}
            stored = await trio.to_thread.run_sync(_consume, gw.kafka, "bumped")
            # The recovery went through a new epoch of the same producer id (librdkafka bumps
            # it itself; the gateway took its batches at sequence 0 again).
            epochs = await _epochs(gw, "bumped")
            assert len({pid for pid, _ in epochs}) == 1 and max(e for _, e in epochs) >= 1
    _verify(log, stored)


async def test_idempotent_producer_survives_a_gateway_crash(tmp_path: Path) -> None:
    """The gateway is SIGKILLed under the producer and restarted on the same port and data:
    batches it stored but never answered are retried by the client with the same producer id,
    epoch and sequence, and the restarted store knows them."""
    log = Log()
    stop = threading.Event()
    [port] = free_ports(1)
    same_port = ("--kafka-port", str(port))
    with trio.fail_after(TEST_S):
        async with trio.open_nursery() as nursery:
            async with running_gateway("embedded:./data", tmp_path, "one", *same_port) as gw:
                await _topic(gw, "crash")
                nursery.start_soon(trio.to_thread.run_sync, _producer, gw.kafka, "crash", stop, log)
                await _until(lambda: log.count()[0] >= AFTER, "the first acks", log)
                await gw.kill()
            before = log.count()[0]
            try:
                async with running_gateway("embedded:./data", tmp_path, "two", *same_port) as gw:
                    await _until(lambda: log.count()[0] >= before + AFTER, "recovery", log)
                    stop.set()
            finally:
                stop.set()
        assert not log.fatal
        async with running_gateway("embedded:./data", tmp_path, "three") as gw:
            stored = await trio.to_thread.run_sync(_consume, gw.kafka, "crash")
    _verify(log, stored)


async def test_producer_state_and_epochs_survive_restart(tmp_path: Path) -> None:
    """On the wire: InitProducerId v0-v4, a retry answered from the restarted store with its
    original offset, a gap refused, a client-side epoch bump taken at sequence 0, and the old
    epoch fenced before and after another restart."""
    out_of_order = ErrorCode.out_of_order_sequence_number.value
    fenced = ErrorCode.invalid_producer_epoch.value
    plain = {"transactional_id": None, "transaction_timeout": 60_000}
    with trio.fail_after(TEST_S):
        async with running_gateway("embedded:./data", tmp_path, "a") as gw:
            await _topic(gw, "kept")
            ids = set()
            for version in range(5):
                granted = await kafka_call(gw.kafka, 22, version, plain)
                assert granted.error_code is ErrorCode.none and granted.producer_epoch == 0
                ids.add(granted.producer_id)
            assert len(ids) == 5
            pid = granted.producer_id
            # KIP-360 fields without a transactional id: a new id at epoch 0, as Kafka answers.
            again = await kafka_call(
                gw.kafka, 22, 4, {**plain, "producer_id": pid, "producer_epoch": 0}
            )
            assert again.error_code is ErrorCode.none
            assert again.producer_id not in ids and again.producer_epoch == 0
            half = await kafka_call(gw.kafka, 22, 3, {**plain, "producer_id": pid})
            assert half.error_code is ErrorCode.invalid_request and half.producer_id == -1
            assert await produce(gw.kafka, "kept", batch(pid, 0, 0)) == (0, 0)
            assert await produce(gw.kafka, "kept", batch(pid, 0, 3)) == (0, 3)
        async with running_gateway("embedded:./data", tmp_path, "b") as gw:
            assert await produce(gw.kafka, "kept", batch(pid, 0, 3)) == (0, 3)  # a retry
            assert await produce(gw.kafka, "kept", batch(pid, 0, 6)) == (0, 6)
            assert (await produce(gw.kafka, "kept", batch(pid, 0, 12)))[0] == out_of_order
            assert (await produce(gw.kafka, "kept", batch(pid, 1, 3)))[0] == out_of_order
            assert await produce(gw.kafka, "kept", batch(pid, 1, 0)) == (0, 9)  # bumped
            assert (await produce(gw.kafka, "kept", batch(pid, 0, 9)))[0] == fenced
        async with running_gateway("embedded:./data", tmp_path, "c") as gw:
            assert (await produce(gw.kafka, "kept", batch(pid, 0, 9)))[0] == fenced
            assert await produce(gw.kafka, "kept", batch(pid, 1, 0)) == (0, 9)  # a retry
            assert await produce(gw.kafka, "kept", batch(pid, 1, 3)) == (0, 12)
