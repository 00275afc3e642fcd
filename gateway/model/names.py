"""Canonical names: a topic lives in a stream (namespace); partitions are 0..n-1."""

from __future__ import annotations

from dataclasses import dataclass

from .errors import InvalidRequest

DEFAULT_STREAM = "default"
MAX_NAME_LENGTH = 255  # the tightest protocol limit (Rog/Iggy u8 lengths, RabbitMQ shortstr)
# Streams, topics and groups the gateways keep for themselves on a shared backend (catalogs,
# coordination logs, Iggy group definitions, single-active-consumer groups): never listed to a
# client, never reachable by one.
INTERNAL_PREFIX = "__streamgate"


def is_internal(name: str) -> bool:
    return name.startswith(INTERNAL_PREFIX)


def check_name(kind: str, name: str) -> str:
    """Names are opaque text; the backends must never use them as paths unescaped."""
    if not name:
        raise InvalidRequest(f"{kind} name must not be empty")
    if len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_LENGTH:
        raise InvalidRequest(f"{kind} name longer than {MAX_NAME_LENGTH} bytes")
    if "\x00" in name:
        raise InvalidRequest(f"{kind} name must not contain NUL")
    return name


@dataclass(frozen=True, slots=True)
class Topic:
    stream: str
    name: str

    def __str__(self) -> str:
        return f"{self.stream}/{self.name}"
