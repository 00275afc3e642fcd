"""TLS from the gateway to its backend: the URL options every networked backend shares, one
client ``ssl.SSLContext`` per backend, and the handshake on each new connection.

Options (in the backend URL's query): ``tls=1`` turns TLS on (the ``kafkas://`` and
``rabbitmq-stream+tls://`` schemes imply it), ``ca`` a PEM file of the CAs to trust (default:
the system trust store), ``cert``/``key`` a client certificate and its key (mTLS to the broker),
``server_name`` the name sent as SNI and verified in the broker's certificate (default: the host
connected to), ``verify=0`` an explicit opt-out of verification, logged as a warning when the
context is made. The minimum protocol is TLS 1.2.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

import structlog
import trio

from gateway.backends.base import BackendUrlError
from gateway.model import BackendUnavailable

log = structlog.get_logger("streamgate.backends.tls")

TLS_OPTIONS: Final = frozenset({"tls", "ca", "cert", "key", "server_name", "verify"})
_TRUE: Final = frozenset({"1", "true", "yes", "on"})
_FALSE: Final = frozenset({"0", "false", "no", "off"})


def _flag(name: str, value: str, what: str) -> bool:
    lowered = value.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise BackendUrlError(f"{what} URL option {name} must be 1 or 0")


@dataclass(frozen=True, slots=True)
class TlsClient:
    """A backend's TLS: its one client context and the name to verify (None: each host's)."""

    context: ssl.SSLContext
    server_name: str | None = None

    async def wrap(
        self, stream: trio.SocketStream, host: str, port: int
    ) -> trio.SSLStream[trio.SocketStream]:
        """``stream`` after a completed handshake; the caller bounds it in time (its connect
        timeout) and closes ``stream`` on failure. A refused certificate or a broken handshake is
        ``BackendUnavailable`` naming the broker and OpenSSL's reason."""
        name = self.server_name or host
        wrapped = trio.SSLStream(stream, self.context, server_hostname=name)
        try:
            await wrapped.do_handshake()
        except trio.BrokenResourceError as exc:
            raise BackendUnavailable(
                f"TLS handshake with {host}:{port} failed: {_reason(exc.__cause__, name)}"
            ) from None
        return wrapped


def _reason(cause: BaseException | None, name: str) -> str:
    if isinstance(cause, ssl.SSLCertVerificationError):
        return f"certificate verify failed for {name!r}: {cause.verify_message}"
    if isinstance(cause, ssl.SSLError):
        return cause.reason or str(cause)
    if cause is None:
        return "the connection was closed"
    return str(cause) or type(cause).__name__


def tls_client(options: Mapping[str, str], *, tls: bool, what: str) -> TlsClient | None:
    """The TLS of a backend URL from its query ``options`` (only the TLS ones are read); ``tls``:
    the scheme asks for TLS. None without TLS; an option that needs TLS without it, a bad value
    or an unreadable file is a ``BackendUrlError`` (naming the option, never a secret)."""
    if "tls" in options:
        tls = _flag("tls", options["tls"], what) or tls
    given = sorted(k for k in TLS_OPTIONS - {"tls"} if k in options)
    if not tls:
        if given:
            raise BackendUrlError(f"{what} URL option {given[0]} needs TLS (tls=1)")
        return None
    verify = _flag("verify", options.get("verify", "1"), what)
    ca, cert, key = options.get("ca"), options.get("cert"), options.get("key")
    if key and not cert:
        raise BackendUrlError(f"{what} URL option key needs cert (the client certificate)")
    try:
        context = ssl.create_default_context(cafile=ca or None)
        if cert:
            context.load_cert_chain(cert, key or None)
    except FileNotFoundError as exc:
        raise BackendUrlError(f"{what} TLS file not found: {exc.filename}") from None
    except (OSError, ssl.SSLError) as exc:
        which = "ca" if ca and not cert else "ca/cert/key"
        reason = getattr(exc, "reason", None) or exc.strerror or type(exc).__name__
        raise BackendUrlError(f"{what} TLS files ({which}) cannot be used: {reason}") from None
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if not verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        log.warning(
            "TLS to the backend does NOT verify the broker's certificate (verify=0): anyone "
            "on the path can read and change the traffic",
            backend=what,
        )
    return TlsClient(context, options.get("server_name") or None)


__all__ = ["TLS_OPTIONS", "TlsClient", "tls_client"]
