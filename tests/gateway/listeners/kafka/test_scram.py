"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512 (and PLAIN beside them) on a real ``streamgate run``
with ``listeners.kafka.sasl=true``: confluent-kafka, kafka-python, aiokafka and kcat log in and
move messages; a wrong password, malformed SCRAM messages and a replayed client-final message are
refused with SASL_AUTHENTICATION_FAILED and a closed connection. No password is on the command
line of anything started here (they come from files), and none reaches the gateway's log."""

from __future__ import annotations

import asyncio
import base64
import subprocess
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer  # type: ignore[import-untyped]
from confluent_kafka import KafkaError, KafkaException, Producer
from kafka import KafkaConsumer, KafkaProducer  # type: ignore[import-untyped]

from protocols._wire.scram import ScramClient
from tests.helpers.gateways import Gateway, running_gateway
from tests.helpers.kafka_raw import RawKafka
from tests.helpers.kafka_roundtrip import kcat_path, produce_and_take

from .conftest import in_thread

PASSWORDS = {"alice": "alice-Scram-pw-1", "bob": "bob-Plain-pw-2"}
ROOT_PASSWORD = "root-pw-from-a-file"
SECRETS = (*PASSWORDS.values(), ROOT_PASSWORD)
N = 5


@pytest.fixture
async def gateway(tmp_path: Path) -> AsyncIterator[Gateway]:
    users = tmp_path / "users.secret"
    users.write_text("".join(f"{name}:{pw}\n" for name, pw in PASSWORDS.items()))
    root = tmp_path / "root.secret"
    root.write_text(ROOT_PASSWORD + "\n")
    argv = ("--set", "listeners.kafka.sasl=true",
            "--set", f"auth.users_password_file={users}",
            "--set", f"auth.root_password_file={root}")  # fmt: skip
    assert not any(secret in arg for arg in argv for secret in SECRETS)
    async with running_gateway("embedded:./data", tmp_path, "scram", *argv) as gw:
        yield gw
    log = gw.log_path.read_text(errors="replace")
    leaked = [s for s in SECRETS if s in log]
    assert not leaked, "a password reached the gateway's log"


def _confluent(mechanism: str, user: str, password: str) -> dict[str, Any]:
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": mechanism,
            "sasl.username": user, "sasl.password": password}  # fmt: skip


def _confluent_round_trip(servers: str, topic: str, creds: dict[str, Any]) -> list[bytes]:
    return produce_and_take(servers, topic, N, creds)


@pytest.mark.parametrize(
    ("mechanism", "user"),
    [("SCRAM-SHA-256", "alice"), ("SCRAM-SHA-512", "alice"), ("PLAIN", "bob"),
     ("SCRAM-SHA-512", "iggy")],
)  # fmt: skip
async def test_confluent_kafka(gateway: Gateway, mechanism: str, user: str) -> None:
    password = ROOT_PASSWORD if user == "iggy" else PASSWORDS[user]
    creds = _confluent(mechanism, user, password)
    topic = f"t-{mechanism.lower()}-{user}"
    got = await in_thread(lambda: _confluent_round_trip(gateway.kafka, topic, creds))
    assert got == [b"v%d" % i for i in range(N)]


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
async def test_confluent_kafka_wrong_password_is_refused(gateway: Gateway, mechanism: str) -> None:
    errors: list[KafkaError] = []

    def work() -> None:
        p = Producer({"bootstrap.servers": gateway.kafka, "error_cb": errors.append,
                      **_confluent(mechanism, "alice", "not-her-password")})  # fmt: skip
        with pytest.raises(KafkaException):
            p.list_topics(timeout=5)
        p.poll(1)  # serves error_cb

    await in_thread(work)
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors


async def test_kafka_python_scram_sha_256(gateway: Gateway) -> None:
    creds = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-256",
             "sasl_plain_username": "alice", "sasl_plain_password": PASSWORDS["alice"]}  # fmt: skip

    def work() -> Any:
        p = KafkaProducer(bootstrap_servers=gateway.kafka, **creds)
        p.send("kp-scram", b"hello").get(timeout=20)
        p.close()
        c = KafkaConsumer(
            "kp-scram", bootstrap_servers=gateway.kafka, auto_offset_reset="earliest",
            consumer_timeout_ms=10_000, **creds,
        )  # fmt: skip
        try:
            return next(c).value
        finally:
            c.close()

    assert await in_thread(work) == b"hello"


async def test_aiokafka_scram_sha_512(gateway: Gateway) -> None:
    creds = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-512",
             "sasl_plain_username": "alice", "sasl_plain_password": PASSWORDS["alice"]}  # fmt: skip

    async def main() -> list[bytes]:
        p = AIOKafkaProducer(bootstrap_servers=gateway.kafka, **creds)
        await p.start()
        try:
            for i in range(N):
                await p.send_and_wait("aio-scram", b"a%d" % i)
        finally:
            await p.stop()
        c = AIOKafkaConsumer("aio-scram", bootstrap_servers=gateway.kafka,
                             auto_offset_reset="earliest", **creds)  # fmt: skip
        await c.start()
        try:
            got: list[bytes] = []
            while len(got) < N:
                batch = await c.getmany(timeout_ms=10_000)
                got += [r.value for records in batch.values() for r in records]
            return got
        finally:
            await c.stop()

    got = await in_thread(lambda: asyncio.run(asyncio.wait_for(main(), 50)))
    assert got == [b"a%d" % i for i in range(N)]


_kcat = kcat_path


async def _run_kcat(args: list[str], stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    assert not any(secret in arg for arg in args for secret in SECRETS)
    with trio.fail_after(40):
        return await trio.run_process(
            args, stdin=stdin, capture_stdout=True, capture_stderr=True, check=False
        )


async def test_kcat_scram_sha_512(gateway: Gateway, tmp_path: Path) -> None:
    kcat = _kcat()
    # The password in a librdkafka properties file (-F), not on kcat's command line.
    props = tmp_path / "kcat.properties"
    props.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanisms=SCRAM-SHA-512\n"
                     f"sasl.username=alice\nsasl.password={PASSWORDS['alice']}\n")  # fmt: skip
    base = [kcat, "-F", str(props), "-b", gateway.kafka, "-t", "kcat-scram"]
    produced = await _run_kcat([*base, "-P"], stdin=b"one\ntwo\nthree\n")
    assert produced.returncode == 0, produced.stderr.decode()
    consumed = await _run_kcat([*base, "-C", "-o", "beginning", "-e", "-f", "%s\n"])
    assert consumed.returncode == 0, consumed.stderr.decode()
    assert consumed.stdout.decode().split() == ["one", "two", "three"]
    props.write_text(props.read_text().replace(PASSWORDS["alice"], "wrong-password"))
    refused = await _run_kcat([*base, "-L", "-m", "5"])
    assert refused.returncode != 0
    assert "Authentication failed" in refused.stderr.decode() or "SASL" in refused.stderr.decode()


# -- a raw socket: malformed and replayed messages --------------------------------------------


async def _connect(gateway: Gateway) -> trio.SocketStream:
    return await trio.open_tcp_stream("127.0.0.1", gateway.port("kafka"))


async def _refused(raw: RawKafka, token: bytes) -> None:
    answer = await raw.authenticate(token)
    assert answer.error_code.value == 58  # SASL_AUTHENTICATION_FAILED
    assert answer.auth_bytes == b""
    assert await raw.closed()


MALFORMED_CLIENT_FIRST = [
    b"", b"garbage", b"p=tls-unique,,n=alice,r=abc", b"n,,n=alice", b"n,,n=al=ice,r=abc",
    b"n,,n=\xff\xfe,r=abc", b"n,,n=alice,r=abc,tokenauth=true",
]  # fmt: skip
BAD_CLIENT_FINAL = [
    b"", b"c=biws", b"c=biws,r=nonce,p=!!", b"c=eSws,r={nonce},p=" + base64.b64encode(bytes(32)),
    b"c=biws,r={nonce}XX,p=" + base64.b64encode(bytes(32)),
    b"c=biws,r={nonce},p=" + base64.b64encode(bytes(32)),
]  # fmt: skip


async def test_malformed_scram_messages_are_refused_and_closed(gateway: Gateway) -> None:
    for client_first in MALFORMED_CLIENT_FIRST:
        with trio.fail_after(10):
            async with await _connect(gateway) as stream:
                raw = RawKafka(stream)
                await raw.handshake("SCRAM-SHA-256")
                await _refused(raw, client_first)
    for client_final in BAD_CLIENT_FINAL:
        with trio.fail_after(10):
            async with await _connect(gateway) as stream:
                raw = RawKafka(stream)
                await raw.handshake("SCRAM-SHA-256")
                answer = await raw.authenticate(b"n,,n=alice,r=abcdef")
                assert answer.error_code.value == 0
                nonce = answer.auth_bytes.split(b",")[0].removeprefix(b"r=")
                assert nonce.startswith(b"abcdef") and len(nonce) > len(b"abcdef")
                await _refused(raw, client_final.replace(b"{nonce}", nonce))
    # The listener is still serving: a good login after all that.
    with trio.fail_after(10):
        async with await _connect(gateway) as stream:
            raw = RawKafka(stream)
            await raw.handshake("SCRAM-SHA-512")
            client = ScramClient("SCRAM-SHA-512", "bob", PASSWORDS["bob"], nonce="fine")
            answer = await raw.authenticate(client.client_first())
            answer = await raw.authenticate(client.client_final(answer.auth_bytes))
            assert answer.error_code.value == 0
            client.check_server_final(answer.auth_bytes)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
async def test_raw_exchange_then_a_replay_of_it_is_refused(
    gateway: Gateway, mechanism: str
) -> None:
    with trio.fail_after(20):
        async with await _connect(gateway) as stream:
            raw = RawKafka(stream)
            await raw.handshake(mechanism)
            client = ScramClient(mechanism, "alice", PASSWORDS["alice"], nonce=uuid.uuid4().hex)
            first = client.client_first()
            answer = await raw.authenticate(first)
            assert answer.error_code.value == 0
            final = client.client_final(answer.auth_bytes)
            answer = await raw.authenticate(final)
            assert answer.error_code.value == 0
            client.check_server_final(answer.auth_bytes)  # the gateway knows alice's keys
            metadata = await raw.ask(3, 5, {"topics": None})  # authenticated: answered
            assert metadata.brokers
        # An eavesdropper replays both messages on a new connection: the server nonce differs.
        async with await _connect(gateway) as stream:
            raw = RawKafka(stream)
            await raw.handshake(mechanism)
            assert (await raw.authenticate(first)).error_code.value == 0
            await _refused(raw, final)


async def test_raw_wrong_password_and_unknown_user(gateway: Gateway) -> None:
    for user, password in (("alice", "wrong"), ("nobody", PASSWORDS["alice"])):
        with trio.fail_after(20):
            async with await _connect(gateway) as stream:
                raw = RawKafka(stream)
                await raw.handshake("SCRAM-SHA-512")
                client = ScramClient("SCRAM-SHA-512", user, password, nonce="n0nce")
                answer = await raw.authenticate(client.client_first())
                assert answer.error_code.value == 0  # an unknown name is not revealed here
                answer = await raw.ask(
                    36, 1, {"auth_bytes": client.client_final(answer.auth_bytes)}
                )
                assert answer.error_code.value == 58
                assert password not in (answer.error_message or "")
                assert await raw.closed()
