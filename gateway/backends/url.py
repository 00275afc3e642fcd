"""Select and build the one backend from its URL (DESIGN.md §4): one row per scheme, each
backend parses its own URL in ``from_url``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

from gateway.backends.base import Backend, BackendSettings, BackendUrlError
from gateway.backends.embedded import EmbeddedBackend
from gateway.backends.embedded.link import SCHEME as EMBEDDED_LINK
from gateway.backends.embedded.link import EmbeddedLink
from gateway.backends.iggy import IggyBackend
from gateway.backends.kafka import KafkaBackend
from gateway.backends.rabbitmq_stream import RabbitStreamBackend

BackendFactory = Callable[[str, BackendSettings], Backend]

BACKENDS: Final[Mapping[str, BackendFactory]] = {
    "embedded": EmbeddedBackend.from_url,
    EMBEDDED_LINK: EmbeddedLink.from_url,  # a worker of --workers on the embedded store
    "rabbitmq-stream": RabbitStreamBackend.from_url,
    "rabbitmq-stream+tls": RabbitStreamBackend.from_url,  # RabbitMQ's scheme for TLS
    "kafka": KafkaBackend.from_url,
    "kafkas": KafkaBackend.from_url,  # TLS, as ?tls=1 on kafka://
    "iggy": IggyBackend.from_url,
}
SCHEMES: Final = tuple(BACKENDS)


def create_backend(url: str, settings: BackendSettings | None = None) -> Backend:
    scheme = url.partition(":")[0].lower()
    try:
        factory = BACKENDS[scheme]
    except KeyError:
        raise BackendUrlError(
            f"unknown backend URL scheme {scheme!r}; expected one of {SCHEMES}"
        ) from None
    return factory(url, settings or BackendSettings())


__all__ = ["BACKENDS", "SCHEMES", "BackendFactory", "BackendUrlError", "create_backend"]
