"""Kafka clients for the many-gateways tests (issue 14), on every backend: confluent-kafka
group members in threads that count a message only once the group's coordinator took its commit,
the checks on what they hold, one raw Kafka request to any listener, and an idempotent
producer's raw batches.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import trio
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from kio.index import load_request_schema

from protocols._wire import NEED_DATA
from protocols.kafka import Compression, Record, encode_batch
from protocols.kafka.build import build
from protocols.kafka.framing import KafkaClientCodec, KafkaResponse

PARTITIONS = 6
MESSAGES = 600
SESSION_MS = 6000
CALL_LIMIT_S = 20.0


async def in_thread(fn: Callable[[], Any]) -> Any:
    return await trio.to_thread.run_sync(fn, abandon_on_cancel=True)


def create_and_fill(bootstrap: str, topic: str, *, idempotent: bool = True) -> None:
    """A 6-partition topic and 600 keyed messages, by an idempotent producer unless told (where
    the backend deduplicates: the Kafka broker, or RabbitMQ)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        future.result(20)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": idempotent,
                         "linger.ms": 5})  # fmt: skip
    for i in range(MESSAGES):
        producer.produce(topic, value=b"m%d" % i, key=b"key-%d" % i)
    assert producer.flush(30) == 0


@dataclass
class Counted:
    """What the consumers counted: (partition, offset) -> how often, under one lock."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    times: dict[tuple[int, int], int] = field(default_factory=dict)
    delivered: set[tuple[int, int]] = field(default_factory=set)
    stopped: set[str] = field(default_factory=set)
    closed_s: dict[str, float] = field(default_factory=dict)
    assigned: dict[str, set[int]] = field(default_factory=dict)
    member_ids: dict[str, str] = field(default_factory=dict)
    stop: threading.Event = field(default_factory=threading.Event)

    def total(self) -> int:
        with self.lock:
            return len(self.times)


def member(name: str, bootstrap: str, topic: str, group: str, counted: Counted) -> None:
    """A group member through one gateway: a message counts once the broker took its commit
    (committed synchronously, one message at a time); a refused commit leaves the message to
    whoever owns the partition in the new generation."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "session.timeout.ms": SESSION_MS,
        "heartbeat.interval.ms": 500, "client.id": name,
    })  # fmt: skip

    def on_assign(_: Any, partitions: list[Any]) -> None:
        with counted.lock:
            counted.assigned[name] = {p.partition for p in partitions}
            counted.member_ids[name] = consumer.memberid() or ""

    def on_revoke(_: Any, partitions: list[Any]) -> None:
        with counted.lock:
            counted.assigned[name] = set()

    consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
    try:
        while not counted.stop.is_set() and name not in counted.stopped:
            msg = consumer.poll(0.2)
            if msg is None or msg.error() is not None:
                continue
            partition, offset = msg.partition(), msg.offset()
            assert partition is not None and offset is not None
            key = (partition, offset)
            with counted.lock:
                counted.delivered.add(key)
            try:
                consumer.commit(message=msg, asynchronous=False)
            except KafkaException:
                continue  # refused (fenced), or its answer lost with a killed gateway
            with counted.lock:
                counted.times[key] = counted.times.get(key, 0) + 1
    finally:
        started = time.monotonic()
        consumer.close()
        counted.closed_s[name] = time.monotonic() - started


async def until(check: Callable[[], bool], limit_s: float, what: str) -> None:
    """Polls ``check`` (state the consumer threads change) until it holds."""
    with trio.move_on_after(limit_s):
        while not check():  # noqa: ASYNC110 - threads change the state, no event to wait on
            await trio.sleep(0.1)
        return
    raise AssertionError(f"not within {limit_s} s: {what}")


def settled(counted: Counted, names: list[str]) -> bool:
    """Every named member holds partitions, none twice, all of them covered."""
    with counted.lock:
        held = [counted.assigned.get(n, set()) for n in names]
    every = [p for h in held for p in h]
    return all(held) and sorted(every) == list(range(PARTITIONS))


async def one_group_counts_every_message_once(
    bootstraps: list[str], *, idempotent: bool = True, describe_each: int = 1
) -> None:
    """A member of group ``g`` through each of ``bootstraps`` (a gateway each, or one port that
    several workers share), 600 messages of ``orders``: the members settle on disjoint
    partitions covering the topic and count every message once; DescribeGroups through each
    bootstrap (``describe_each`` times: a connection each) shows the one Stable group of all."""
    counted = Counted()
    names = [f"via-{i}" for i in range(len(bootstraps))]
    await in_thread(lambda: create_and_fill(bootstraps[0], "orders", idempotent=idempotent))
    async with trio.open_nursery() as nursery:
        for name, bootstrap in zip(names, bootstraps, strict=True):
            nursery.start_soon(
                in_thread, lambda n=name, b=bootstrap: member(n, b, "orders", "g", counted)
            )
        await until(lambda: settled(counted, names), 45, f"members: {counted.assigned}")
        await until(lambda: counted.total() == MESSAGES, 30, "600 messages counted")
        seen = [await describe(b, "g") for b in bootstraps for _ in range(describe_each)]
        counted.stop.set()
    for group in seen:
        assert (group.group_state, len(group.members)) == ("Stable", len(names)), group
    assert len(counted.times) == MESSAGES
    assert set(counted.times.values()) == {1}, "a message was counted twice"


async def describe(address: str, group: str) -> Any:
    [answer] = (await kafka_call(address, 15, 1, {"groups": [group]})).groups
    return answer


async def kafka_call(address: str, api_key: int, version: int, values: Mapping[str, Any]) -> Any:
    """One request to whatever speaks Kafka at ``host:port`` (the broker, or a gateway's
    listener), on a connection of its own; the kio answer."""
    host, port = address.rsplit(":", 1)
    codec = KafkaClientCodec("direct-test")
    with trio.fail_after(CALL_LIMIT_S):
        stream = await trio.open_tcp_stream(host, int(port))
        async with stream:
            await stream.send_all(
                codec.send(build(load_request_schema(api_key, version), values))[1]
            )
            while True:
                answer = codec.next_response()
                if isinstance(answer, KafkaResponse):
                    return answer.body
                assert answer is NEED_DATA, "the peer closed the connection"
                data = await stream.receive_some(1 << 20)
                assert data, "the peer closed the connection"
                codec.receive_data(data)


async def committed(address: str, topic: str = "orders", group: str = "g") -> dict[int, int]:
    """The group's committed offsets as the backend keeps them, through a gateway (OffsetFetch)."""
    answer = await kafka_call(
        address, 9, 5,
        {"group_id": group,
         "topics": [{"name": topic, "partition_indexes": list(range(PARTITIONS))}]},
    )  # fmt: skip
    return {p.partition_index: p.committed_offset for p in answer.topics[0].partitions}


def batch(pid: int, epoch: int, sequence: int, n: int = 3) -> bytes:
    records = [Record(offset_delta=i, timestamp_delta=0, key=None, value=b"s%d" % (sequence + i))
               for i in range(n)]  # fmt: skip
    return encode_batch(
        records, base_timestamp_ms=1_700_000_000_000, compression=Compression.NONE,
        producer_id=pid, producer_epoch=epoch, base_sequence=sequence,
    )  # fmt: skip


def produce_request(topic: str, records: bytes) -> dict[str, Any]:
    partition = {"index": 0, "records": records}
    return {"transactional_id": None, "acks": -1, "timeout": 10_000,
            "topic_data": [{"name": topic, "partition_data": [partition]}]}  # fmt: skip


async def produce(address: str, topic: str, records: bytes) -> tuple[int, int]:
    answer = await kafka_call(address, 0, 7, produce_request(topic, records))
    part = answer.responses[0].partition_responses[0]
    return int(part.error_code.value), part.base_offset


# The listener ports of gateways killed under a client that goes on retrying them: librdkafka's
# consumer of a killed gateway never finishes closing (it would leave its group through it) and
# reconnects for as long as the test process lives. Held here, a port is not handed to another
# server later in the session (a Spark worker's callback socket once got its Kafka requests).
_HELD_PORTS: list[socket.socket] = []


def hold_port(address: str) -> None:
    """Keep the dead gateway's ``host:port`` bound and listening (never accepting)."""
    host, port = address.rsplit(":", 1)
    held = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        held.bind((host, int(port)))
        held.listen(1)
    except OSError:
        held.close()
        raise
    _HELD_PORTS.append(held)


async def members_move_off_a_killed_gateway(
    a: Any, b: Any, committed: Callable[[], Awaitable[dict[int, int]]], *, idempotent: bool = True
) -> None:
    """Two real gateways ``a`` and ``b`` (tests.helpers.gateways.Gateway), one group member
    through each; ``a`` is SIGKILLed mid-stream (its consumer is left talking to nothing). The
    group drops its member after the session timeout, the survivor takes its partitions from the
    offsets committed through the dead gateway, nothing is lost and no commit is taken twice.
    (One commit whose answer died with the gateway may have been taken unseen: that message is
    delivered but not counted, so the count is checked against ``committed()``, the group's
    committed offsets as the backend has them.)"""
    counted = Counted()
    await in_thread(lambda: create_and_fill(b.kafka, "orders", idempotent=idempotent))
    doomed = trio.CancelScope()

    async def via_a() -> None:
        with doomed:
            await in_thread(lambda: member("via-a", a.kafka, "orders", "g", counted))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(via_a)
        nursery.start_soon(in_thread, lambda: member("via-b", b.kafka, "orders", "g", counted))
        await until(lambda: settled(counted, ["via-a", "via-b"]), 45, "2 members")
        await until(lambda: counted.total() >= 200, 30, "200 messages counted")
        with counted.lock:
            orphaned = set(counted.assigned["via-a"])
        await a.kill()
        hold_port(a.kafka)
        killed_at = time.monotonic()
        await until(
            lambda: counted.assigned.get("via-b") == set(range(PARTITIONS)),
            SESSION_MS / 1000 + 15,
            "via-b holds every partition",
        )
        moved_s = time.monotonic() - killed_at
        with counted.lock:
            counted.stopped.add("via-a")
        await until(lambda: len(counted.delivered) == MESSAGES, 30, "600 delivered")
        ends = {p: 1 + max(o for q, o in counted.delivered if q == p)
                for p in range(PARTITIONS)}  # fmt: skip
        while await committed() != ends:  # noqa: ASYNC110 - the backend's state, no event
            await trio.sleep(0.2)
        counted.stop.set()
        # via-a's librdkafka never finishes closing (it would leave the group through the dead
        # gateway): its thread is left to it.
        await until(lambda: "via-b" in counted.closed_s, 15, "via-b closed")
        doomed.cancel()
    assert orphaned and moved_s < SESSION_MS / 1000 + 15, (orphaned, moved_s)
    assert sum(ends.values()) == MESSAGES
    assert set(counted.times.values()) == {1}, "a commit was taken twice"
    assert len(counted.times) >= MESSAGES - len(orphaned)  # at most one unseen per partition


async def idempotent_retries_through_two_gateways(
    a: Any, b: Any, *, duplicate_offset: int = -1
) -> tuple[int, int]:
    """An idempotent producer (its id granted through ``a``) on a new topic ``once``: a batch
    through ``a``; its retry through ``b`` answered as a duplicate (no offsets); the next batch
    through ``b``; a gap refused; a batch sent through ``a``, which is SIGKILLed before
    answering (it may or may not have reached the backend), retried through ``b``. The caller
    checks what the backend stored: sequences 0..8 once each. (producer id, epoch). A duplicate
    is answered without offsets by a Kafka broker (-1), with the original's by the embedded
    store (``duplicate_offset=0``)."""
    topic = {"name": "once", "num_partitions": 1, "replication_factor": 1,
             "assignments": [], "configs": []}  # fmt: skip
    await kafka_call(a.kafka, 19, 2, {"topics": [topic], "timeout": 10_000, "validate_only": False})
    granted = await kafka_call(a.kafka, 22, 1, {"transactional_id": None,
                                                "transaction_timeout": 60_000})  # fmt: skip
    pid, epoch = granted.producer_id, granted.producer_epoch
    assert pid >= 0
    assert await produce(a.kafka, "once", batch(pid, epoch, 0)) == (0, 0)
    # The answer was lost, say: the producer retries through the other gateway.
    assert await produce(b.kafka, "once", batch(pid, epoch, 0)) == (0, duplicate_offset)
    assert await produce(b.kafka, "once", batch(pid, epoch, 3)) == (0, 3)
    assert (await produce(b.kafka, "once", batch(pid, epoch, 9)))[0] != 0  # a gap
    host, port = a.kafka.rsplit(":", 1)
    stream = await trio.open_tcp_stream(host, int(port))
    async with stream:
        codec = KafkaClientCodec("crash-test")
        request = build(load_request_schema(0, 7), produce_request("once", batch(pid, epoch, 6)))
        await stream.send_all(codec.send(request)[1])
        await a.kill()
    code, _ = await produce(b.kafka, "once", batch(pid, epoch, 6))
    assert code == 0
    return pid, epoch
