"""The Iggy backend over TLS (``iggy://...?tls=1&ca=...``) to a chained streamgate that serves
Iggy over TLS only (``listeners.iggy.tls``, trustme certificates): a front gateway on that URL
carries confluent-kafka's messages to the upstream and back; a CA that did not sign the
upstream's certificate, or a name the certificate does not carry, is refused with a clear error
naming the server and the reason (never the password); plaintext to the TLS port gets nowhere."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio
from confluent_kafka import Consumer, TopicPartition

from gateway.app import Running
from gateway.backends.iggy.backend import IggyBackend, parse_url
from gateway.model import BackendUnavailable
from tests.conftest import gateway_config
from tests.helpers.certs import Certs, make_certs, other_ca_file
from tests.helpers.iggy_upstream import serving
from tests.helpers.kafka_roundtrip import produce as produce_to
from tests.helpers.kafka_roundtrip import take

pytestmark = pytest.mark.slow

SECRET = "iggy-tls-S3cret"
COUNT = 5
LIMIT_S = 60


@pytest.fixture
def certs(tmp_path: Path) -> Certs:
    return make_certs(tmp_path / "certs")


@pytest.fixture
async def tls_upstream(tmp_path: Path, certs: Certs) -> AsyncIterator[tuple[str, int]]:
    """A streamgate (embedded) serving only Iggy, over TLS only (root user iggy/iggy); its
    address."""
    config = gateway_config(
        tmp_path / "upstream",
        **{
            "listeners.kafka.enabled": False,
            "listeners.rog.enabled": False,
            "listeners.rabbitmq_stream.enabled": False,
            "admin.enabled": False,
            "listeners.iggy.tls.enabled": True,
            "listeners.iggy.tls.cert_file": str(certs.cert_file),
            "listeners.iggy.tls.key_file": str(certs.key_file),
        },
    )
    async with serving(config) as running:
        yield running.address("iggy", tls=True)


def url(address: tuple[str, int], ca: Path, extra: str = "") -> str:
    host, port = address
    return f"iggy://iggy:iggy@{host}:{port}?tls=1&ca={ca}{extra}"


def produce(servers: str, values: list[bytes]) -> None:
    produce_to(servers, "secure", values)


def consume(servers: str, count: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": servers, "group.id": "unused",
                         "enable.auto.commit": False})  # fmt: skip
    consumer.assign([TopicPartition("secure", 0, 0)])
    return take(consumer, count)


async def in_thread(fn: object, limit_s: float = 40) -> object:
    with trio.fail_after(limit_s):
        return await trio.to_thread.run_sync(fn, abandon_on_cancel=True)  # type: ignore[arg-type]


async def test_front_gateway_on_tls_iggy_upstream(
    tls_upstream: tuple[str, int], certs: Certs, tmp_path: Path
) -> None:
    config = gateway_config(tmp_path / "front", **{"backend.url": url(tls_upstream, certs.ca_file)})
    with trio.fail_after(LIMIT_S):
        async with serving(config) as front:
            assert isinstance(front.backend, IggyBackend)
            assert front.backend.target.tls is not None
            await _wait_up(front)
            host, port = front.address("kafka")
            servers = f"{host}:{port}"
            sent = [b"to iggy over TLS %d" % i for i in range(COUNT)]
            await in_thread(lambda: produce(servers, sent))
            assert await in_thread(lambda: consume(servers, COUNT)) == sent

        # The messages are on the upstream: a second front gateway, verifying the name
        # "localhost" (the certificate carries it), reads them back.
        config = gateway_config(
            tmp_path / "front2",
            **{"backend.url": url(tls_upstream, certs.ca_file, "&server_name=localhost")},
        )
        async with serving(config) as front:
            await _wait_up(front)
            host, port = front.address("kafka")
            assert await in_thread(lambda: consume(f"{host}:{port}", COUNT)) == sent


async def _wait_up(front: Running) -> None:
    backend = front.backend
    assert isinstance(backend, IggyBackend)
    while True:
        try:
            await backend.ping()
            return
        except BackendUnavailable:
            await trio.sleep(0.05)


async def _refusal(target_url: str) -> str:
    backend = IggyBackend(parse_url(target_url), connect_timeout_s=3)
    with trio.fail_after(LIMIT_S):
        async with trio.open_nursery() as nursery:
            await nursery.start(backend.run)
            with pytest.raises(BackendUnavailable) as caught:
                await backend.ping()
            nursery.cancel_scope.cancel()
    return caught.value.message


async def test_wrong_ca_or_name_is_refused(
    tls_upstream: tuple[str, int], certs: Certs, tmp_path: Path
) -> None:
    host, port = tls_upstream
    address = f"{host}:{port}"
    wrong_ca = url(tls_upstream, other_ca_file(tmp_path / "other")).replace(
        "iggy:iggy@", f"iggy:{SECRET}@"
    )
    message = await _refusal(wrong_ca)
    assert f"iggy server {address} is unavailable" in message
    assert f"TLS handshake with {address} failed: certificate verify failed" in message
    assert SECRET not in message

    message = await _refusal(url(tls_upstream, certs.ca_file, "&server_name=iggy.example"))
    assert "Hostname mismatch" in message and "'iggy.example'" in message

    # A plaintext client on the TLS port: the server waits for a ClientHello, never logs in.
    plain = f"iggy://iggy:iggy@{address}"
    message = await _refusal(plain)
    assert f"iggy server {address} is unavailable" in message
    assert "dropped the login" in message
