"""A listening address that cannot be bound, said in one line that names who wanted it and where."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from gateway.model import GatewayError


class CannotListen(GatewayError):
    """``cannot listen for kafka on 127.0.0.1:9092: address already in use``: the OSError of a
    bind alone names neither the listener nor the port (there may be five of them)."""


def _address(host: str, port: int) -> str:
    shown = host or "*"  # "" binds every interface
    return f"[{shown}]:{port}" if ":" in shown else f"{shown}:{port}"


def _reason(exc: OSError) -> str:
    text = exc.strerror or str(exc)
    return text[:1].lower() + text[1:]


@contextmanager
def naming_address(what: str, host: str, port: int) -> Iterator[None]:
    """Around ``nursery.start`` of a server: an ``OSError`` raised before it started (the bind)
    becomes ``CannotListen``. Once started, its errors go to its nursery, not through here."""
    try:
        yield
    except OSError as exc:
        raise CannotListen(
            f"cannot listen for {what} on {_address(host, port)}: {_reason(exc)}"
        ) from None


__all__ = ["CannotListen", "naming_address"]
