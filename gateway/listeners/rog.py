"""Rog listener (default port 7878): one request per connection, answered once, then closed.

Better than the real server where it is broken (rog.md §1, §4): a publish is acknowledged only
after the backend stored it, a body is never stored before it has fully arrived, a huge declared
size is refused before anything is allocated, and unknown partitions on fetch/ack get the
publish error text instead of a silent close.

Rog has no authentication: every request runs as the ``anonymous`` user (``auth.anonymous``),
checked by the router like any other; a refusal is answered with its text.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import assert_never

import trio

from gateway.listeners.connection import Connection, Handler
from gateway.model import GatewayError, OffsetOutOfRange
from gateway.router import RequestContext, Router
from gateway.translate import rog as tr
from gateway.translate.lossy import Lossy, ignore_lossy
from protocols._wire import NEED_DATA, RemoteProtocolError
from protocols.rog import (
    COMMAND_NOT_CREATED,
    CONNECTION_CLOSED,
    NO_DATA_LEFT,
    Ack,
    CreateLog,
    Error,
    Fetch,
    Ok,
    Publish,
    Request,
    Response,
    RogServerCodec,
    UnknownCommand,
)


class _KeyedLocks:
    """A lock per key, kept only while someone holds or waits for it: a client naming a new
    (log, partition, group) on every request (Rog needs no login) costs nothing once answered."""

    def __init__(self) -> None:
        self._locks: dict[tuple[str, int, str], tuple[trio.Lock, list[int]]] = {}

    @asynccontextmanager
    async def hold(self, key: tuple[str, int, str]) -> AsyncIterator[None]:
        entry = self._locks.get(key)
        if entry is None:
            entry = self._locks[key] = (trio.Lock(), [0])
        lock, users = entry
        users[0] += 1
        try:
            async with lock:
                yield
        finally:
            users[0] -= 1
            if not users[0]:
                del self._locks[key]

    def __len__(self) -> int:
        return len(self._locks)


class RogService:
    def __init__(self, router: Router, *, max_frame_bytes: int) -> None:
        self.router = router
        self.max_frame_bytes = max_frame_bytes
        # fetch-then-commit must not interleave for one (log, partition, group), or two acks
        # from two connections could both move the offset from the same value.
        self._group_locks = _KeyedLocks()

    def handler(self) -> Handler:
        return self.handle

    async def handle(self, conn: Connection) -> None:
        codec = RogServerCodec(self.max_frame_bytes)
        while True:
            try:
                frame = codec.next_frame()
            except RemoteProtocolError as exc:
                if isinstance(exc.hint, Error):
                    await conn.send(codec.send(exc.hint))
                raise
            if frame is NEED_DATA:
                await conn.feed(codec)
                continue
            if frame is CONNECTION_CLOSED:
                return
            with conn.request(tr.WIRE_COMMANDS.get(type(frame), "unknown")) as request:
                response = await self.respond(frame, request.ctx, conn.metrics.lossy(tr.PROTOCOL))
                await conn.send(codec.send(response))
            # One request per connection, as the real server (rog.md §1); what follows the
            # request is ignored, and the connection closes once the reply is flushed.
            return

    async def respond(
        self, req: Request, ctx: RequestContext, lossy: Lossy = ignore_lossy
    ) -> Response:
        if isinstance(req, UnknownCommand):
            return Error(text=COMMAND_NOT_CREATED)
        try:
            match req:
                case CreateLog():
                    cmd = tr.create_topic(req)
                    if isinstance(cmd, Error):
                        return cmd
                    await self.router.execute(cmd, ctx)
                    return Ok()
                case Publish():
                    await self.router.execute(tr.append(req), ctx)
                    return Ok()
                case Fetch() | Ack():
                    return await self._consume(req, ctx, lossy)
                case _:
                    assert_never(req)
        except GatewayError as exc:
            return tr.error_response(req, exc)

    async def _consume(self, req: Fetch | Ack, ctx: RequestContext, lossy: Lossy) -> Response:
        execute = self.router.execute
        async with self._group_locks.hold((req.name, req.partition, req.group)):
            committed = (await execute(tr.fetch_offset(req), ctx)).offset
            offset = committed or 0
            try:
                result = await execute(tr.read_one(req, offset), ctx)
            except OffsetOutOfRange as exc:
                if offset >= exc.log_start:
                    return Error(text=NO_DATA_LEFT)
                # Retention removed what the group had not read yet: go on from the oldest
                # message kept (what Kafka's auto.offset.reset=earliest does).
                result = await execute(tr.read_one(req, exc.log_start), ctx)
            messages = tuple(m for b in result.batches for m in b.messages)[:1]
            if isinstance(req, Fetch):
                return tr.first_message(messages, lossy)
            if not messages:
                # The real server moves the offset past the end anyway and then silently skips
                # the next message published (rog.md §4); refusing is the useful answer.
                return Error(text=NO_DATA_LEFT)
            await execute(tr.commit_next(req, messages[0].offset), ctx)
            return Ok()
