"""SASL from the Kafka backend to its broker (``kafka://user@host:port?sasl=...``). The broker is
a real Kafka server that requires SASL: a ``streamgate run`` with ``listeners.kafka.sasl=true``
(Tansu has no SASL here), serving PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 from its user store. A
gateway on it as its Kafka backend serves confluent-kafka producing and consuming without SASL;
what it wrote is in the broker, read there by a SASL consumer; a wrong password makes the
backend unavailable with the broker's refusal, and the password shows nowhere."""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import trio
from confluent_kafka import Consumer

from gateway.backends.base import BackendUrlError
from gateway.backends.kafka.cluster import parse_url
from tests.helpers.gateways import Gateway, running_gateway
from tests.helpers.kafka_roundtrip import produce, take

LIMIT_S = 90
BROKER_PASSWORD = "broker-secret-9f2e"
COUNT = 5


async def in_thread(fn: object, limit_s: float = 40) -> object:
    with trio.fail_after(limit_s):
        return await trio.to_thread.run_sync(fn, abandon_on_cancel=True)  # type: ignore[arg-type]


def readyz(gw: Gateway) -> int:
    try:
        with urllib.request.urlopen(f"http://{gw.addresses['admin']}/readyz", timeout=5) as r:
            return int(r.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def consume(servers: str, topic: str, count: int, **sasl: str) -> list[bytes]:
    group = f"{'direct' if sasl else 'front'}-{topic}"  # the front's commits reach the broker
    consumer = Consumer({"bootstrap.servers": servers, "group.id": group,
                         "auto.offset.reset": "earliest", **sasl})  # fmt: skip
    consumer.subscribe([topic])
    return take(consumer, count)


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
async def test_a_gateway_logs_in_to_a_sasl_broker(tmp_path: Path, mechanism: str) -> None:
    (tmp_path / "broker.pw").write_text(BROKER_PASSWORD + "\n")
    (tmp_path / "wrong.pw").write_text("not-the-password\n")
    with trio.fail_after(LIMIT_S):
        async with running_gateway(
            "embedded:./broker-data", tmp_path, "broker",
            "--set", "listeners.kafka.sasl=true",
            "--set", f"auth.root_password_file={tmp_path / 'broker.pw'}",
        ) as broker:  # fmt: skip
            url = f"kafka://iggy@{broker.kafka}?sasl={mechanism}&password_file={tmp_path}/"
            async with running_gateway(url + "broker.pw", tmp_path, "front") as front:
                topic = f"via-{mechanism.lower()}"
                sent = [b"%s %d" % (mechanism.encode(), i) for i in range(COUNT)]
                await in_thread(lambda: produce(front.kafka, topic, sent))
                assert await in_thread(lambda: consume(front.kafka, topic, COUNT)) == sent
                # In the broker itself, read with SASL as the broker's own client would.
                sasl = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": mechanism,
                        "sasl.username": "iggy", "sasl.password": BROKER_PASSWORD}  # fmt: skip
                direct = await in_thread(lambda: consume(broker.kafka, topic, COUNT, **sasl))
                assert direct == sent
                assert await in_thread(lambda: readyz(front)) == 200
            # The password from the environment (no password_file): also how a Secret is given.
            env_url = f"kafka://iggy@{broker.kafka}?sasl={mechanism}"
            os.environ["STREAMGATE_BACKEND_PASSWORD"] = BROKER_PASSWORD
            try:
                async with running_gateway(env_url, tmp_path, "env") as from_env:
                    assert await in_thread(lambda: readyz(from_env)) == 200
            finally:
                del os.environ["STREAMGATE_BACKEND_PASSWORD"]
            # The wrong password: refused by the broker, said so, the backend unavailable.
            async with running_gateway(url + "wrong.pw", tmp_path, "wrong") as wrong:
                assert await in_thread(lambda: readyz(wrong)) == 503
                log = wrong.log()
                assert f"SASL {mechanism} login as 'iggy' refused" in log, log
                assert "not-the-password" not in log and BROKER_PASSWORD not in log


def test_sasl_url_options(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("STREAMGATE_BACKEND_PASSWORD", raising=False)
    _, options = parse_url("kafka://alice:p%40ss@h:9092?sasl=scram-sha-256")
    assert options.sasl is not None
    assert (options.sasl.mechanism, options.sasl.username) == ("SCRAM-SHA-256", "alice")
    assert options.sasl.password == "p@ss" and "p@ss" not in repr(options.sasl)
    monkeypatch.setenv("STREAMGATE_BACKEND_PASSWORD", "from-env")
    _, options = parse_url("kafka://bob@h:9092")
    assert options.sasl is not None and options.sasl.password == "from-env"
    assert options.sasl.mechanism == "PLAIN"  # unless told
    assert parse_url("kafka://h:9092")[1].sasl is None
    for bad, says in (
        ("kafka://h:9092?sasl=PLAIN", "needs a user"),
        ("kafka://bob@h:9092?sasl=GSSAPI", "one of PLAIN"),
        (f"kafka://bob@h:9092?password_file={tmp_path}/missing", "password_file"),
    ):
        with pytest.raises(BackendUrlError, match=says):
            parse_url(bad)
    monkeypatch.delenv("STREAMGATE_BACKEND_PASSWORD")
    with pytest.raises(BackendUrlError, match="no password"):
        parse_url("kafka://bob@h:9092")
