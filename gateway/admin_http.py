"""Admin HTTP on 9464: ``/metrics`` (Prometheus text), ``/livez``, ``/readyz``.

``/livez`` never depends on the backend (a slow broker must not get the pod restarted);
``/readyz`` is true only while every listener is bound, the gateway is not draining and the
backend answers a ping within a second.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import h11
import structlog
import trio
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from gateway.metrics import Metrics

log = structlog.get_logger("streamgate.admin")
MAX_REQUEST_BYTES = 16384


@dataclass(slots=True)
class Health:
    """Readiness inputs, set by the app as it starts and drains."""

    listeners_bound: bool = False
    draining: bool = False
    ping: Callable[[], Awaitable[None]] | None = None

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
        return True, "ok"


async def _respond(
    stream: trio.SocketStream, conn: h11.Connection, status: int, body: bytes, ctype: str
) -> None:
    headers = [
        ("content-type", ctype),
        ("content-length", str(len(body))),
        ("connection", "close"),
    ]
    data = conn.send(h11.Response(status_code=status, headers=headers))
    data += conn.send(h11.Data(data=body)) or b""
    data += conn.send(h11.EndOfMessage()) or b""
    await stream.send_all(data)


Readiness = Callable[[], Awaitable[tuple[bool, str]]]


async def _handle(stream: trio.SocketStream, registry: CollectorRegistry, ready: Readiness) -> None:
    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_REQUEST_BYTES)
    try:
        with trio.fail_after(10):
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    data = await stream.receive_some(MAX_REQUEST_BYTES)
                    conn.receive_data(data)
                    if not data:
                        return
                    continue
                break
            if not isinstance(event, h11.Request):
                return
            target = event.target.decode("latin-1").split("?", 1)[0]
            if event.method not in (b"GET", b"HEAD"):
                await _respond(stream, conn, 405, b"method not allowed\n", "text/plain")
            elif target == "/metrics":
                body = generate_latest(registry)
                await _respond(stream, conn, 200, body, CONTENT_TYPE_LATEST)
            elif target == "/livez":
                await _respond(stream, conn, 200, b"ok\n", "text/plain")
            elif target == "/readyz":
                ok, why = await ready()
                await _respond(stream, conn, 200 if ok else 503, why.encode() + b"\n", "text/plain")
            else:
                await _respond(stream, conn, 404, b"not found\n", "text/plain")
    except (h11.RemoteProtocolError, trio.TooSlowError, trio.BrokenResourceError, OSError) as exc:
        log.debug("admin request failed", error=str(exc))
    finally:
        await trio.aclose_forcefully(stream)


async def serve_admin(
    *,
    host: str,
    port: int,
    registry: CollectorRegistry,
    ready: Readiness,
    task_status: trio.TaskStatus[tuple[str, int]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """``/metrics`` from ``registry`` (one process's, or the workers' summed), ``/readyz`` from
    ``ready`` (``Health.ready``, or the supervisor's view of its workers)."""
    listeners = await trio.open_tcp_listeners(port, host=host)
    sockname = listeners[0].socket.getsockname()
    task_status.started((str(sockname[0]), int(sockname[1])))

    async def handler(stream: trio.SocketStream) -> None:
        await _handle(stream, registry, ready)

    await trio.serve_listeners(handler, listeners)


__all__ = ["Health", "Readiness", "serve_admin"]
