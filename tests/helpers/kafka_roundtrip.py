"""confluent-kafka producing to and reading from a gateway, for tests that only need the
messages to go through (the TLS-to-the-backend tests): bounded, nothing else."""

from __future__ import annotations

from confluent_kafka import Consumer, Producer


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


__all__ = ["produce", "take"]
