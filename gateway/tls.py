"""TLS on the gateway's listening ports: server contexts from PEM files (the standard library's
``ssl``), the handshake over an accepted TCP stream (``trio.SSLStream``, bounded in time), the
user a client certificate names, and re-reading certificates without dropping connections.

A context is built once per port and replaced as a whole when its files change or on SIGHUP:
a handshake takes the context current when it begins, so connections already open keep the
one they were made with and new ones get the new certificate.
"""

from __future__ import annotations

import os
import signal
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import structlog
import trio

log = structlog.get_logger("streamgate.tls")

_VERIFY = {
    "none": ssl.CERT_NONE,
    "optional": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}
RELOAD_POLL_S = 3.0


class TlsError(Exception):
    """A handshake that failed or took too long, or a TLS client on a plaintext port. The text
    names what went wrong (an alert, a verification error), never key material."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TlsSettings:
    cert_file: str
    key_file: str
    ca_file: str = ""
    client_auth: str = "none"  # none | optional | required
    principal: str = "cn"  # cn | san
    handshake_timeout_s: float = 10.0


def server_context(settings: TlsSettings) -> ssl.SSLContext:
    """A server context: TLS 1.2 at least, the chain and key, client certificates as asked."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(settings.cert_file, settings.key_file)
    if settings.ca_file:
        context.load_verify_locations(cafile=settings.ca_file)
    context.verify_mode = _VERIFY[settings.client_auth]
    return context


def principal_of(peer_cert: dict[str, Any] | None, kind: str) -> str | None:
    """The user a verified client certificate names: its subject CN (``cn``), or its first
    subjectAltName of type DNS or email (``san``); None without a certificate or such a name."""
    if not peer_cert:
        return None
    if kind == "san":
        for typ, value in peer_cert.get("subjectAltName", ()):
            if typ in ("DNS", "email"):
                return str(value)
        return None
    for rdn in peer_cert.get("subject", ()):
        for attr, value in rdn:
            if attr == "commonName":
                return str(value)
    return None


def looks_like_client_hello(data: bytes) -> bool:
    """Whether the first bytes of a connection are a TLS record carrying a ClientHello (RFC 8446
    §5.1: content type 22, legacy version 3.x, length; then handshake type 1). No first frame of
    Kafka, RabbitMQ Stream, Iggy (a login or ping) or Rog begins this way."""
    return (
        len(data) >= 6
        and data[0] == 0x16
        and data[1] == 0x03
        and data[2] <= 0x04
        and (data[5] == 0x01)
    )


class ServerTls:
    """One port's TLS: the current context, rebuilt when its files change."""

    def __init__(self, settings: TlsSettings, name: str) -> None:
        self.settings = settings
        self.name = name  # e.g. "kafka" or "admin", for log lines
        self._stamp = self._files_stamp()
        self.context = server_context(settings)
        self._failed_stamp: object = None

    def _files_stamp(self) -> tuple[tuple[int, int, int], ...]:
        s = self.settings
        stamp = []
        for path in filter(None, (s.cert_file, s.key_file, s.ca_file)):
            try:
                st = os.stat(path)
                stamp.append((st.st_ino, st.st_mtime_ns, st.st_size))
            except OSError:
                stamp.append((-1, -1, -1))
        return tuple(stamp)

    def reload(self, *, force: bool = False) -> bool:
        """Re-read the files when they changed (or ``force``); whether the context was replaced.
        A set of files that does not load (a key written before its certificate) keeps the old
        context and is tried again at the next look."""
        stamp = self._files_stamp()
        if not force and stamp == self._stamp:
            return False
        try:
            context = server_context(self.settings)
        except (OSError, ssl.SSLError) as exc:
            if force or stamp != self._failed_stamp:
                log.warning("tls certificates not reloaded", port=self.name, error=str(exc))
            self._failed_stamp = stamp
            return False
        self.context, self._stamp = context, stamp
        log.info("tls certificates reloaded", port=self.name)
        return True

    async def handshake(self, stream: trio.abc.Stream) -> trio.SSLStream[trio.abc.Stream]:
        """The TLS stream over ``stream`` once the handshake is done; TlsError when it fails or
        does not finish within the timeout (a client that never speaks holds only itself)."""
        # https_compatible: a peer that closes without close_notify is an EOF, as the framed
        # protocols here need no truncation protection (every frame carries its length).
        tls = trio.SSLStream(stream, self.context, server_side=True, https_compatible=True)
        with trio.move_on_after(self.settings.handshake_timeout_s):
            try:
                await tls.do_handshake()
            except trio.BrokenResourceError as exc:
                raise TlsError(_reason(exc)) from None
            return tls
        raise TlsError(f"no handshake within {self.settings.handshake_timeout_s} s")

    def principal(self, tls: trio.SSLStream[trio.abc.Stream]) -> str | None:
        if self.settings.client_auth == "none":
            return None
        return principal_of(tls.getpeercert(), self.settings.principal)


def _reason(exc: BaseException) -> str:
    cause = exc.__cause__ or exc.__context__
    if isinstance(cause, ssl.SSLCertVerificationError):
        return f"certificate verify failed: {cause.verify_message}"
    if isinstance(cause, ssl.SSLError):
        return cause.reason or type(cause).__name__
    if cause is not None:
        return type(cause).__name__
    return "connection lost during the handshake"


async def watch_certificates(
    ports: Sequence[ServerTls],
    *,
    poll_s: float = RELOAD_POLL_S,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Re-read every port's certificates on SIGHUP, and when their files change (polled)."""
    with trio.open_signal_receiver(signal.SIGHUP) as signals:
        task_status.started()
        while True:
            hup = False
            with trio.move_on_after(poll_s):
                async for _ in signals:
                    hup = True
                    break
            if hup:
                log.info("SIGHUP: re-reading tls certificates")
            for port in ports:
                port.reload(force=hup)


def configured_tls(tls: Any, name: str) -> ServerTls | None:
    """The ``ServerTls`` of a listener's or the admin port's ``tls`` section (a
    ``config.TlsConfig``), None when it is off; a file that cannot be loaded is an ``OSError``
    naming the paths, never the key."""
    if not tls.enabled:
        return None
    settings = TlsSettings(
        cert_file=tls.cert_file, key_file=tls.key_file, ca_file=tls.ca_file,
        client_auth=tls.client_auth, principal=tls.principal,
        handshake_timeout_s=tls.handshake_timeout_s,
    )  # fmt: skip
    try:
        return ServerTls(settings, name)
    except OSError as exc:  # ssl.SSLError included
        raise OSError(f"{name} tls: cannot load {tls.cert_file} / {tls.key_file}: {exc}") from exc


__all__ = [
    "RELOAD_POLL_S", "ServerTls", "TlsError", "TlsSettings", "configured_tls",
    "looks_like_client_hello", "principal_of", "server_context", "watch_certificates",
]  # fmt: skip
