"""confluent-kafka pieces shared by the transaction tests (embedded store and Kafka backend):
topics, transactional producers, reading at an isolation level, and the consume-transform-
produce step with ``send_offsets_to_transaction``. Blocking: run them in a thread."""

from __future__ import annotations

import time
import uuid
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

CLIENT_S = 15  # each blocking client call


def create_topic(servers: str, topic: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": servers})
    for f in admin.create_topics([NewTopic(topic, num_partitions=partitions)]).values():
        f.result(CLIENT_S)


def txn_producer(servers: str, tid: str, **extra: Any) -> Producer:
    producer = Producer({"bootstrap.servers": servers, "transactional.id": tid, **extra})
    producer.init_transactions(CLIENT_S)
    return producer


def _consumer(servers: str, topic: str, isolation: str, assign: bool) -> Consumer:
    consumer = Consumer({
        "bootstrap.servers": servers, "group.id": f"r-{uuid.uuid4().hex}",
        "auto.offset.reset": "earliest", "isolation.level": isolation,
        "enable.auto.commit": False,
    })  # fmt: skip
    if assign:  # no JoinGroup (Tansu holds a new member's for half its session timeout)
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    else:
        consumer.subscribe([topic])
    return consumer


def read_isolated(
    servers: str,
    topic: str,
    isolation: str,
    *,
    expect: int,
    idle_s: float = 1.0,
    assign: bool = False,
) -> list[bytes]:
    """Every value from the start of ``topic`` read at ``isolation.level`` by a fresh group
    (``assign``: partition 0 by assignment), until ``expect`` arrived and then ``idle_s``
    passed with nothing more (what must not come has had its chance to), 20 s at most."""
    consumer = _consumer(servers, topic, isolation, assign)
    got: list[bytes] = []
    deadline = time.monotonic() + 20
    quiet_since = time.monotonic()
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                if len(got) >= expect and time.monotonic() - quiet_since > idle_s:
                    break
                continue
            error = msg.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    continue
                raise KafkaException(error)
            got.append(msg.value() or b"")
            quiet_since = time.monotonic()
    finally:
        consumer.close()
    return got


def eos_step(servers: str, *, assign: bool = False) -> tuple[int, int, int, list[bytes]]:
    """Consume-transform-produce: 6 messages of ``eos-in`` read by group ``g-eos`` at
    read_committed; one transaction with an output record and the group's offset 3 aborted;
    then one writing the 6 transformed to ``eos-out`` with the offset past them, committed.
    Returns the group's committed offset before, after the abort and after the commit, and
    what a read_committed reader of ``eos-out`` gets."""
    create_topic(servers, "eos-in")
    create_topic(servers, "eos-out")
    plain = Producer({"bootstrap.servers": servers})
    for i in range(6):
        plain.produce("eos-in", b"in-%d" % i)
    assert plain.flush(CLIENT_S) == 0
    consumer = Consumer({
        "bootstrap.servers": servers, "group.id": "g-eos", "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "isolation.level": "read_committed",
    })  # fmt: skip
    if assign:
        consumer.assign([TopicPartition("eos-in", 0, OFFSET_BEGINNING)])
    else:
        consumer.subscribe(["eos-in"])

    def committed() -> int:
        (tp,) = consumer.committed([TopicPartition("eos-in", 0)], timeout=CLIENT_S)
        return int(tp.offset)

    seen: list[Any] = []
    deadline = time.monotonic() + 20
    while len(seen) < 6 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            seen.append(msg)
    assert len(seen) == 6
    producer = txn_producer(servers, "tid-eos")
    before = committed()
    producer.begin_transaction()  # an aborted step: output and offsets both dropped
    producer.produce("eos-out", b"dropped")
    assert producer.flush(CLIENT_S) == 0  # stored: read_committed must skip it
    producer.send_offsets_to_transaction(
        [TopicPartition("eos-in", 0, 3)], consumer.consumer_group_metadata(), CLIENT_S
    )
    producer.abort_transaction(CLIENT_S)
    after_abort = committed()
    producer.begin_transaction()
    for msg in seen:
        producer.produce("eos-out", (msg.value() or b"").replace(b"in", b"out"))
    producer.send_offsets_to_transaction(
        [TopicPartition("eos-in", 0, seen[-1].offset() + 1)],
        consumer.consumer_group_metadata(),
        CLIENT_S,
    )
    producer.commit_transaction(CLIENT_S)
    after_commit = committed()
    consumer.close()
    out = read_isolated(servers, "eos-out", "read_committed", expect=6, assign=assign)
    return before, after_abort, after_commit, out


def fenced(servers: str, topic: str) -> str:
    """A transactional producer stores ``zombie`` in an open transaction; a second one with
    the same transactional id commits ``fresh``; the first then tries ``late`` and a commit.
    Returns the first one's error as ``NAME fatal=BOOL`` ("" if none)."""
    create_topic(servers, topic)
    first = txn_producer(servers, f"tid-{topic}")
    first.begin_transaction()
    first.produce(topic, b"zombie")
    assert first.flush(CLIENT_S) == 0
    second = txn_producer(servers, f"tid-{topic}")  # aborts the first one's transaction
    second.begin_transaction()
    second.produce(topic, b"fresh")
    second.commit_transaction(CLIENT_S)
    try:
        first.produce(topic, b"late")
        first.commit_transaction(CLIENT_S)
    except KafkaException as exc:
        err = exc.args[0]
        return f"{err.name()} fatal={err.fatal()}"
    return ""


__all__ = ["CLIENT_S", "create_topic", "eos_step", "fenced", "read_isolated", "txn_producer"]
