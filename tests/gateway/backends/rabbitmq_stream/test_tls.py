"""The RabbitMQ backend over TLS, on a private RabbitMQ 3.10.8 node with its stream TLS listener
(tests/helpers/rabbitmq_server.py, ``tls=``; trustme certificates): a gateway on
``rabbitmq-stream+tls://`` (presenting a client certificate the node verifies) carries
confluent-kafka's messages to RabbitMQ and back, the ``streamgate`` client commands reach the
same broker over TLS, and a CA that did not sign the broker's certificate is refused with a
clear error that names the broker and the reason, never the password."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio
from confluent_kafka import Consumer as KafkaConsumer
from confluent_kafka import Producer as KafkaProducer

from gateway.backends.rabbitmq_stream.backend import RabbitStreamBackend, parse_url
from gateway.model import BackendUnavailable
from tests.helpers.certs import Certs, make_certs, other_ca_file
from tests.helpers.client_cli import cli
from tests.helpers.kafka_roundtrip import take
from tests.helpers.rabbitmq_server import (
    HOST,
    RabbitMQServer,
    require_rabbitmq,
    running_rabbitmq,
)

from .conftest import in_thread, streamgate

pytestmark = pytest.mark.slow

USER = "tls-user"
SECRET = "tls-s3cret-Pw"
COUNT = 5
LIMIT_S = 90


@pytest.fixture
async def certs(tmp_path: Path) -> Certs:
    return make_certs(tmp_path / "certs")


@pytest.fixture
async def tls_rabbitmq(tmp_path: Path, certs: Certs) -> AsyncIterator[RabbitMQServer]:
    """A private node with a stream TLS listener, and a user whose password the test greps for."""
    require_rabbitmq()
    async with running_rabbitmq(tmp_path / "rabbitmq", tls=certs) as server:
        await server.rabbitmqctl("add_user", USER, SECRET)
        await server.rabbitmqctl("set_permissions", "-p", "/", USER, ".*", ".*", ".*")
        yield server


def tls_url(server: RabbitMQServer, ca: Path, **extra: Path) -> str:
    options = "".join(f"&{k}={v}" for k, v in extra.items())
    return f"rabbitmq-stream+tls://{USER}:{SECRET}@{HOST}:{server.stream_tls_port}/%2F?ca={ca}{options}"


def produce(servers: str, topic: str, values: list[bytes]) -> None:
    producer = KafkaProducer({"bootstrap.servers": servers, "linger.ms": 5})
    failures: list[Any] = []

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            failures.append(err)

    for value in values:
        producer.produce(topic, value, on_delivery=delivered)
    assert producer.flush(30) == 0
    assert failures == []


def consume(servers: str, topic: str, count: int) -> list[bytes]:
    consumer = KafkaConsumer({"bootstrap.servers": servers, "group.id": "tls-readers",
                              "auto.offset.reset": "earliest"})  # fmt: skip
    consumer.subscribe([topic])
    return take(consumer, count)


async def test_gateway_on_tls_rabbitmq_produces_and_consumes(
    tls_rabbitmq: RabbitMQServer, certs: Certs, tmp_path: Path
) -> None:
    cert, key = certs.client("streamgate")
    url = tls_url(tls_rabbitmq, certs.ca_file, cert=cert, key=key)
    assert tls_rabbitmq.stream_tls_port != tls_rabbitmq.stream_port  # only TLS is spoken there
    client_url = tls_url(tls_rabbitmq, certs.ca_file)
    with trio.fail_after(LIMIT_S):
        created = await cli("topics", "create", "secure", "--url", client_url)
        assert created.code == 0, created
        async with streamgate(tmp_path, url) as running:
            backend = running.backend
            assert isinstance(backend, RabbitStreamBackend) and backend.settings.tls is not None
            host, port = running.address("kafka")
            servers = f"{host}:{port}"
            sent = [b"through TLS %d" % i for i in range(COUNT)]
            await in_thread(lambda: produce(servers, "secure", sent))

            # On the broker: what the gateway wrote, read back by the client command over TLS.
            direct = await cli("consume", "secure", "--count", str(COUNT), "--url", client_url)
            assert direct.code == 0, direct
            assert direct.lines == [v.decode() for v in sent]

            # The client command writes over TLS; confluent-kafka reads it all via the gateway.
            more = await cli("produce", "secure", "--url", client_url, stdin=b"from the cli\n")
            assert more.code == 0, more
            got = await in_thread(lambda: consume(servers, "secure", COUNT + 1))
            assert got == [*sent, b"from the cli"]


async def test_wrong_ca_is_refused_clearly(
    tls_rabbitmq: RabbitMQServer, certs: Certs, tmp_path: Path
) -> None:
    url = tls_url(tls_rabbitmq, other_ca_file(tmp_path / "other"))
    where = f"{HOST}:{tls_rabbitmq.stream_tls_port}"
    with trio.fail_after(LIMIT_S):
        backend = RabbitStreamBackend(parse_url(url), connect_wait_s=0.5)
        async with trio.open_nursery() as nursery:
            await nursery.start(backend.run)
            with pytest.raises(BackendUnavailable) as caught:
                await backend.wait_ready(limit_s=3)
            nursery.cancel_scope.cancel()
        message = caught.value.message
        assert f"TLS handshake with {where} failed" in message, message
        # RabbitMQ sends its CA in the chain: OpenSSL finds a self-signed CA it does not trust.
        assert "certificate verify failed for '127.0.0.1': self-signed certificate" in message
        assert SECRET not in message

        ran = await cli("topics", "list", "--url", url, "--timeout", "3")
        assert ran.code != 0
        assert "certificate verify failed" in ran.err, ran
        assert SECRET not in ran.out + ran.err
        assert "Traceback" not in ran.err

        # The right CA on the same port works: the refusal was the CA's.
        ok = await cli("topics", "list", "--url", tls_url(tls_rabbitmq, certs.ca_file))
        assert ok.code == 0, ok
