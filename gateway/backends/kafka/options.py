"""The Kafka backend URL and its options: ``kafka://h1:p1,h2:p2?k=v`` (``kafka`` module
docstring), taken apart into the bootstrap servers and ``Options``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, unquote

from gateway.backends.base import BackendUrlError, shown_url
from gateway.backends.kafka.sasl import SASL_OPTIONS, SaslLogin, sasl_login
from gateway.backends.tls import TLS_OPTIONS, TlsClient, tls_client


@dataclass(frozen=True, slots=True, kw_only=True)
class Options:
    """The URL's options (``kafka`` module docstring)."""

    client_id: str = "streamgate"
    request_timeout_s: float = 10.0
    connect_timeout_s: float = 5.0
    metadata_max_age_s: float = 5.0
    long_poll_slice_s: float = 0.1
    tansu: bool = False  # ?broker=tansu: work around Tansu's answers (kafka_fetch)
    max_frame_bytes: int = 100 << 20
    tls: TlsClient | None = None  # TLS to every broker (backends.tls)
    sasl: SaslLogin | None = None  # SASL on every broker connection (kafka.sasl)


def _authority(rest: str) -> tuple[str, str]:
    """What follows ``scheme://``: its authority (up to the first "/", "?" or "#", as in
    urlsplit) and its query."""
    rest = rest.partition("#")[0]
    end = min((i for i in map(rest.find, "/?") if i >= 0), default=len(rest))
    return rest[:end], rest[end:].partition("?")[2]


_SECONDS = {
    "request_timeout_ms": "request_timeout_s",
    "connect_timeout_ms": "connect_timeout_s",
    "metadata_max_age_ms": "metadata_max_age_s",
    "long_poll_slice_ms": "long_poll_slice_s",
}


def parse_url(url: str) -> tuple[list[tuple[str, int]], Options]:
    """``kafka://h1:p1,h2:p2?k=v`` (``kafkas://`` or ``?tls=1``: TLS, options as in
    ``backends.tls``) -> the bootstrap servers and the options. Errors show the URL masked."""
    shown = shown_url(url)
    # Split by hand: a list of servers is not one URL authority, and urlsplit may refuse one
    # with a bracketed IPv6 address after the first server ("a:1,[::1]:2": Debian's 3.11.2,
    # patched, checks that nothing comes before a bracket; CPython 3.11.7-3.13.0 do not).
    scheme, sep, rest = url.partition("://")
    scheme = scheme.lower()
    netloc, options = _authority(rest)
    if not sep or scheme not in ("kafka", "kafkas") or not netloc:
        raise BackendUrlError(f"not a kafka://host:port URL: {shown!r}")
    userinfo, _, hosts = netloc.rpartition("@")
    servers = []
    for item in hosts.split(","):
        if item.startswith("["):  # [IPv6]:port
            host, sep, port = item[1:].partition("]:")
            host = host if sep else ""
        else:
            host, _, port = item.rpartition(":")
        if not host or "[" in host or "]" in host or not port.isdigit():
            raise BackendUrlError(f"kafka URL server {item!r} is not host:port")
        servers.append((host, int(port)))
    try:
        query = parse_qsl(options, strict_parsing=bool(options))
    except ValueError:
        raise BackendUrlError("kafka URL options are not name=value pairs") from None
    values: dict[str, Any] = {}
    tls_values: dict[str, str] = {}
    sasl_values: dict[str, str] = {}
    for key, value in query:
        if key in _SECONDS:
            if not value.isdigit():
                raise BackendUrlError(f"kafka backend option {key} must be a number")
            values[_SECONDS[key]] = int(value) / 1000
        elif key == "client_id":
            values[key] = value
        elif key == "broker" and value in ("kafka", "tansu"):
            values["tansu"] = value == "tansu"
        elif key in TLS_OPTIONS:
            tls_values[key] = value
        elif key in SASL_OPTIONS:
            sasl_values[key] = value
        else:
            # The value is not shown: an unknown option may well be a secret.
            raise BackendUrlError(f"unknown kafka backend option {key!r} (or a bad value)")
    values["tls"] = tls_client(tls_values, tls=scheme == "kafkas", what="kafka")
    user, has_password, password = userinfo.partition(":")
    values["sasl"] = sasl_login(
        unquote(user) if userinfo else None,
        unquote(password) if has_password else None,
        sasl_values,
    )
    return servers, Options(**values)


__all__ = ["Options", "parse_url"]
