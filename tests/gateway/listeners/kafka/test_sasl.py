"""SASL/PLAIN on a Kafka listener configured for it, with confluent-kafka and kafka-python."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from kafka import KafkaConsumer, KafkaProducer  # type: ignore[import-untyped]
from kio.index import load_request_schema

from gateway.app import Running
from protocols.kafka.build import build
from protocols.kafka.framing import KafkaClientCodec, KafkaResponse
from tests.conftest import gateway_config, start_gateway

from .conftest import bootstrap, in_thread


@pytest.fixture
async def sasl_gateway(tmp_path: Path, nursery: trio.Nursery) -> AsyncIterator[Running]:
    config = gateway_config(
        tmp_path / "data",
        **{"listeners.kafka.sasl": True, "auth.users": "alice:s3cret,bob:other"},
    )
    running = await start_gateway(nursery, config)
    yield running


def _sasl(password: str) -> dict[str, str]:
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN",
            "sasl.username": "alice", "sasl.password": password}  # fmt: skip


async def test_confluent_with_the_right_password(sasl_gateway: Running) -> None:
    servers = bootstrap(sasl_gateway)

    def work() -> list[bytes | None]:
        p = Producer({"bootstrap.servers": servers, **_sasl("s3cret")})
        for i in range(10):
            p.produce("secure", b"v%d" % i)
        assert p.flush(20) == 0
        c = Consumer({"bootstrap.servers": servers, "group.id": "g",
                      "auto.offset.reset": "earliest", **_sasl("s3cret")})  # fmt: skip
        c.subscribe(["secure"])
        got: list[bytes | None] = []
        try:
            while len(got) < 10:
                msg = c.poll(10)
                assert msg is not None and msg.error() is None
                got.append(msg.value())
        finally:
            c.close()
        return got

    assert await in_thread(work) == [b"v%d" % i for i in range(10)]


async def test_confluent_with_a_wrong_password_is_refused(sasl_gateway: Running) -> None:
    servers = bootstrap(sasl_gateway)
    errors: list[KafkaError] = []

    def work() -> None:
        p = Producer({"bootstrap.servers": servers, "error_cb": errors.append, **_sasl("nope")})
        with pytest.raises(KafkaException) as info:
            p.list_topics(timeout=5)
        assert info.value.args[0].code() in (KafkaError._TRANSPORT, KafkaError._TIMED_OUT)
        p.poll(1)  # serves error_cb

    await in_thread(work)
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors


async def test_kafka_python_plain(sasl_gateway: Running) -> None:
    servers = bootstrap(sasl_gateway)
    creds = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
             "sasl_plain_username": "bob"}  # fmt: skip

    def work() -> None:
        p = KafkaProducer(bootstrap_servers=servers, sasl_plain_password="other", **creds)
        p.send("kp-secure", b"hello").get(timeout=20)
        p.close()
        c = KafkaConsumer(
            "kp-secure", bootstrap_servers=servers, auto_offset_reset="earliest",
            consumer_timeout_ms=10_000, sasl_plain_password="other", **creds,
        )  # fmt: skip
        assert next(c).value == b"hello"
        c.close()

    await in_thread(work)


async def test_requests_before_authentication_close_the_connection(
    sasl_gateway: Running,
) -> None:
    host, port = sasl_gateway.address("kafka")
    codec = KafkaClientCodec("raw")
    _, frame = codec.send(build(load_request_schema(3, 5), {"topics": None}))
    with trio.fail_after(10):
        stream = await trio.open_tcp_stream(host, port)
        async with stream:
            await stream.send_all(frame)
            assert await stream.receive_some(1024) == b""  # closed, nothing answered


async def _exchange(stream: trio.SocketStream, codec: KafkaClientCodec, body: object) -> object:
    _, frame = codec.send(body)
    await stream.send_all(frame)
    while True:
        response = codec.next_response()
        if isinstance(response, KafkaResponse):
            return response.body
        data = await stream.receive_some(65536)
        assert data, "connection closed before the response"
        codec.receive_data(data)


async def test_wrong_password_gets_error_58_then_the_connection_closes(
    sasl_gateway: Running,
) -> None:
    host, port = sasl_gateway.address("kafka")
    codec = KafkaClientCodec("raw")
    with trio.fail_after(10):
        stream = await trio.open_tcp_stream(host, port)
        async with stream:
            hs = await _exchange(stream, codec, build(load_request_schema(17, 1),
                                                      {"mechanism": "SCRAM-SHA-1"}))  # fmt: skip
            mechanisms = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
            assert (hs.error_code.value, hs.mechanisms) == (33, mechanisms)  # type: ignore[attr-defined]
            hs = await _exchange(stream, codec, build(load_request_schema(17, 1),
                                                      {"mechanism": "PLAIN"}))  # fmt: skip
            assert hs.error_code.value == 0  # type: ignore[attr-defined]
            token = {"auth_bytes": b"\0alice\0wrong"}
            auth = await _exchange(stream, codec, build(load_request_schema(36, 1), token))
            assert auth.error_code.value == 58  # type: ignore[attr-defined]
            assert await stream.receive_some(1024) == b""


async def _handshake(stream: trio.SocketStream, codec: KafkaClientCodec) -> None:
    hs = await _exchange(stream, codec, build(load_request_schema(17, 1), {"mechanism": "PLAIN"}))
    assert hs.error_code.value == 0  # type: ignore[attr-defined]


async def test_a_malformed_token_gets_error_58_and_the_connection_stays(
    sasl_gateway: Running,
) -> None:
    host, port = sasl_gateway.address("kafka")
    codec = KafkaClientCodec("raw")
    with trio.fail_after(10):
        stream = await trio.open_tcp_stream(host, port)
        async with stream:
            await _handshake(stream, codec)
            for token in (b"alice\0s3cret", b"\0alice\0s3cret\0", b""):
                body = build(load_request_schema(36, 1), {"auth_bytes": token})
                auth = await _exchange(stream, codec, body)
                assert auth.error_code.value == 58  # type: ignore[attr-defined]
                assert auth.error_message == "malformed SASL/PLAIN token"  # type: ignore[attr-defined]
            body = build(load_request_schema(36, 1), {"auth_bytes": b"\0alice\0s3cret"})
            auth = await _exchange(stream, codec, body)
            assert auth.error_code.value == 0  # type: ignore[attr-defined]


@pytest.mark.parametrize("token", [b"\0al\xffice\0s3cret", b"\0alice\0s3cr\xffet"])
async def test_a_token_not_in_utf8_is_a_failed_login(sasl_gateway: Running, token: bytes) -> None:
    host, port = sasl_gateway.address("kafka")
    codec = KafkaClientCodec("raw")
    with trio.fail_after(10):
        stream = await trio.open_tcp_stream(host, port)
        async with stream:
            await _handshake(stream, codec)
            auth = await _exchange(stream, codec, build(load_request_schema(36, 1),
                                                        {"auth_bytes": token}))  # fmt: skip
            assert auth.error_code.value == 58  # type: ignore[attr-defined]
            message = "Authentication failed: invalid credentials"
            assert auth.error_message == message  # type: ignore[attr-defined]
            assert await stream.receive_some(1024) == b""
