"""Real clients over TLS to a real ``streamgate run`` (tests/helpers/tls_gateway.py): Kafka with
confluent-kafka (SSL with a client certificate and no password, SASL_SSL with PLAIN), kcat,
kafka-python and aiokafka; RabbitMQ Stream with rstream (client certificate required); Iggy
with apache-iggy's TLS option. Each proves a round trip (what was sent comes back) and, for
Kafka, that Metadata sends TLS clients to the TLS port and plaintext clients to the other.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
import trio

from tests.helpers.tls_gateway import ALICE, ALICE_PASSWORD, TlsGateway, tls_gateway

T = TypeVar("T")
LIMIT_S = 60


async def in_thread(fn: Callable[[], T], *, limit_s: float = LIMIT_S) -> T:
    with trio.fail_after(limit_s):
        return await trio.to_thread.run_sync(fn, abandon_on_cancel=True)


async def in_asyncio(main: Callable[[], Awaitable[T]], *, limit_s: float = LIMIT_S) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(main(), limit_s - 5)

    return await in_thread(lambda: asyncio.run(bounded()), limit_s=limit_s)


def _ssl_conf(g: TlsGateway, *, user: str | None) -> dict[str, Any]:
    conf: dict[str, Any] = {
        "bootstrap.servers": g.tls["kafka"],
        "security.protocol": "SSL",
        "ssl.ca.location": str(g.certs.ca_file),
    }
    if user is not None:
        cert, key = g.certs.client(user)
        conf |= {"ssl.certificate.location": str(cert), "ssl.key.location": str(key)}
    return conf


def _confluent_round_trip(conf: dict[str, Any], topic: str, values: list[bytes]) -> list[bytes]:
    from confluent_kafka import Consumer, Producer, TopicPartition

    producer = Producer(conf)
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(30) == 0
    consumer = Consumer({**conf, "group.id": f"g-{uuid.uuid4().hex[:6]}"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    for _ in range(100):
        if len(got) >= len(values):
            break
        message = consumer.poll(0.5)
        if message is not None:
            assert message.error() is None, message.error()
            got.append(message.value() or b"")
    consumer.close()
    return got


def _broker_ports(conf: dict[str, Any]) -> set[int]:
    from confluent_kafka.admin import AdminClient

    metadata = AdminClient(conf).list_topics(timeout=20)
    return {broker.port for broker in metadata.brokers.values()}


async def test_confluent_ssl_with_client_certificate_and_no_password(tmp_path: Path) -> None:
    """The listener requires SASL; a verified client certificate logs in as its CN instead."""
    async with tls_gateway(tmp_path) as g:
        conf = _ssl_conf(g, user=ALICE)
        values = [f"v{i}".encode() for i in range(5)]
        assert await in_thread(lambda: _confluent_round_trip(conf, "ssl-cert", values)) == values
        assert await in_thread(lambda: _broker_ports(conf)) == {g.tls_port("kafka")}
        assert f"user={ALICE}" in g.gateway.log()


async def test_confluent_sasl_ssl_plain_and_plaintext_side_by_side(tmp_path: Path) -> None:
    async with tls_gateway(tmp_path) as g:
        sasl = {"sasl.mechanism": "PLAIN", "sasl.username": ALICE,
                "sasl.password": ALICE_PASSWORD}  # fmt: skip
        tls_conf = {**_ssl_conf(g, user=None), "security.protocol": "SASL_SSL", **sasl}
        values = [b"over", b"tls"]
        assert await in_thread(lambda: _confluent_round_trip(tls_conf, "sasl-ssl", values)) == (
            values
        )
        assert await in_thread(lambda: _broker_ports(tls_conf)) == {g.tls_port("kafka")}
        # The same listener's plaintext port: SASL_PLAINTEXT, sent back to the plaintext port.
        plain = {"bootstrap.servers": g.plain("kafka"), "security.protocol": "SASL_PLAINTEXT",
                 **sasl}  # fmt: skip
        got = await in_thread(lambda: _confluent_round_trip(plain, "plain-side", [b"plain"]))
        assert got == [b"plain"]
        assert await in_thread(lambda: _broker_ports(plain)) == {g.gateway.port("kafka")}
        assert "alice-secret" not in g.gateway.log()


def _kcat() -> str:
    found = shutil.which("kcat")
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("kcat is not installed; CI must run the kcat TLS test")
        pytest.skip("kcat is not installed")
    return found


async def test_kcat_over_ssl_with_a_client_certificate(tmp_path: Path) -> None:
    kcat = _kcat()
    async with tls_gateway(tmp_path) as g:
        cert, key = g.certs.client(ALICE)
        common = [kcat, "-b", g.tls["kafka"], "-X", "security.protocol=ssl",
                  "-X", f"ssl.ca.location={g.certs.ca_file}",
                  "-X", f"ssl.certificate.location={cert}", "-X", f"ssl.key.location={key}",
                  "-t", "kcat-tls"]  # fmt: skip

        def run() -> str:
            subprocess.run([*common, "-P"], input=b"one\ntwo\n", check=True, timeout=30)
            done = subprocess.run(
                [*common, "-C", "-o", "beginning", "-e", "-q"],
                check=True, timeout=30, capture_output=True,
            )  # fmt: skip
            return done.stdout.decode()

        assert (await in_thread(run)).split() == ["one", "two"]


async def test_kafka_python_over_ssl(tmp_path: Path) -> None:
    async with tls_gateway(tmp_path) as g:
        cert, key = g.certs.client(ALICE)

        def run() -> list[bytes]:
            from kafka import (  # type: ignore[import-untyped]
                KafkaConsumer,
                KafkaProducer,
                TopicPartition,
            )

            ssl = {"security_protocol": "SSL", "ssl_cafile": str(g.certs.ca_file),
                   "ssl_certfile": str(cert), "ssl_keyfile": str(key)}  # fmt: skip
            producer = KafkaProducer(bootstrap_servers=g.tls["kafka"], **ssl)
            for value in (b"a", b"b"):
                producer.send("kafka-python-tls", value).get(timeout=30)
            producer.close()
            consumer = KafkaConsumer(
                bootstrap_servers=g.tls["kafka"], consumer_timeout_ms=10_000, **ssl
            )
            tp = TopicPartition("kafka-python-tls", 0)
            consumer.assign([tp])
            consumer.seek(tp, 0)
            got = []
            for message in consumer:
                got.append(message.value)
                if len(got) == 2:
                    break
            consumer.close()
            return got

        assert await in_thread(run) == [b"a", b"b"]


async def test_aiokafka_over_ssl(tmp_path: Path) -> None:
    async with tls_gateway(tmp_path) as g:
        context = g.client_context(ALICE)

        async def run() -> list[bytes]:
            from aiokafka import AIOKafkaConsumer, AIOKafkaProducer  # type: ignore[import-untyped]
            from aiokafka.structs import TopicPartition  # type: ignore[import-untyped]

            kw = {"bootstrap_servers": g.tls["kafka"], "security_protocol": "SSL",
                  "ssl_context": context}  # fmt: skip
            producer = AIOKafkaProducer(**kw)
            await producer.start()
            try:
                for value in (b"x", b"y"):
                    await producer.send_and_wait("aiokafka-tls", value)
            finally:
                await producer.stop()
            consumer = AIOKafkaConsumer(**kw)
            await consumer.start()
            try:
                tp = TopicPartition("aiokafka-tls", 0)
                consumer.assign([tp])
                consumer.seek(tp, 0)
                got: list[bytes] = []
                while len(got) < 2:
                    batch = await consumer.getmany(tp, timeout_ms=1000)
                    got += [m.value for m in batch.get(tp, [])]
                return got
            finally:
                await consumer.stop()

        assert await in_asyncio(run) == [b"x", b"y"]


async def test_rstream_over_tls_with_a_required_client_certificate(tmp_path: Path) -> None:
    async with tls_gateway(tmp_path) as g:
        host, port = g.tls["rabbitmq_stream"].rsplit(":", 1)
        context = g.client_context(ALICE)

        async def run() -> list[bytes]:
            from rstream import (
                Consumer,
                ConsumerOffsetSpecification,
                MessageContext,
                OffsetType,
                Producer,
            )

            kw: dict[str, Any] = {"host": host, "port": int(port), "username": "guest",
                                  "password": "guest", "ssl_context": context}  # fmt: skip
            async with Producer(**kw) as producer:
                await producer.create_stream("rstream-tls", exists_ok=True)
                for value in (b"r1", b"r2"):
                    await producer.send_wait("rstream-tls", value)
            got: list[bytes] = []
            done = asyncio.Event()

            async def on_message(body: Any, context: MessageContext) -> None:
                got.append(bytes(body))
                if len(got) == 2:
                    done.set()

            async with Consumer(**kw) as consumer:
                await consumer.start()
                await consumer.subscribe(
                    "rstream-tls", on_message,
                    offset_specification=ConsumerOffsetSpecification(OffsetType.FIRST, None),
                )  # fmt: skip
                await asyncio.wait_for(done.wait(), 20)
            return got

        assert await in_asyncio(run) == [b"r1", b"r2"]


async def test_apache_iggy_over_tls(tmp_path: Path) -> None:
    async with tls_gateway(tmp_path) as g:

        async def run() -> list[bytes]:
            from apache_iggy import Consumer, IggyClient, PollingStrategy, SendMessage, TcpConfig

            client = IggyClient(
                TcpConfig(
                    server_address=g.tls["iggy"], tls_enabled=True, tls_domain="localhost",
                    tls_ca_file=str(g.certs.ca_file),
                )
            )  # fmt: skip
            await client.connect()
            await client.login_user("iggy", "iggy")
            await client.ping()
            await client.create_stream("tls")
            await client.create_topic("tls", "t", 1)
            await client.send_messages("tls", "t", 0, [SendMessage(b"i1"), SendMessage(b"i2")])
            polled = await client.poll_messages(
                "tls", "t", consumer=Consumer.Single("reader"),
                polling_strategy=PollingStrategy.First(), count=10, auto_commit=False,
                partition_id=0,
            )  # fmt: skip
            await client.ping()
            return [bytes(m.payload()) for m in polled]

        assert await in_asyncio(run) == [b"i1", b"i2"]
