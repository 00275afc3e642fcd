"""The Kafka codecs in the shape tests/helpers/feeding.py drives (whole, byte by byte, split at
every byte): shared by the framing and the InitProducerId tests."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from protocols.kafka.framing import KafkaClientCodec, KafkaRequest, KafkaServerCodec
from tests.helpers.feeding import CodecFeed

SERVE_ALL: Mapping[int, tuple[int, int]] = {key: (0, 20) for key in range(100)}


class ServerFeed(CodecFeed):
    """KafkaServerCodec serving ``versions``."""

    def __init__(self, versions: Mapping[int, tuple[int, int]] = SERVE_ALL) -> None:
        codec = KafkaServerCodec(versions)
        super().__init__(codec, codec.next_request)


class ClientFeed(CodecFeed):
    """KafkaClientCodec that already sent ``requests`` (so it knows what answers to expect):
    decoded requests, or (body, correlation id) pairs."""

    def __init__(
        self, requests: Iterable[KafkaRequest | tuple[Any, int]], client_id: str | None = None
    ) -> None:
        codec = KafkaClientCodec(client_id)
        for req in requests:
            body, correlation_id = (
                (req.body, req.correlation_id) if isinstance(req, KafkaRequest) else req
            )
            codec.send(body, correlation_id=correlation_id)
        super().__init__(codec, codec.next_response)
