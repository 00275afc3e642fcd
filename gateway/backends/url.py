"""Select and build the one backend from its URL (DESIGN.md §4)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlsplit

from gateway.backends.base import Backend

SCHEMES = ("embedded", "rabbitmq-stream", "kafka", "iggy")


class BackendUrlError(ValueError):
    pass


def embedded_path(url: str) -> Path:
    """``embedded:./data``, ``embedded:/var/lib/x`` or ``embedded:///var/lib/x``."""
    rest = url.partition(":")[2]
    if rest.startswith("//"):
        rest = urlsplit(url).path
    rest = unquote(rest)
    if not rest:
        raise BackendUrlError("embedded backend URL needs a path, e.g. embedded:./data")
    return Path(rest)


def create_backend(
    url: str,
    *,
    fsync: str = "interval:1000",
    segment_bytes: int = 64 << 20,
    retention_ms: int | None = None,
    retention_bytes: int | None = None,
    max_message_bytes: int = 16 << 20,
) -> Backend:
    scheme = url.partition(":")[0].lower()
    if scheme == "embedded":
        from gateway.backends.embedded import EmbeddedBackend

        return EmbeddedBackend(
            embedded_path(url),
            fsync=fsync,
            segment_bytes=segment_bytes,
            retention_ms=retention_ms,
            retention_bytes=retention_bytes,
            max_message_bytes=max_message_bytes,
        )
    if scheme == "iggy":
        from gateway.backends.iggy import IggyBackend, IggyUrlError

        try:
            return IggyBackend.from_url(url, max_message_bytes=max_message_bytes)
        except IggyUrlError as exc:
            raise BackendUrlError(str(exc)) from None
    if scheme == "kafka":
        from gateway.backends.kafka import KafkaBackend

        return KafkaBackend(url, max_message_bytes=max_message_bytes)
    if scheme == "rabbitmq-stream":
        from gateway.backends.rabbitmq_stream import RabbitStreamBackend, RabbitUrlError
        from gateway.model import TopicConfig

        defaults = TopicConfig(retention_ms=retention_ms, retention_bytes=retention_bytes)
        try:
            return RabbitStreamBackend.from_url(
                url, defaults=defaults, max_message_bytes=max_message_bytes
            )
        except RabbitUrlError as exc:
            raise BackendUrlError(str(exc)) from None
    if scheme in SCHEMES:
        raise BackendUrlError(f"the {scheme} backend is not available in this version yet")
    raise BackendUrlError(f"unknown backend URL scheme {scheme!r}; expected one of {SCHEMES}")
