"""gateway/tls.py and the ``tls`` config sections: contexts, the client certificate's user, the
ClientHello sniff on plaintext ports, reloading, and ``serve_protocol`` over TLS in process."""

from __future__ import annotations

import ssl
import struct
from pathlib import Path

import pytest
import trio
from prometheus_client import CollectorRegistry

from gateway.app import Running
from gateway.config import ConfigError, load
from gateway.listeners.connection import Connection, Limits
from gateway.listeners.serve import ListenerInfo, serve_protocol
from gateway.metrics import Metrics
from gateway.tls import (
    ServerTls,
    TlsSettings,
    looks_like_client_hello,
    principal_of,
    server_context,
)
from tests.helpers.certs import Certs, make_certs


@pytest.fixture
def certs(tmp_path: Path) -> Certs:
    return make_certs(tmp_path / "certs")


def _settings(certs: Certs, **kw: str) -> TlsSettings:
    return TlsSettings(
        cert_file=str(certs.cert_file), key_file=str(certs.key_file),
        ca_file=str(certs.ca_file), **kw,  # type: ignore[arg-type]
    )  # fmt: skip


def test_principal_from_cn_or_san() -> None:
    cert = {
        "subject": ((("organizationName", "x"),), (("commonName", "alice"),)),
        "subjectAltName": (("IP Address", "127.0.0.1"), ("email", "a@example.org")),
    }
    assert principal_of(cert, "cn") == "alice"
    assert principal_of(cert, "san") == "a@example.org"
    assert principal_of({"subject": ()}, "cn") is None
    assert principal_of({}, "cn") is None
    assert principal_of(None, "san") is None


def _client_hello() -> bytes:
    client = ssl.create_default_context().wrap_bio(
        ssl.MemoryBIO(), out := ssl.MemoryBIO(), server_hostname="localhost"
    )
    with pytest.raises(ssl.SSLWantReadError):
        client.do_handshake()
    return out.read()


def test_client_hello_is_told_from_every_protocols_first_frame() -> None:
    assert looks_like_client_hello(_client_hello())
    kafka_api_versions = struct.pack(">ihhih", 10, 18, 3, 1, -1)
    rabbit_peer_properties = struct.pack(">iHHi", 8, 0x11, 1, 1)
    iggy_login = struct.pack("<II", 20, 38) + b"\x04iggy"
    rog_publish = b"\x01\x00\x03log"
    for first in (kafka_api_versions, rabbit_peer_properties, iggy_login, rog_publish, b""):
        assert not looks_like_client_hello(first)


def test_server_context_is_tls12_at_least_and_verifies_as_asked(certs: Certs) -> None:
    context = server_context(_settings(certs, client_auth="required"))
    assert context.minimum_version == ssl.TLSVersion.TLSv1_2
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert server_context(_settings(certs, client_auth="optional")).verify_mode == (
        ssl.CERT_OPTIONAL
    )
    assert server_context(_settings(certs)).verify_mode == ssl.CERT_NONE


def test_reload_keeps_the_old_context_until_the_files_load(certs: Certs) -> None:
    tls = ServerTls(_settings(certs), "kafka")
    first = tls.context
    assert not tls.reload()  # unchanged files: nothing to do
    certs.key_file.write_text("not a key\n")
    assert not tls.reload()
    assert tls.context is first
    fresh = make_certs(certs.directory / "again")
    certs.key_file.write_bytes(fresh.key_file.read_bytes())
    certs.cert_file.write_bytes(fresh.cert_file.read_bytes())
    assert tls.reload()
    assert tls.context is not first
    assert tls.reload(force=True)  # SIGHUP: re-read even when nothing changed


def test_config_sections_from_toml_env_and_flags(tmp_path: Path) -> None:
    toml = tmp_path / "g.toml"
    toml.write_text(
        '[listeners.kafka.tls]\nenabled = true\ncert_file = "c.pem"\nkey_file = "k.pem"\n'
        'port = 9093\n[admin.tls]\nenabled = true\ncert_file = "c"\nkey_file = "k"\n'
    )
    config = load(
        toml,
        environ={"STREAMGATE_LISTENERS_KAFKA_TLS_CLIENT_AUTH": "required",
                 "STREAMGATE_LISTENERS_KAFKA_TLS_CA_FILE": "ca.pem"},
        overrides={"listeners.kafka.tls.principal": "san"},
    )  # fmt: skip
    tls = config.listeners.kafka.tls
    assert (tls.enabled, tls.port, tls.client_auth, tls.ca_file, tls.principal) == (
        True, 9093, "required", "ca.pem", "san"
    )  # fmt: skip
    assert config.admin.tls.enabled and config.admin.tls.port == -1
    assert not config.listeners.rog.tls.enabled


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"listeners.iggy.tls.enabled": "true"}, "needs listeners.iggy.tls.cert_file"),
        ({"listeners.kafka.tls.client_auth": "maybe"}, "none, optional or required"),
        ({"admin.tls.principal": "uid"}, "cn or san"),
        ({"listeners.rog.tls.enabled": "true", "listeners.rog.tls.cert_file": "c",
          "listeners.rog.tls.key_file": "k", "listeners.rog.tls.client_auth": "required"},
         "needs listeners.rog.tls.ca_file"),
        ({"workers": "2", "listeners.kafka.tls.enabled": "true", "listeners.kafka.tls.port": "0",
          "listeners.kafka.tls.cert_file": "c", "listeners.kafka.tls.key_file": "k"},
         "fixed TLS port"),
        ({"listeners.kafka.tls.colour": "x"}, "unknown setting"),
    ],
)  # fmt: skip
def test_config_refuses(overrides: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load(overrides=overrides)


@pytest.mark.parametrize(("kind", "expected"), [("cn", "carol"), ("san", "carol")])
async def test_serve_protocol_over_tls_exposes_the_client_certificate_user(
    certs: Certs, kind: str, expected: str
) -> None:
    seen: list[tuple[bool, str | None, tuple[str, int] | None]] = []

    async def echo(conn: Connection) -> None:
        seen.append((conn.secure, conn.tls_principal, conn.local))
        while data := await conn.receive():
            await conn.send(data)

    tls = ServerTls(_settings(certs, client_auth="required", principal=kind), "rog")
    metrics = Metrics(CollectorRegistry())
    client = ssl.create_default_context(cafile=str(certs.ca_file))
    client.load_cert_chain(*(str(p) for p in certs.client(expected)))
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            info = await nursery.start(
                lambda task_status: serve_protocol(
                    "rog", echo, host="127.0.0.1", port=0, metrics=metrics, limits=Limits(),
                    tls=tls, task_status=task_status,
                )
            )  # fmt: skip
            assert info.tls
            stream = await trio.open_ssl_over_tcp_stream(
                "127.0.0.1", info.addresses[0][1], ssl_context=client
            )
            await stream.send_all(b"ping")
            assert await stream.receive_some(4) == b"ping"
            await stream.aclose()
            nursery.cancel_scope.cancel()
    assert seen == [(True, expected, info.addresses[0])]


def test_running_address_prefers_plaintext_and_finds_tls() -> None:
    both = Running(listeners=[ListenerInfo("kafka", (("h", 2),), tls=True),
                              ListenerInfo("kafka", (("h", 1),))])  # fmt: skip
    assert both.address("kafka") == ("h", 1)
    assert both.address("kafka", tls=True) == ("h", 2)
    only_tls = Running(listeners=[ListenerInfo("iggy", (("h", 3),), tls=True)])
    assert only_tls.address("iggy") == ("h", 3)
    with pytest.raises(KeyError):
        only_tls.address("iggy", tls=False)


async def test_many_small_records_arrive_whole_and_in_order(certs: Certs) -> None:
    """A client writing one TLS record per message (as librdkafka does): the connection hands
    the codec what is buffered in one piece, every byte once, in order."""
    received: list[bytes] = []
    messages = [b"%05d:" % i + bytes([i % 251]) * (i % 97) for i in range(500)]
    total = sum(map(len, messages))

    all_sent = trio.Event()

    async def collect(conn: Connection) -> None:
        # Every record is in the socket's buffers before the first read (about 30 kB: no
        # buffer fills up while nobody reads).
        await all_sent.wait()
        while sum(map(len, received)) < total and (data := await conn.receive()):
            received.append(data)
        await conn.send(b"done")

    tls = ServerTls(_settings(certs), "rog")
    client = ssl.create_default_context(cafile=str(certs.ca_file))
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            info = await nursery.start(
                lambda task_status: serve_protocol(
                    "rog", collect, host="127.0.0.1", port=0,
                    metrics=Metrics(CollectorRegistry()), limits=Limits(), tls=tls,
                    task_status=task_status,
                )
            )  # fmt: skip
            stream = await trio.open_ssl_over_tcp_stream(
                "127.0.0.1", info.addresses[0][1], ssl_context=client
            )
            for message in messages:
                await stream.send_all(message)  # a record each
            all_sent.set()
            assert await stream.receive_some(4) == b"done"
            await stream.aclose()
            nursery.cancel_scope.cancel()
    assert b"".join(received) == b"".join(messages)
    assert len(received) < len(messages)  # records were taken together
