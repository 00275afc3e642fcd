"""Admin HTTP on 9464: ``/metrics`` (OpenMetrics when asked for, else the Prometheus text
format), ``/livez``, ``/readyz``, and the status page: ``/`` and the ``/status.json`` it polls.

``/livez`` never depends on the backend (a slow broker must not get the pod restarted);
``/readyz`` is true only while every listener is bound, the gateway is not draining and the
backend answers a ping within a second. With ``admin.tls`` the same endpoints are served over
TLS (gateway/tls.py), on the admin port or on a port of their own beside it.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from contextlib import suppress
from dataclasses import dataclass
from http import HTTPStatus

import h11
import structlog
import trio
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from gateway.listeners.fd_guard import serve_listeners_quietly
from gateway.metrics import Metrics
from gateway.status_html import CONTENT_SECURITY_POLICY, PAGE
from gateway.status_page import Readiness, StatusBoard
from gateway.tls import ServerTls, TlsError

log = structlog.get_logger("streamgate.admin")
MAX_REQUEST_BYTES = 16384


@dataclass(slots=True)
class Health:
    """Readiness inputs, set by the app as it starts and drains."""

    listeners_bound: bool = False
    draining: bool = False
    ping: Callable[[], Awaitable[None]] | None = None
    # Why no more connections can be taken (out of file descriptors), or None: fd_guard.py
    fds: Callable[[], str | None] | None = None

    async def backend_error(self) -> str | None:
        """Why the backend is not answering, or None when it answered a ping within 1 s."""
        if self.ping is None:
            return None
        with trio.move_on_after(1.0):
            try:
                await self.ping()
            except Exception as exc:
                return f"backend unavailable: {exc}"
            return None
        return "backend did not answer within 1 s"

    async def ready(self, metrics: Metrics) -> tuple[bool, str]:
        backend_error = await self.backend_error()
        metrics.backend_up.labels(metrics.backend).set(0 if backend_error else 1)
        if self.draining:
            return False, "draining"
        if not self.listeners_bound:
            return False, "listeners not bound"
        if backend_error:
            return False, backend_error
        if self.fds is not None and (fds_error := self.fds()) is not None:
            return False, fds_error
        return True, "ok"


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    body: bytes
    content_type: str
    headers: tuple[tuple[str, str], ...] = ()


def _text(status: int, text: str) -> Reply:
    return Reply(status, text.encode() + b"\n", "text/plain; charset=utf-8")


@dataclass(frozen=True, slots=True)
class _Admin:
    registry: CollectorRegistry
    ready: Readiness
    status: StatusBoard | None

    async def reply(self, method: bytes, target: str, accept: str) -> Reply:
        if method not in (b"GET", b"HEAD"):
            return _text(405, "method not allowed")
        if target == "/metrics":
            # OpenMetrics when the scraper asks for it (Prometheus does, first), else the
            # classic text format: prometheus_client reads the Accept header the same way.
            encode, content_type = choose_encoder(accept)
            return Reply(200, encode(self.registry), content_type)
        if target == "/livez":
            return _text(200, "ok")
        if target == "/readyz":
            ok, why = await self.ready()
            return _text(200 if ok else 503, self._redact(why))
        if self.status is not None and target == "/":
            return Reply(200, PAGE, "text/html; charset=utf-8", _PAGE_HEADERS)
        if self.status is not None and target == "/status.json":
            document = await self.status.document(self.ready)
            body = json.dumps(document, allow_nan=False, separators=(",", ":")).encode()
            return Reply(200, body, "application/json", _NO_STORE)
        return _text(404, "not found")

    def _redact(self, text: str) -> str:
        return text if self.status is None else self.status.redact(text)


_NO_STORE = (("cache-control", "no-store"),)
_PAGE_HEADERS = (
    *_NO_STORE,
    ("content-security-policy", CONTENT_SECURITY_POLICY),
    ("x-content-type-options", "nosniff"),
)


async def _respond(
    stream: trio.abc.Stream, conn: h11.Connection, reply: Reply, *, head: bool
) -> None:
    headers = [
        ("content-type", reply.content_type),
        ("content-length", str(len(reply.body))),
        ("connection", "close"),
        *reply.headers,
    ]
    reason = HTTPStatus(reply.status).phrase.encode()
    data = conn.send(h11.Response(status_code=reply.status, headers=headers, reason=reason))
    if not head:  # HEAD: the same headers, no body (RFC 9110 §9.3.2)
        data += conn.send(h11.Data(data=reply.body)) or b""
    data += conn.send(h11.EndOfMessage()) or b""
    await stream.send_all(data)


async def _handle(stream: trio.abc.Stream, admin: _Admin) -> None:
    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_REQUEST_BYTES)
    try:
        with trio.fail_after(10):
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    data = await stream.receive_some(MAX_REQUEST_BYTES)
                    conn.receive_data(bytes(data))
                    if not data:
                        return
                    continue
                break
            if not isinstance(event, h11.Request):
                return
            target = event.target.decode("latin-1").split("?", 1)[0]
            accept = b",".join(v for k, v in event.headers if k == b"accept").decode("latin-1")
            reply = await admin.reply(event.method, target, accept)
            await _respond(stream, conn, reply, head=event.method == b"HEAD")
    except (h11.RemoteProtocolError, trio.TooSlowError, trio.BrokenResourceError, OSError) as exc:
        log.debug("admin request failed", error=str(exc))
    except Exception:
        # One bad request never takes the admin port (or the gateway it runs in) down.
        log.exception("admin request failed")
    finally:
        if isinstance(stream, trio.SSLStream):
            # close_notify before the socket closes (RFC 8446 §6.1): strict clients want it.
            with trio.move_on_after(1) as cleanup:
                cleanup.shield = True
                with suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    await stream.aclose()
        await trio.aclose_forcefully(stream)


async def serve_admin(
    *,
    host: str,
    port: int,
    registry: CollectorRegistry,
    ready: Readiness,
    status: StatusBoard | None = None,
    tls: ServerTls | None = None,
    sample_status: bool = True,
    task_status: trio.TaskStatus[tuple[str, int]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """``/metrics`` from ``registry`` (one process's, or the workers' summed), ``/readyz`` from
    ``ready`` (``Health.ready``, or the supervisor's view of its workers), and with ``status``
    the status page (``/``, ``/status.json``), whose samples it takes while it serves (unless
    ``sample_status`` is false: another server of the same board takes them). With ``tls``
    every connection is TLS."""
    listeners = await trio.open_tcp_listeners(port, host=host)
    sockname = listeners[0].socket.getsockname()
    admin = _Admin(registry, ready, status)

    async def handler(stream: trio.SocketStream) -> None:
        if tls is None:
            await _handle(stream, admin)
            return
        try:
            secure = await tls.handshake(stream)
        except TlsError as exc:
            log.info("admin tls handshake failed", error=str(exc))
            await trio.aclose_forcefully(stream)
            return
        await _handle(secure, admin)

    async with trio.open_nursery() as nursery:
        if status is not None and sample_status:
            await nursery.start(status.run)
        task_status.started((str(sockname[0]), int(sockname[1])))
        await serve_listeners_quietly(handler, listeners, "admin")  # no EMFILE log storm


__all__ = ["Health", "Readiness", "serve_admin"]
