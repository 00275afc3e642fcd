"""The store owner's side: the embedded backend served to the workers of ``--workers`` over a
unix socket (``wire``). Each request runs in a task of its own (a long poll waits without
holding up the rest); one task writes each connection's answers; a worker's CANCEL, or its
connection closing, cancels what it asked for."""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Awaitable, Callable
from typing import Any, Final

import structlog
import trio

from gateway.model import GatewayError

from . import wire
from .writer import widen, write_frames

log = structlog.get_logger("streamgate.store")

_QUEUE: Final = 1024  # answers waiting for the writer, per connection
_RECEIVE_BYTES: Final = 1 << 20


class Clients:
    """How many workers are connected: the owner closes the store once none is."""

    def __init__(self) -> None:
        self.count = 0


async def serve_store(
    backend: Any,
    path: str,
    clients: Clients | None = None,
    *,
    task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``backend`` (running already) on the unix socket ``path`` until cancelled."""
    clients = clients if clients is not None else Clients()
    sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    await sock.bind(path)
    os.chmod(path, 0o600)
    sock.listen(64)
    listener = trio.SocketListener(sock)
    try:
        async with trio.open_nursery() as nursery:
            task_status.started(path)
            while True:
                stream = widen(await listener.accept())
                nursery.start_soon(_serve_connection, backend, stream, clients)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
        await listener.aclose()


async def _serve_connection(backend: Any, stream: trio.SocketStream, clients: Clients) -> None:
    clients.count += 1
    try:
        await _serve_requests(backend, stream)
    finally:
        clients.count -= 1


async def _serve_requests(backend: Any, stream: trio.SocketStream) -> None:
    send, receive = trio.open_memory_channel[list[memoryview]](_QUEUE)
    scopes: dict[int, trio.CancelScope] = {}
    reader = wire.Reader()
    try:
        async with stream, trio.open_nursery() as nursery:
            nursery.start_soon(write_frames, stream, receive)
            while True:
                data = await stream.receive_some(_RECEIVE_BYTES)
                if not data:
                    break
                for frame in reader.feed(data):
                    kind, rid, method, argument = wire.from_worker(frame)
                    if kind == wire.CANCEL:
                        if (scope := scopes.get(rid)) is not None:
                            scope.cancel()
                        continue
                    scope = trio.CancelScope()
                    scopes[rid] = scope
                    call = getattr(backend, method)
                    nursery.start_soon(_answer, call, argument, rid, scope, scopes, send)
            nursery.cancel_scope.cancel()  # the worker went: what it asked for is not wanted
    except* (wire.LinkError, trio.BrokenResourceError, trio.ClosedResourceError) as group:
        log.warning("store link closed", why=str(group.exceptions[0]))


async def _answer(
    call: Callable[..., Awaitable[Any]],
    argument: Any,
    rid: int,
    scope: trio.CancelScope,
    scopes: dict[int, trio.CancelScope],
    send: trio.MemorySendChannel[list[memoryview]],
) -> None:
    try:
        with scope:
            try:
                result = await (call() if argument is None else call(argument))
                frame = wire.encode((wire.RESULT, rid, result))
            except GatewayError as exc:
                frame = wire.encode((wire.ERROR, rid, exc))
            except Exception as exc:
                log.exception("store request failed", method=getattr(call, "__name__", "?"))
                frame = wire.encode((wire.ERROR, rid, GatewayError(f"the store failed: {exc}")))
            await send.send(frame)
    finally:
        scopes.pop(rid, None)


__all__ = ["Clients", "serve_store"]
