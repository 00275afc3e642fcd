"""The Kafka backend over TLS (``kafkas://``, ``kafka://...?tls=1``). Tansu has no TLS listener
here, so a TLS-terminating proxy in the test (tests/helpers/tls_proxy.py, trustme certificates)
stands in front of it, and Tansu advertises the proxy's address: every connection the backend
opens, bootstrap and the brokers Metadata names, goes through TLS. confluent-kafka produces and
consumes through a gateway on that backend; the client commands reach it too; a wrong CA is
refused with the broker's address and the reason."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import trio
from confluent_kafka import Consumer

from gateway.backends.kafka.backend import KafkaBackend
from tests.gateway.listeners.test_connection import start
from tests.helpers.certs import Certs, make_certs, other_ca_file
from tests.helpers.client_cli import cli
from tests.helpers.kafka_roundtrip import produce as produce_to
from tests.helpers.kafka_roundtrip import take
from tests.helpers.tansu import Tansu, running_tansu
from tests.helpers.tls_proxy import TlsProxy, tls_proxy

pytestmark = pytest.mark.slow

COUNT = 6
LIMIT_S = 60


@dataclass
class TlsTansu:
    certs: Certs
    proxy: TlsProxy
    tansu: Tansu

    def url(self, ca: Path, *, scheme: str = "kafkas", tls: str = "") -> str:
        return f"{scheme}://127.0.0.1:{self.proxy.port}?broker=tansu&ca={ca}{tls}"


@pytest.fixture
async def tls_tansu(tmp_path: Path) -> AsyncIterator[TlsTansu]:
    certs = make_certs(tmp_path / "certs")
    async with tls_proxy(certs) as proxy, running_tansu(tmp_path, advertised_port=proxy.port) as t:
        proxy.upstream = ("127.0.0.1", t.port)
        yield TlsTansu(certs, proxy, t)


async def in_thread(fn: object, limit_s: float = 40) -> object:
    with trio.fail_after(limit_s):
        return await trio.to_thread.run_sync(fn, abandon_on_cancel=True)  # type: ignore[arg-type]


def produce(servers: str, values: list[bytes]) -> None:
    produce_to(servers, "secure", values)


def consume(servers: str, count: int) -> list[bytes]:
    # A group member: the broker's coordinator, reached over TLS too. Tansu holds a new member's
    # JoinGroup for half its session timeout: 6 s keeps that to 3 s (test_end_to_end).
    consumer = Consumer({"bootstrap.servers": servers, "group.id": "tls-readers",
                         "auto.offset.reset": "earliest", "session.timeout.ms": 6000})  # fmt: skip
    consumer.subscribe(["secure"])
    return take(consumer, count)


async def test_gateway_on_kafka_over_tls(
    tls_tansu: TlsTansu, tmp_path: Path, nursery: trio.Nursery
) -> None:
    ca = tls_tansu.certs.ca_file
    with trio.fail_after(LIMIT_S):
        created = await cli("topics", "create", "secure", "--url", tls_tansu.url(ca))
        assert created.code == 0, created
        running = await start(nursery, tmp_path, **{"backend.url": tls_tansu.url(ca)})
        assert isinstance(running.backend, KafkaBackend)
        host, port = running.address("kafka")
        servers = f"{host}:{port}"
        sent = [b"over TLS %d" % i for i in range(COUNT)]
        await in_thread(lambda: produce(servers, sent))
        assert await in_thread(lambda: consume(servers, COUNT)) == sent
        # The client command on kafka://...?tls=1 reads what the gateway wrote.
        url = tls_tansu.url(ca, scheme="kafka", tls="&tls=1")
        read = await cli("consume", "secure", "--count", str(COUNT), "--url", url)
        assert read.code == 0, read
        assert read.lines == [v.decode() for v in sent]
    assert tls_tansu.proxy.accepted >= 3 and tls_tansu.proxy.refused == 0


async def test_wrong_ca_is_refused(tls_tansu: TlsTansu, tmp_path: Path) -> None:
    url = tls_tansu.url(other_ca_file(tmp_path / "other"))
    with trio.fail_after(LIMIT_S):
        ran = await cli("topics", "list", "--url", url, "--timeout", "3")
    assert ran.code != 0
    assert f"TLS handshake with 127.0.0.1:{tls_tansu.proxy.port} failed" in ran.err, ran
    assert "certificate verify failed for '127.0.0.1'" in ran.err, ran
    assert "Traceback" not in ran.err
    assert tls_tansu.proxy.refused >= 1 and tls_tansu.proxy.accepted == 0
