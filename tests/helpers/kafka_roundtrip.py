"""confluent-kafka producing to and reading from a gateway, for tests that only need the
messages to go through (the TLS-to-the-backend tests): bounded, nothing else."""

from __future__ import annotations

import os
import shutil
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition


def produce(servers: str, topic: str, values: list[bytes], partition: int = 0) -> None:
    """``values`` to ``topic``'s ``partition``, every one acknowledged."""
    producer = Producer({"bootstrap.servers": servers, "linger.ms": 5})
    for value in values:
        producer.produce(topic, value, partition=partition)
    assert producer.flush(20) == 0


def take(consumer: Consumer, count: int) -> list[bytes]:
    """The values of the next ``count`` messages (each within 10 s); closes ``consumer``."""
    got: list[bytes] = []
    try:
        while len(got) < count:
            msg = consumer.poll(10)
            assert msg is not None and msg.error() is None, msg and msg.error()
            got.append(msg.value() or b"")
    finally:
        consumer.close()
    return got


def subscribed(servers: str, topic: str, creds: dict[str, Any]) -> Consumer:
    """A consumer of group ``g-<topic>`` subscribed to ``topic`` from its start, with client
    settings ``creds`` (SASL, TLS)."""
    consumer = Consumer({"bootstrap.servers": servers, "group.id": f"g-{topic}",
                         "auto.offset.reset": "earliest", **creds})  # fmt: skip
    consumer.subscribe([topic])
    return consumer


def produce_and_take(servers: str, topic: str, count: int, creds: dict[str, Any]) -> list[bytes]:
    """``v0`` .. ``v<count-1>`` produced to ``topic`` and read back in a group, both with
    ``creds``: a producer's and a group consumer's every request through one login."""
    producer = Producer({"bootstrap.servers": servers, **creds})
    for i in range(count):
        producer.produce(topic, b"v%d" % i)
    assert producer.flush(20) == 0
    return take(subscribed(servers, topic, creds), count)


def round_trip(conf: dict[str, Any], topic: str, values: list[bytes]) -> list[bytes]:
    """Produce ``values`` to partition 0 of ``topic`` with client settings ``conf`` (security
    included), then read back what is there from offset 0 with the same settings (30 s at
    most)."""
    producer = Producer(conf)
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(30) == 0
    consumer = Consumer({**conf, "group.id": f"g-{topic}", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    try:
        give_up = time.monotonic() + 30
        while len(got) < len(values) and time.monotonic() < give_up:
            message = consumer.poll(0.5)
            if message is not None:
                assert message.error() is None, message.error()
                got.append(message.value() or b"")
    finally:
        consumer.close()
    return got


def kcat_path() -> str:
    """Debian's kcat: a failure under CI=true when missing, else a skip naming the package."""
    path = shutil.which("kcat")
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail("kcat is not installed; CI must run these tests (apt-get install kcat)")
        pytest.skip("kcat is not installed (apt-get install kcat)")
    return path


__all__ = ["kcat_path", "produce", "round_trip", "take"]
