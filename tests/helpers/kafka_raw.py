"""A Kafka client by hand over one connection (the project's own client codec): for tests that
send what no client library sends, or read what a library hides (a SASL exchange step by step,
a top-level error code)."""

from __future__ import annotations

import os
from typing import Any

import trio
from kio.index import load_request_schema

from protocols._wire.scram import ScramClient
from protocols.kafka.build import build
from protocols.kafka.framing import KafkaClientCodec, KafkaResponse

__all__ = ["RawKafka"]

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36


class RawKafka:
    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.codec = KafkaClientCodec("raw")

    async def ask(self, api_key: int, version: int, values: dict[str, Any]) -> Any:
        """One request, built from ``values``; its response body."""
        correlation_id, frame = self.codec.send(
            build(load_request_schema(api_key, version), values)
        )
        await self.stream.send_all(frame)
        while True:
            response = self.codec.next_response()
            if isinstance(response, KafkaResponse):
                assert response.correlation_id == correlation_id
                return response.body
            data = await self.stream.receive_some(65536)
            assert data, "connection closed before the response"
            self.codec.receive_data(data)

    async def handshake(self, mechanism: str) -> None:
        answer = await self.ask(SASL_HANDSHAKE, 1, {"mechanism": mechanism})
        assert answer.error_code.value == 0
        assert {"SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"} <= set(answer.mechanisms)

    async def authenticate(self, token: bytes) -> Any:
        return await self.ask(SASL_AUTHENTICATE, 1, {"auth_bytes": token})

    async def login(self, user: str, password: str, mechanism: str = "SCRAM-SHA-512") -> None:
        """A whole SCRAM login, the server's signature checked."""
        await self.handshake(mechanism)
        client = ScramClient(mechanism, user, password, nonce=os.urandom(8).hex())
        first = await self.authenticate(client.client_first())
        final = await self.authenticate(client.client_final(first.auth_bytes))
        assert final.error_code.value == 0
        client.check_server_final(final.auth_bytes)

    async def closed(self) -> bool:
        return await self.stream.receive_some(1024) == b""
