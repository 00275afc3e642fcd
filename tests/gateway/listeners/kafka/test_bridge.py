"""Kafka and Rog clients on the same topics: the canonical path both ways (DESIGN.md §3)."""

from __future__ import annotations

from confluent_kafka import Consumer, Producer

from gateway.app import Running
from protocols.rog import FetchOk, Ok
from tests.helpers.rog_client import RogClient

from .conftest import bootstrap, in_thread


async def test_rog_publishes_kafka_consumes(gateway: Running) -> None:
    rog = RogClient(*gateway.address("rog"))
    assert isinstance(await rog.create_log("bridge-in", 2), Ok)
    values = [b"from rog %d" % i for i in range(20)]
    for v in values:
        assert isinstance(await rog.publish("bridge-in", 1, v), Ok)
    servers = bootstrap(gateway)

    def consume() -> list[tuple[int | None, int | None, bytes | None, int]]:
        c = Consumer({"bootstrap.servers": servers, "group.id": "bridge",
                      "auto.offset.reset": "earliest"})  # fmt: skip
        c.subscribe(["bridge-in"])
        got: list[tuple[int | None, int | None, bytes | None, int]] = []
        try:
            while len(got) < len(values):
                msg = c.poll(10)
                assert msg is not None and msg.error() is None
                got.append((msg.partition(), msg.offset(), msg.value(), msg.timestamp()[1]))
        finally:
            c.close()
        return got

    got = await in_thread(consume)
    assert [(p, o, v) for p, o, v, _ in got] == [(1, i, v) for i, v in enumerate(values)]
    assert all(ts > 1_600_000_000_000 for *_, ts in got)  # Rog's arrival time, in ms


async def test_kafka_produces_rog_fetches(gateway: Running) -> None:
    servers = bootstrap(gateway)

    def produce() -> None:
        p = Producer({"bootstrap.servers": servers, "compression.type": "lz4"})
        for i in range(5):
            p.produce("bridge-out", b"from kafka %d" % i, key=b"k", headers=[("h", b"v")])
        assert p.flush(20) == 0

    await in_thread(produce)
    rog = RogClient(*gateway.address("rog"))
    for i in range(5):
        fetched = await rog.fetch("bridge-out", 0, "rog-group")
        assert isinstance(fetched, FetchOk) and fetched.data == b"from kafka %d" % i
        assert isinstance(await rog.ack("bridge-out", 0, "rog-group"), Ok)


async def test_kafka_commands_are_measured(gateway: Running) -> None:
    servers = bootstrap(gateway)

    def produce() -> None:
        p = Producer({"bootstrap.servers": servers})
        for i in range(3):
            p.produce("measured", b"m%d" % i)
        assert p.flush(20) == 0

    await in_thread(produce)
    assert gateway.metrics is not None
    registry = gateway.metrics.registry
    labels = {"protocol": "kafka", "command": "append", "wire_command": "produce",
              "backend": "embedded", "outcome": "ok", "error_type": ""}  # fmt: skip
    count = registry.get_sample_value("streamgate_command_duration_seconds_count", labels)
    assert count is not None and count >= 1
    assert registry.get_sample_value("streamgate_messages_in_total", {"protocol": "kafka"}) == 3
    overhead = registry.get_sample_value(
        "streamgate_gateway_overhead_seconds_count",
        {"protocol": "kafka", "wire_command": "produce"},
    )
    assert overhead is not None and overhead >= 1
