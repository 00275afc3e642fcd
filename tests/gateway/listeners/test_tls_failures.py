"""TLS failures, the admin port over TLS, and certificate rotation, against a real ``streamgate
run`` (tests/helpers/tls_gateway.py).

Every failed handshake (a client that trusts another CA, an expired client certificate, none
where one is required, plaintext on a TLS port, TLS on a plaintext port, a client that never
speaks) closes that connection, is counted in
``streamgate_connection_errors_total{reason="tls"}``, and the listener keeps serving others.
Rotation: new files and SIGHUP (or just new files: their mtimes are polled) give new
connections the new certificate while a connection opened before keeps working.
"""

from __future__ import annotations

import datetime
import functools
import os
import signal
import socket
import ssl
import struct
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest
import trio
from cryptography import x509

from gateway.tls import RELOAD_POLL_S
from tests.helpers.certs import other_ca_file
from tests.helpers.processes import send_signal
from tests.helpers.tls_gateway import ALICE, HANDSHAKE_TIMEOUT_S, TlsGateway, tls_gateway

T = TypeVar("T")
IO_TIMEOUT_S = 10.0


async def in_thread(fn: Callable[[], T], *, limit_s: float = 30) -> T:
    with trio.fail_after(limit_s):
        return await trio.to_thread.run_sync(fn, abandon_on_cancel=True)


def _address(text: str) -> tuple[str, int]:
    host, port = text.rsplit(":", 1)
    return host, int(port)


def _tls_connect(address: str, context: ssl.SSLContext) -> ssl.SSLSocket:
    raw = socket.create_connection(_address(address), timeout=IO_TIMEOUT_S)
    try:
        return context.wrap_socket(raw, server_hostname="127.0.0.1")
    except BaseException:
        raw.close()
        raise


def _api_versions(sock: socket.socket, correlation_id: int) -> int:
    """A Kafka ApiVersions v0 request (allowed before SASL); the answer's correlation id."""
    header = struct.pack(">hhih", 18, 0, correlation_id, -1)  # api key, version, corr, no id
    sock.sendall(struct.pack(">i", len(header)) + header)
    size = struct.unpack(">i", _exactly(sock, 4))[0]
    return int(struct.unpack(">i", _exactly(sock, size)[:4])[0])


def _exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError(f"closed after {len(data)} of {n} bytes")
        data += chunk
    return data


def _closed_by_server(sock: socket.socket) -> bool:
    """Whether the server ends the connection (EOF, a reset, or a TLS alert) within the bound."""
    try:
        return sock.recv(1024) == b""
    except (ssl.SSLError, ConnectionError):
        return True


def _refused(address: str, context: ssl.SSLContext) -> str:
    """Connect, handshake and read: what failed (the server closes the connection)."""
    try:
        sock = _tls_connect(address, context)
    except (ssl.SSLError, ConnectionError) as exc:
        return f"handshake: {exc}"
    with sock:
        try:
            sock.sendall(b"\0\0\0\0")
            data = sock.recv(1024)
        except (ssl.SSLError, ConnectionError) as exc:
            return f"after the handshake: {exc}"
    assert data == b"", f"the server answered {data!r}"
    return "closed"


def _serial(sock: ssl.SSLSocket) -> int:
    der = sock.getpeercert(binary_form=True)
    assert der is not None
    return int(x509.load_der_x509_certificate(der).serial_number)


async def _errors_reach(g: TlsGateway, expected: dict[str, float]) -> dict[str, float]:
    """The tls error counts once they reach ``expected`` (the server counts just after the
    client saw the close), or what they were after the bound."""
    with trio.move_on_after(10):
        while True:
            found = await in_thread(lambda: {p: g.tls_errors(p) for p in expected})
            if found == expected:
                return found
            await trio.sleep(0.1)
    return found


async def test_handshake_failures_are_counted_and_never_stall_the_listener(
    tmp_path: Path,
) -> None:
    async with tls_gateway(tmp_path) as g:
        before = {p: g.tls_errors(p) for p in ("kafka", "rabbitmq_stream", "iggy", "rog")}
        assert before == {"kafka": 0, "rabbitmq_stream": 0, "iggy": 0, "rog": 0}
        wrong_ca = ssl.create_default_context(cafile=str(other_ca_file(tmp_path / "other")))
        kafka_tls = g.tls["kafka"]
        # A client that trusts another CA refuses the server's certificate.
        with pytest.raises(ssl.SSLCertVerificationError):
            await in_thread(lambda: _tls_connect(kafka_tls, wrong_ca))
        # Plaintext (a Kafka ApiVersions) on the TLS port: closed, no answer.
        with socket.create_connection(_address(kafka_tls), timeout=IO_TIMEOUT_S) as plain:
            header = struct.pack(">hhih", 18, 0, 1, -1)
            plain.sendall(struct.pack(">i", len(header)) + header)
            assert await in_thread(lambda: _closed_by_server(plain))
        # TLS on plaintext ports (the Kafka listener's plaintext side, Rog): closed at once.
        for address in (g.plain("kafka"), g.plain("rog")):
            with pytest.raises((ssl.SSLError, ConnectionError)):
                await in_thread(functools.partial(_tls_connect, address, g.client_context()))
        # A certificate is required on the RabbitMQ Stream port: none, then an expired one.
        rabbit = g.tls["rabbitmq_stream"]
        await in_thread(lambda: _refused(rabbit, g.client_context()))
        cert = g.certs._ca.issue_cert(
            ALICE, common_name=ALICE,
            not_before=datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=10),
            not_after=datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=1),
        )  # fmt: skip
        expired = ssl.create_default_context(cafile=str(g.certs.ca_file))
        cert_file, key_file = tmp_path / "expired.pem", tmp_path / "expired.key"
        cert.cert_chain_pems[0].write_to_path(str(cert_file))
        cert.private_key_pem.write_to_path(str(key_file))
        expired.load_cert_chain(str(cert_file), str(key_file))
        await in_thread(lambda: _refused(rabbit, expired))
        # A client that never speaks holds nobody up: others are served meanwhile, and it is
        # closed when the handshake timeout ends.
        with socket.create_connection(_address(g.tls["iggy"]), timeout=IO_TIMEOUT_S) as silent:
            with _tls_connect(kafka_tls, g.client_context()) as working:
                assert await in_thread(lambda: _api_versions(working, 7)) == 7
            silent.settimeout(HANDSHAKE_TIMEOUT_S + IO_TIMEOUT_S)
            assert await in_thread(lambda: _closed_by_server(silent))
        expected = {"kafka": 3.0, "rabbitmq_stream": 2.0, "iggy": 1.0, "rog": 1.0}
        assert await _errors_reach(g, expected) == expected
        # Still serving TLS after all that, and no failure took the process down.
        with _tls_connect(kafka_tls, g.client_context(ALICE)) as again:
            assert await in_thread(lambda: _api_versions(again, 9)) == 9
        log = g.gateway.log()
        assert "tls handshake failed" in log
        assert "TLS ClientHello on a plaintext port" in log
        assert "BEGIN" not in log and "PRIVATE" not in log  # no key material in a log line


async def test_admin_port_over_tls_beside_plaintext(tmp_path: Path) -> None:
    async with tls_gateway(tmp_path) as g:

        def get(url: str, context: ssl.SSLContext | None = None) -> tuple[int, str]:
            with urllib.request.urlopen(url, context=context, timeout=IO_TIMEOUT_S) as response:
                return response.status, response.read().decode()

        status, body = await in_thread(
            lambda: get(f"https://{g.tls['admin']}/livez", g.client_context())
        )
        assert (status, body.strip()) == (200, "ok")
        plain = g.gateway.addresses["admin"].removeprefix("https://")
        assert plain != g.tls["admin"]
        assert (await in_thread(lambda: get(f"http://{plain}/livez")))[0] == 200
        assert 'reason="tls"' in g.metrics()
        wrong = ssl.create_default_context(cafile=str(other_ca_file(tmp_path / "other")))
        with pytest.raises(urllib.error.URLError):
            await in_thread(lambda: get(f"https://{g.tls['admin']}/livez", wrong))


def _replace_server_certificate(g: TlsGateway) -> int:
    """A new server certificate from the same CA written over the files (each replaced whole,
    as a deploy tool does); its serial."""
    leaf = g.certs._ca.issue_cert("127.0.0.1", "localhost")
    chain = b"".join(p.bytes() for p in leaf.cert_chain_pems)
    for path, pem in ((g.certs.key_file, leaf.private_key_pem.bytes()), (g.certs.cert_file, chain)):
        staged = path.with_suffix(".new")
        staged.write_bytes(pem)
        os.replace(staged, path)
    return int(x509.load_pem_x509_certificate(leaf.cert_chain_pems[0].bytes()).serial_number)


async def _new_connections_see(g: TlsGateway, serial: int, limit_s: float) -> None:
    seen = None
    with trio.move_on_after(limit_s):
        while True:
            with await in_thread(lambda: _tls_connect(g.tls["kafka"], g.client_context())) as s:
                seen = _serial(s)
            if seen == serial:
                return
            await trio.sleep(0.1)
    raise AssertionError(f"new connections still see serial {seen}, not {serial}")


async def test_certificate_rotation_keeps_open_connections(tmp_path: Path) -> None:
    async with tls_gateway(tmp_path) as g:
        old = await in_thread(lambda: _tls_connect(g.tls["kafka"], g.client_context()))
        with old:
            first = _serial(old)
            assert await in_thread(lambda: _api_versions(old, 1)) == 1
            # Rotation announced by SIGHUP.
            second = _replace_server_certificate(g)
            assert second != first
            send_signal(g.pid, signal.SIGHUP)
            await _new_connections_see(g, second, limit_s=10)
            assert await in_thread(lambda: _api_versions(old, 2)) == 2  # still the old session
            assert _serial(old) == first
            # Rotation noticed by the files' change alone.
            third = _replace_server_certificate(g)
            await _new_connections_see(g, third, limit_s=RELOAD_POLL_S * 3 + 5)
            assert await in_thread(lambda: _api_versions(old, 3)) == 3
        assert g.gateway.process.returncode is None  # SIGHUP did not end the gateway
        assert "tls certificates reloaded" in g.gateway.log()
