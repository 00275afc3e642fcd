"""Traffic for the monitoring proof: a real client of each protocol against a running gateway,
so that every dashboard panel has something to show, errors included (a refused login, an
unknown topic). Each client runs bounded: a worker thread (confluent-kafka), asyncio in a
worker thread (rstream, apache-iggy), or trio (the project's Rog client).

Topics are named ``proof-*`` and consumers commit under groups the gateway is told to sample
lag for (``metrics.lag_groups`` / ``lag_topics`` / ``topic_patterns`` in the test).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import trio
from apache_iggy import Consumer as IggyConsumer
from apache_iggy import IggyClient, PollingStrategy, SendMessage
from confluent_kafka import Consumer, Producer
from rstream import AMQPMessage, ConsumerOffsetSpecification, MessageContext, OffsetType
from rstream import Consumer as StreamConsumer
from rstream import Producer as StreamProducer
from rstream.exceptions import StreamAlreadyExists

from gateway.model import DEFAULT_STREAM
from protocols.rog import Error, FetchOk, Ok
from tests.helpers.rog_client import RogClient

T = TypeVar("T")
LIMIT_S = 40.0
COUNT = 10
KAFKA_TOPIC = "proof-kafka"
STREAM = "proof-rabbit"
IGGY_TOPIC = "proof-iggy"
ROG_LOG = "proof-rog"


def _split(address: str) -> tuple[str, int]:
    host, port = address.rsplit(":", 1)
    return host, int(port)


async def _thread(fn: Callable[[], T]) -> T:
    with trio.fail_after(LIMIT_S):
        return await trio.to_thread.run_sync(fn, abandon_on_cancel=True)


async def _asyncio(scenario: Callable[[], Awaitable[T]]) -> T:
    async def main() -> T:
        return await asyncio.wait_for(scenario(), LIMIT_S - 5)

    return await _thread(lambda: asyncio.run(main()))


async def kafka(address: str) -> None:
    """confluent-kafka: produce keyed messages with headers, consume them in a group, commit,
    then go on polling an idle topic (long-poll waits)."""

    def run() -> None:
        producer = Producer({"bootstrap.servers": address, "linger.ms": 5})
        for i in range(COUNT):
            producer.produce(KAFKA_TOPIC, b"k%d" % i, key=b"key-%d" % i, headers=[("h", b"v")])
        assert producer.flush(20) == 0
        consumer = Consumer({
            "bootstrap.servers": address, "group.id": "proof-kafka-readers",
            "auto.offset.reset": "earliest", "enable.auto.commit": False,
            "fetch.wait.max.ms": 200,
        })  # fmt: skip
        try:
            consumer.subscribe([KAFKA_TOPIC])
            got = 0
            deadline = time.monotonic() + 30
            while got < COUNT:
                assert time.monotonic() < deadline, f"{got} of {COUNT} consumed"
                msg = consumer.poll(1)
                if msg is not None and msg.error() is None:
                    got += 1
            consumer.commit(asynchronous=False)
            for _ in range(3):  # nothing more: the gateway holds each Fetch until max wait
                assert consumer.poll(0.5) is None
        finally:
            consumer.close()

    await _thread(run)


async def rabbitmq_stream(address: str) -> None:
    """rstream: create a stream (a second time too: refused), publish with confirms, consume
    from the first offset and store an offset part way (the reference is a group whose lag is
    sampled)."""
    host, port = _split(address)
    kw: dict[str, Any] = {"host": host, "port": port, "username": "guest", "password": "guest"}

    async def run() -> None:
        async with StreamProducer(**kw) as producer:
            await producer.create_stream(STREAM)
            try:
                await producer.create_stream(STREAM)
            except StreamAlreadyExists:
                pass
            else:
                raise AssertionError("a stream was created twice")
            for i in range(COUNT):
                await producer.send_wait(STREAM, AMQPMessage(body=b"r%d" % i))
        offsets: list[int] = []

        async def on_message(body: Any, context: MessageContext) -> None:
            offsets.append(context.offset)

        async with StreamConsumer(**kw) as consumer:
            await consumer.subscribe(
                STREAM, on_message, subscriber_name="proof-rabbit-reader",
                offset_specification=ConsumerOffsetSpecification(OffsetType.FIRST, None),
            )  # fmt: skip
            deadline = time.monotonic() + 20
            while len(offsets) < COUNT:
                assert time.monotonic() < deadline, f"{len(offsets)} of {COUNT} delivered"
                await asyncio.sleep(0.02)
            await consumer.store_offset(STREAM, "proof-rabbit-reader", 4)
            assert await consumer.query_offset(STREAM, "proof-rabbit-reader") == 4

    await _asyncio(run)


async def iggy(address: str) -> None:
    """apache-iggy: a refused login first, then create a topic, send, poll with auto-commit,
    and poll the Kafka producer's topic too (a message crossing protocols)."""

    async def run() -> None:
        refused = IggyClient(address)
        await refused.connect()
        try:
            await refused.login_user("iggy", "not-the-password")
        except RuntimeError as exc:
            assert "Invalid credentials" in str(exc), exc
        else:
            raise AssertionError("a wrong password logged in")
        client = IggyClient(address)
        await client.connect()
        await client.login_user("iggy", "iggy")
        await client.create_topic(DEFAULT_STREAM, IGGY_TOPIC, 1)
        await client.send_messages(
            DEFAULT_STREAM, IGGY_TOPIC, 0, [SendMessage(b"i%d" % i) for i in range(COUNT)]
        )
        for topic in (IGGY_TOPIC, KAFKA_TOPIC):
            polled = await client.poll_messages(
                DEFAULT_STREAM, topic, consumer=IggyConsumer.Single("proof-iggy-reader"),
                polling_strategy=PollingStrategy.Next(), count=COUNT // 2, auto_commit=True,
                partition_id=0,
            )  # fmt: skip
            assert len(polled) == COUNT // 2, (topic, len(polled))
        await client.ping()

    await _asyncio(run)


async def rog(address: str) -> None:
    """The Rog client: publish, fetch and acknowledge some (its group commits), read the Kafka
    producer's keyed messages (Rog carries no key: a lossy translation), and publish to a log
    that does not exist (an unknown topic)."""
    client = RogClient(*_split(address))
    with trio.fail_after(LIMIT_S):
        assert isinstance(await client.create_log(ROG_LOG, 1), Ok)
        for i in range(COUNT):
            assert isinstance(await client.publish(ROG_LOG, 0, b"g%d" % i), Ok)
        for log in (ROG_LOG, KAFKA_TOPIC):
            for _ in range(3):
                assert isinstance(await client.fetch(log, 0, "proof-rog-readers"), FetchOk)
                assert isinstance(await client.ack(log, 0, "proof-rog-readers"), Ok)
        unknown = await client.publish("proof-no-such-log", 0, b"lost")
        assert isinstance(unknown, Error), unknown


async def every_protocol(addresses: dict[str, str]) -> None:
    """All four, Kafka first (the others read its topic)."""
    await kafka(addresses["kafka"])
    async with trio.open_nursery() as nursery:
        nursery.start_soon(rabbitmq_stream, addresses["rabbitmq_stream"])
        nursery.start_soon(iggy, addresses["iggy"])
        nursery.start_soon(rog, addresses["rog"])


__all__ = ["every_protocol"]
