"""TLS to the backend (gateway/backends/tls.py): the URL forms and options of every networked
backend, errors that never show a password, and the handshake against a TLS server in the test
(trustme certificates): verified by default, refused with a clear reason on a wrong CA or name,
a client certificate presented for mTLS, ``verify=0`` only as a logged opt-out."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import structlog
import trio

from gateway.backends.base import BackendUrlError
from gateway.backends.iggy.backend import parse_url as iggy_url
from gateway.backends.kafka.cluster import parse_url as kafka_url
from gateway.backends.rabbitmq_stream.backend import parse_url as rabbitmq_url
from gateway.backends.tls import TlsClient, tls_client
from gateway.backends.url import create_backend
from gateway.model import BackendUnavailable
from tests.helpers.certs import Certs, make_certs, other_ca_file
from tests.helpers.tls_proxy import TlsProxy, tls_proxy

SECRET = "s3cr3t-pw"
LIMIT_S = 10


@pytest.fixture
def certs(tmp_path: Path) -> Certs:
    return make_certs(tmp_path / "certs")


# --- URLs ------------------------------------------------------------------------------------


def test_schemes_and_options_turn_tls_on(certs: Certs) -> None:
    ca = certs.ca_file
    s = rabbitmq_url(f"rabbitmq-stream+tls://u:{SECRET}@broker/%2F?ca={ca}")
    assert (s.port, s.vhost, s.password) == (5551, "/", SECRET)  # RabbitMQ's TLS port
    assert s.tls is not None and s.tls.server_name is None
    assert s.tls.context.verify_mode == ssl.CERT_REQUIRED and s.tls.context.check_hostname
    assert s.tls.context.minimum_version == ssl.TLSVersion.TLSv1_2
    s = rabbitmq_url(f"rabbitmq-stream://u:p@broker:5553/%2F?tls=1&ca={ca}&server_name=rmq.lan")
    assert s.port == 5553 and s.tls is not None and s.tls.server_name == "rmq.lan"
    assert rabbitmq_url("rabbitmq-stream://u:p@broker/%2F").tls is None

    servers, options = kafka_url(f"kafkas://b1:9093,b2:9093?ca={ca}")
    assert servers == [("b1", 9093), ("b2", 9093)] and options.tls is not None
    _, options = kafka_url(f"kafka://b1:9092?tls=1&ca={ca}&broker=tansu")
    assert options.tls is not None and options.tansu
    assert kafka_url("kafka://b1:9092")[1].tls is None

    target = iggy_url(f"iggy://u:{SECRET}@h:8090?tls=1&ca={ca}")
    assert (target.username, target.password) == ("u", SECRET) and target.tls is not None
    token = iggy_url(f"iggy://{SECRET}@h?tls=true&ca={ca}")
    assert token.token == SECRET and token.tls is not None
    assert iggy_url("iggy://u:p@h").tls is None

    # The schemes are registered: the gateway and the client commands accept them.
    assert create_backend(f"kafkas://127.0.0.1:9093?ca={ca}").name == "kafka"
    assert create_backend(f"rabbitmq-stream+tls://g:g@127.0.0.1/%2F?ca={ca}").name == (
        "rabbitmq_stream"
    )


def test_client_certificate_loaded(certs: Certs) -> None:
    cert, key = certs.client("gw")
    s = rabbitmq_url(f"rabbitmq-stream+tls://u:p@h/%2F?ca={certs.ca_file}&cert={cert}&key={key}")
    assert s.tls is not None


@pytest.mark.parametrize(
    ("url", "says"),
    [
        (f"rabbitmq-stream://u:{SECRET}@h/%2F?ca=/x.pem", "needs TLS"),
        (f"rabbitmq-stream+tls://u:{SECRET}@h/%2F?verify=maybe", "verify must be 1 or 0"),
        (f"rabbitmq-stream+tls://u:{SECRET}@h/%2F?ca=/nonexistent/ca.pem", "not found"),
        (f"rabbitmq-stream+tls://u:{SECRET}@h/%2F?key=/k.pem", "key needs cert"),
        (f"rabbitmq-stream://u:{SECRET}@h/%2F?heartbeat=x", "must be integers"),
        (f"rabbitmq-stream://u:{SECRET}@h/%2F?colour=red", "unknown"),
        (f"rabbitmq-stream://u:{SECRET}@h:port/%2F", "expected"),
        (f"amqp://u:{SECRET}@h/%2F", "expected"),
        (f"iggy://u:{SECRET}@h:99999", "bad port"),
        (f"iggy://u:{SECRET}@h?server_name=x", "needs TLS"),
        (f"iggy://u:{SECRET}@h?tls=1&colour=red", "unknown"),
        (f"iggy://{SECRET}@h?tls=2", "tls must be 1 or 0"),
        (f"iggy://u:{SECRET}@:1", "expected"),
        (f"kafka://u:{SECRET}@h:9092?sasl=GSSAPI", "one of PLAIN"),
        (f"kafka://u:{SECRET}@h:port", "is not host:port"),
        (f"kafka://h:9092?sasl_password={SECRET}", "unknown"),
        (f"kafka://h:9092?{SECRET}", "name=value"),
        (f"kafkas://h:9092?ca=/nonexistent/ca.pem&x={SECRET}", "unknown"),
        ("kafkas://h:9092?ca=/nonexistent/ca.pem", "not found"),
    ],
)
def test_bad_urls_are_refused_without_the_secret(url: str, says: str) -> None:
    parsers = {"rabbitmq-stream": rabbitmq_url, "iggy": iggy_url, "kafka": kafka_url}
    scheme = url.partition(":")[0]
    parse = parsers.get(scheme.removesuffix("+tls").removesuffix("s"), rabbitmq_url)
    with pytest.raises(BackendUrlError) as caught:
        parse(url)
    message = str(caught.value)
    assert says in message
    assert SECRET not in message


def test_a_cert_file_that_is_no_certificate_is_refused(certs: Certs, tmp_path: Path) -> None:
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    with pytest.raises(BackendUrlError, match="cannot be used"):
        tls_client({"ca": str(junk)}, tls=True, what="kafka")
    with pytest.raises(BackendUrlError, match="cannot be used"):
        tls_client({"cert": str(junk)}, tls=True, what="kafka")


def test_verify_off_is_an_explicit_logged_opt_out() -> None:
    with structlog.testing.capture_logs() as logs:
        tls = tls_client({"tls": "1", "verify": "0"}, tls=False, what="iggy")
    assert tls is not None
    assert tls.context.verify_mode == ssl.CERT_NONE and not tls.context.check_hostname
    warned = [e for e in logs if e["log_level"] == "warning"]
    assert len(warned) == 1 and "verify=0" in warned[0]["event"]
    assert warned[0]["backend"] == "iggy"
    with structlog.testing.capture_logs() as logs:
        tls_client({"tls": "1"}, tls=False, what="iggy")
    assert logs == []


# --- the handshake ---------------------------------------------------------------------------


@asynccontextmanager
async def echo_behind_tls(certs: Certs, *, client_ca: bool = False) -> AsyncIterator[TlsProxy]:
    """A TLS proxy in front of a plaintext echo server: what goes in comes back."""

    async def echo(stream: trio.SocketStream) -> None:
        async with stream:
            while data := await stream.receive_some(1024):
                await stream.send_all(data)

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(trio.serve_tcp, echo, 0)
        port = listeners[0].socket.getsockname()[1]
        async with tls_proxy(certs, ("127.0.0.1", port), client_ca=client_ca) as proxy:
            yield proxy
        nursery.cancel_scope.cancel()


async def _echo_through(tls: TlsClient, proxy: TlsProxy, host: str = "127.0.0.1") -> bytes:
    tcp = await trio.open_tcp_stream("127.0.0.1", proxy.port)
    try:
        stream = await tls.wrap(tcp, host, proxy.port)
        await stream.send_all(b"ping")
        got = b""
        while len(got) < 4:
            got += await stream.receive_some(4)
        return got
    finally:
        await trio.aclose_forcefully(tcp)


def _tls(**options: str) -> TlsClient:
    tls = tls_client(options, tls=True, what="test")
    assert tls is not None
    return tls


async def test_verified_handshake_carries_data(certs: Certs) -> None:
    with trio.fail_after(LIMIT_S):
        async with echo_behind_tls(certs) as proxy:
            assert await _echo_through(_tls(ca=str(certs.ca_file)), proxy) == b"ping"
            # The certificate names localhost too: verified against that name.
            tls = _tls(ca=str(certs.ca_file), server_name="localhost")
            assert await _echo_through(tls, proxy) == b"ping"
            assert proxy.accepted == 2


async def test_wrong_ca_is_refused_with_the_reason(certs: Certs, tmp_path: Path) -> None:
    with trio.fail_after(LIMIT_S):
        async with echo_behind_tls(certs) as proxy:
            tls = _tls(ca=str(other_ca_file(tmp_path / "other")))
            with pytest.raises(BackendUnavailable) as caught:
                await _echo_through(tls, proxy)
            message = caught.value.message
            assert f"TLS handshake with 127.0.0.1:{proxy.port} failed" in message
            assert "certificate verify failed" in message
            assert "unable to get local issuer certificate" in message
            # The system store does not know the test CA either.
            with pytest.raises(BackendUnavailable, match="certificate verify failed"):
                await _echo_through(_tls(), proxy)
            # verify=0: the explicit opt-out connects anyway.
            assert await _echo_through(_tls(verify="0"), proxy) == b"ping"


async def test_wrong_server_name_is_refused(certs: Certs) -> None:
    with trio.fail_after(LIMIT_S):
        async with echo_behind_tls(certs) as proxy:
            tls = _tls(ca=str(certs.ca_file), server_name="broker.example")
            with pytest.raises(BackendUnavailable) as caught:
                await _echo_through(tls, proxy)
            assert "Hostname mismatch" in caught.value.message
            assert "'broker.example'" in caught.value.message


async def test_client_certificate_is_presented(certs: Certs) -> None:
    cert, key = certs.client("gateway-7")
    with trio.fail_after(LIMIT_S):
        async with echo_behind_tls(certs, client_ca=True) as proxy:
            tls = _tls(ca=str(certs.ca_file), cert=str(cert), key=str(key))
            assert await _echo_through(tls, proxy) == b"ping"
            subject = proxy.peer_certs[-1]["subject"]
            assert (("commonName", "gateway-7"),) in subject  # type: ignore[operator]


async def test_plaintext_server_is_a_clear_failure(certs: Certs) -> None:
    """A TLS URL on a plaintext port: the server's bytes are no TLS record."""

    async def talker(stream: trio.SocketStream) -> None:
        async with stream:
            await stream.send_all(b"HTTP/1.0 400 nope\r\n\r\n" * 4)

    with trio.fail_after(LIMIT_S):
        async with trio.open_nursery() as nursery:
            listeners = await nursery.start(trio.serve_tcp, talker, 0)
            port = listeners[0].socket.getsockname()[1]
            tcp = await trio.open_tcp_stream("127.0.0.1", port)
            with pytest.raises(BackendUnavailable, match=f"TLS handshake with 127.0.0.1:{port}"):
                await _tls(ca=str(certs.ca_file)).wrap(tcp, "127.0.0.1", port)
            await trio.aclose_forcefully(tcp)
            nursery.cancel_scope.cancel()
