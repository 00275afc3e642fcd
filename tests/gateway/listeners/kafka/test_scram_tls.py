"""SASL_SSL: SCRAM-SHA-512 and PLAIN over a TLS Kafka listener of a real ``streamgate run``
(``listeners.kafka.tls`` with trustme certificates, ``listeners.kafka.sasl=true``, users from
``auth.users_password_file``). confluent-kafka and kcat each produce and consume a round trip with
either mechanism; a wrong password is refused over TLS too. kcat gets its password in a librdkafka
properties file (``-F``), never on its command line; no password is in any argv started here, nor
in the gateway's log. Under CI=true a missing kcat fails the kcat tests instead of skipping them.
"""

from __future__ import annotations

import os
import secrets
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trio
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from tests.helpers.certs import Certs, make_certs
from tests.helpers.gateways import Gateway, running_gateway
from tests.helpers.kafka_roundtrip import kcat_path, round_trip

from .conftest import in_thread

pytestmark = pytest.mark.slow

MECHANISMS = ["SCRAM-SHA-512", "PLAIN"]
PASSWORDS = {
    "alice": f"alice-tls-{secrets.token_hex(8)}",
    "bob": f"bob-tls-{secrets.token_hex(8)}",
}
USER_OF = {"SCRAM-SHA-512": "alice", "PLAIN": "bob"}
WRONG = f"wrong-tls-{secrets.token_hex(8)}"
SECRETS = (*PASSWORDS.values(), WRONG)
KCAT_LIMIT_S = 40.0
N = 5


@dataclass(frozen=True)
class TlsSasl:
    gateway: Gateway
    certs: Certs

    @property
    def servers(self) -> str:
        return self.gateway.kafka  # the TLS port: TLS only on the Kafka listener's port


@pytest.fixture
async def gateway(tmp_path: Path) -> AsyncIterator[TlsSasl]:
    certs = make_certs(tmp_path / "certs")
    users = tmp_path / "users.secret"
    users.write_text("".join(f"{name}:{pw}\n" for name, pw in PASSWORDS.items()))
    sets = {
        "listeners.kafka.sasl": "true",
        "listeners.kafka.tls.enabled": "true",
        "listeners.kafka.tls.cert_file": str(certs.cert_file),
        "listeners.kafka.tls.key_file": str(certs.key_file),
        "listeners.kafka.tls.ca_file": str(certs.ca_file),
        "listeners.kafka.tls.client_auth": "optional",
        "auth.users_password_file": str(users),
    }
    argv = [arg for key, value in sets.items() for arg in ("--set", f"{key}={value}")]
    assert not [s for s in SECRETS if any(s in arg for arg in argv)]
    async with running_gateway("embedded:./data", tmp_path, "scram-tls", *argv) as gw:
        assert f"kafka listening on {gw.kafka} (tls)" in gw.log(), gw.log()
        yield TlsSasl(gw, certs)
    log = gw.log_path.read_text(errors="replace")
    assert not [s for s in SECRETS if s in log], "a password reached the gateway's log"


def _sasl_ssl(g: TlsSasl, mechanism: str, user: str, password: str) -> dict[str, Any]:
    return {"bootstrap.servers": g.servers, "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(g.certs.ca_file), "sasl.mechanisms": mechanism,
            "sasl.username": user, "sasl.password": password}  # fmt: skip


_round_trip = round_trip


@pytest.mark.parametrize("mechanism", MECHANISMS)
async def test_confluent_kafka_sasl_ssl_round_trip(gateway: TlsSasl, mechanism: str) -> None:
    user = USER_OF[mechanism]
    conf = _sasl_ssl(gateway, mechanism, user, PASSWORDS[user])
    values = [f"{mechanism}-{i}".encode() for i in range(N)]
    topic = f"ck-tls-{mechanism.lower()}"
    assert await in_thread(lambda: _round_trip(conf, topic, values)) == values
    assert f"user={user}" in gateway.gateway.log()


@pytest.mark.parametrize("mechanism", MECHANISMS)
async def test_confluent_kafka_sasl_ssl_wrong_password(gateway: TlsSasl, mechanism: str) -> None:
    errors: list[KafkaError] = []

    def work() -> None:
        conf = _sasl_ssl(gateway, mechanism, USER_OF[mechanism], WRONG)
        producer = Producer({**conf, "error_cb": errors.append, "reconnect.backoff.ms": 2000})
        with pytest.raises(KafkaException):
            producer.list_topics(timeout=5)
        producer.poll(1)  # serves error_cb

    await in_thread(work)
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors


# -- kcat ------------------------------------------------------------------------------------


_kcat = kcat_path


def _properties(path: Path, g: TlsSasl, mechanism: str, user: str, password: str) -> Path:
    """A librdkafka properties file for kcat's -F: the password lives here, not in argv."""
    path.write_text(
        "security.protocol=SASL_SSL\n"
        f"ssl.ca.location={g.certs.ca_file}\n"
        f"sasl.mechanisms={mechanism}\n"
        f"sasl.username={user}\n"
        f"sasl.password={password}\n"
    )
    path.chmod(0o600)
    return path


async def _run_kcat(
    argv: list[str], home: Path, stdin: bytes = b""
) -> subprocess.CompletedProcess[bytes]:
    """kcat to completion, killed (its own pid, by trio) and failed if it overruns."""
    assert not [s for s in SECRETS if any(s in arg for arg in argv)], "a password in argv"
    env = {**os.environ, "HOME": str(home)}  # no developer ~/.config/kcat.conf
    env.pop("KCAT_CONFIG", None)
    with trio.fail_after(KCAT_LIMIT_S):
        return await trio.run_process(
            argv, stdin=stdin, capture_stdout=True, capture_stderr=True, check=False, env=env
        )


@pytest.mark.parametrize("mechanism", MECHANISMS)
async def test_kcat_sasl_ssl_round_trip(gateway: TlsSasl, tmp_path: Path, mechanism: str) -> None:
    kcat = _kcat()
    user = USER_OF[mechanism]
    props = _properties(tmp_path / "kcat.properties", gateway, mechanism, user, PASSWORDS[user])
    topic = f"kcat-tls-{mechanism.lower()}"
    base = [kcat, "-F", str(props), "-b", gateway.servers, "-t", topic]
    lines = [f"{mechanism}-line-{i}" for i in range(N)]
    produced = await _run_kcat(
        [*base, "-P"], tmp_path, stdin="".join(f"{x}\n" for x in lines).encode()
    )
    assert produced.returncode == 0, produced.stderr.decode()
    consumed = await _run_kcat([*base, "-C", "-o", "beginning", "-e", "-q", "-f", "%s\n"], tmp_path)
    assert consumed.returncode == 0, consumed.stderr.decode()
    assert consumed.stdout.decode().split() == lines
    # What kcat produced is what confluent-kafka reads back with the other mechanism.
    other = "PLAIN" if mechanism == "SCRAM-SHA-512" else "SCRAM-SHA-512"
    conf = _sasl_ssl(gateway, other, USER_OF[other], PASSWORDS[USER_OF[other]])

    def read_back() -> list[bytes]:
        consumer = Consumer({**conf, "group.id": f"rb-{topic}", "enable.auto.commit": False})
        consumer.assign([TopicPartition(topic, 0, 0)])
        got: list[bytes] = []
        try:
            for _ in range(60):
                if len(got) >= N:
                    break
                message = consumer.poll(0.5)
                if message is not None:
                    assert message.error() is None, message.error()
                    got.append(message.value() or b"")
        finally:
            consumer.close()
        return got

    assert await in_thread(read_back) == [x.encode() for x in lines]


async def test_kcat_sasl_ssl_wrong_password_is_refused(gateway: TlsSasl, tmp_path: Path) -> None:
    kcat = _kcat()
    props = _properties(tmp_path / "wrong.properties", gateway, "SCRAM-SHA-512", "alice", WRONG)
    refused = await _run_kcat(
        [kcat, "-F", str(props), "-b", gateway.servers, "-L", "-m", "5"], tmp_path
    )
    err = refused.stderr.decode()
    assert refused.returncode != 0, err
    assert "Authentication failed" in err or "SASL" in err, err
    assert WRONG not in err
