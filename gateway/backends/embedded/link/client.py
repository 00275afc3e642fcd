"""A worker's backend under ``streamgate run --workers N`` on the embedded store: every command
goes to the one store owner process over its unix socket (``server``), so each partition, offset,
producer id's dedup state and transaction still has one owner, and every worker sees the same
store. URL ``embedded+owner:<socket path>``, written by the supervisor (not for hand use).

Consumer groups, which a lone gateway keeps in memory, are replicated over a log in the store
(``shared_log``, as on the Iggy backend), so the workers run one group together.
"""

from __future__ import annotations

import contextlib
import itertools
import math
from collections.abc import Iterable
from typing import Any, Final

import structlog
import trio

from gateway.backends.base import (
    BackendSettings,
    BackendUrlError,
    Capabilities,
    LogApplier,
    SharedLog,
)
from gateway.backends.topic_log import TopicLog
from gateway.model import BackendUnavailable, GatewayError

from ..backend import EmbeddedBackend
from ..owner import Listener
from . import wire
from .writer import widen, write_frames

log = structlog.get_logger("streamgate.backend")

SCHEME: Final = "embedded+owner"
_RETRY_S: Final = 0.2
_CANCEL_WITHIN_S: Final = 1.0
_RECEIVE_BYTES: Final = 1 << 20


class _Waiter:
    __slots__ = ("error", "event", "value")

    def __init__(self) -> None:
        self.event = trio.Event()
        self.value: Any = None
        self.error: BaseException | None = None


def _forward(method: str) -> Any:
    if method not in wire.METHODS:  # the owner would refuse it
        raise ImportError(f"{method} is not in the store link's table")

    async def call(self: EmbeddedLink, cmd: Any) -> Any:
        return await self._call(method, cmd)

    call.__name__ = method
    return call


class EmbeddedLink:
    name = "embedded"  # the label of the store it reaches: dashboards show one backend

    def __init__(self, path: str, capabilities: Capabilities) -> None:
        self.path = path
        self.capabilities = capabilities
        self.shared: TopicLog | None = None
        self._stream: trio.SocketStream | None = None
        self._send: trio.MemorySendChannel[list[memoryview]] | None = None
        self._pending: dict[int, _Waiter] = {}
        self._ids = itertools.count(1)
        self._down = "the store owner is not connected yet"

    @classmethod
    def from_url(cls, url: str, settings: BackendSettings | None = None) -> EmbeddedLink:
        scheme, _, rest = url.partition(":")
        path = rest.removeprefix("//")
        if scheme.lower() != SCHEME or not path.startswith("/"):
            raise BackendUrlError(
                f"{SCHEME} URL needs an absolute socket path, e.g. {SCHEME}:/run/x"
            )
        # The owner's, from the same settings it was started with.
        return cls(path, EmbeddedBackend.capabilities_for(settings or BackendSettings()))

    def shared_log(self, applier: LogApplier) -> SharedLog:
        self.shared = TopicLog(self, applier)
        return self.shared

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        refused: GatewayError | None = None  # no owner to reach: said as itself, not a group
        async with trio.open_nursery() as nursery:
            try:
                await nursery.start(self._keep_connected)
            except GatewayError as exc:
                refused = exc
                nursery.cancel_scope.cancel()
            else:
                if self.shared is not None:
                    await nursery.start(self.shared.run)
                task_status.started()
        if refused is not None:
            raise refused

    async def _keep_connected(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        started = False
        while True:
            try:
                stream = widen(await trio.open_unix_socket(self.path))
            except OSError as exc:
                self._down = f"the store owner is not reachable: {exc.strerror or exc}"
                if not started:  # the supervisor starts workers once the owner listens
                    raise BackendUnavailable(self._down) from None
                await trio.sleep(_RETRY_S)
                continue
            # Unbounded, so that a request is queued whole or not at all (a cancelled send
            # would cut a frame): what waits here is bounded by the worker's own requests.
            send, receive = trio.open_memory_channel[list[memoryview]](math.inf)
            try:
                async with stream, trio.open_nursery() as nursery:
                    self._stream, self._send = stream, send
                    nursery.start_soon(write_frames, stream, receive)
                    if not started:
                        started = True
                        task_status.started()
                    await self._read(stream)
                    nursery.cancel_scope.cancel()
            except* (
                OSError,
                trio.BrokenResourceError,
                trio.ClosedResourceError,
                wire.LinkError,
            ) as group:
                self._down = f"the store owner's link broke: {group.exceptions[0]}"
            else:
                self._down = "the store owner closed its link"
            finally:
                self._stream = self._send = None
                pending, self._pending = self._pending, {}
                for waiter in pending.values():
                    waiter.error = BackendUnavailable(self._down)
                    waiter.event.set()
            log.warning("store link lost; reconnecting", why=self._down)
            await trio.sleep(_RETRY_S)

    async def _read(self, stream: trio.SocketStream) -> None:
        reader = wire.Reader()
        while True:
            data = await stream.receive_some(_RECEIVE_BYTES)
            if not data:
                return
            for frame in reader.feed(data):
                kind, rid, value = wire.from_owner(frame)
                waiter = self._pending.pop(rid, None)
                if waiter is None:
                    continue  # cancelled meanwhile
                if kind == wire.RESULT:
                    waiter.value = value
                else:
                    waiter.error = (
                        value if isinstance(value, GatewayError) else GatewayError(str(value))
                    )
                waiter.event.set()

    async def _call(self, method: str, argument: Any) -> Any:
        send = self._send
        if send is None:
            raise BackendUnavailable(self._down)
        rid = next(self._ids)
        frame = wire.encode((wire.REQUEST, rid, method, argument))  # before anything waits
        waiter = self._pending[rid] = _Waiter()
        try:
            send.send_nowait(frame)
            await waiter.event.wait()
        except trio.Cancelled:
            # Not answered yet (the reader takes a waiter out as it answers it): the owner
            # stops working on it (a long poll, mostly).
            if rid in self._pending and self._send is send:
                with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                    send.send_nowait(wire.encode((wire.CANCEL, rid)))
            raise
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            raise BackendUnavailable(self._down) from None
        finally:
            self._pending.pop(rid, None)
        if waiter.error is not None:
            raise waiter.error
        return waiter.value

    async def ping(self) -> None:
        await self._call("ping", None)

    async def record_listeners(self, listeners: Iterable[Listener]) -> None:
        await self._call("record_listeners", tuple(listeners))

    create_stream = _forward("create_stream")
    delete_stream = _forward("delete_stream")
    update_stream = _forward("update_stream")
    purge_stream = _forward("purge_stream")
    list_streams = _forward("list_streams")
    create_topic = _forward("create_topic")
    delete_topic = _forward("delete_topic")
    list_topics = _forward("list_topics")
    describe_topic = _forward("describe_topic")
    update_topic = _forward("update_topic")
    create_partitions = _forward("create_partitions")
    delete_partitions = _forward("delete_partitions")
    purge_topic = _forward("purge_topic")
    delete_records = _forward("delete_records")
    append = _forward("append")
    read = _forward("read")
    await_data = _forward("await_data")
    list_offsets = _forward("list_offsets")
    commit_offset = _forward("commit_offset")
    fetch_offset = _forward("fetch_offset")
    delete_offset = _forward("delete_offset")
    stats = _forward("stats")
    init_transaction = _forward("init_transaction")
    add_to_transaction = _forward("add_to_transaction")
    commit_transaction_offsets = _forward("commit_transaction_offsets")
    end_transaction = _forward("end_transaction")


if _unforwarded := wire.METHODS - set(dir(EmbeddedLink)):  # the table, both ways
    raise ImportError(f"the store link forwards none of {sorted(_unforwarded)}")

__all__ = ["SCHEME", "EmbeddedLink"]
