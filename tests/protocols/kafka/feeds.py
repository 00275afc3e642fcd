"""The Kafka codecs in the shape tests/helpers/feeding.py drives (whole, byte by byte, split at
every byte): shared by the framing and the InitProducerId tests."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from protocols.kafka.framing import KafkaClientCodec, KafkaRequest, KafkaServerCodec

SERVE_ALL: Mapping[int, tuple[int, int]] = {key: (0, 20) for key in range(100)}


class ServerFeed:
    """KafkaServerCodec serving ``versions``."""

    def __init__(self, versions: Mapping[int, tuple[int, int]] = SERVE_ALL) -> None:
        self.codec = KafkaServerCodec(versions)

    def receive_data(self, data: bytes, /) -> None:
        self.codec.receive_data(data)

    def receive_eof(self) -> None:
        self.codec.receive_eof()

    def next_frame(self) -> object:
        return self.codec.next_request()

    @property
    def trailing_data(self) -> bytes:
        return self.codec.trailing_data


class ClientFeed:
    """KafkaClientCodec that already sent ``requests`` (so it knows what answers to expect):
    decoded requests, or (body, correlation id) pairs."""

    def __init__(
        self, requests: Iterable[KafkaRequest | tuple[Any, int]], client_id: str | None = None
    ) -> None:
        self.codec = KafkaClientCodec(client_id)
        for req in requests:
            body, correlation_id = (
                (req.body, req.correlation_id) if isinstance(req, KafkaRequest) else req
            )
            self.codec.send(body, correlation_id=correlation_id)

    def receive_data(self, data: bytes, /) -> None:
        self.codec.receive_data(data)

    def receive_eof(self) -> None:
        self.codec.receive_eof()

    def next_frame(self) -> object:
        return self.codec.next_response()

    @property
    def trailing_data(self) -> bytes:
        return self.codec.trailing_data
