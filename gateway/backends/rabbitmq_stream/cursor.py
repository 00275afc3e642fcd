"""Reads from further back than a tail holds, on a subscription kept between reads: a ``Cursor``
goes on from where the last read of its stream stopped (rabbitmq-stream.md §5 Consuming).

A consumer catching up reads a stream in steps (each a ``Read`` of about 1 MiB). A subscription
per step (Subscribe at the offset, a barrier per round of credit, Unsubscribe) made RabbitMQ
open a reader on the segment every time, and was most of what a consumer behind the gateway
cost it beyond a direct one (measured: 1.45 against 0.5 us/msg of broker CPU at 1 KiB). So the
subscription is kept: the next step at the offset where the last one ended takes what was
delivered meanwhile and asks for more with Credit. No barrier is needed: a read goes up to
``until``, the end the partition's tail has seen, so the chunks up to it exist and come.

At most ``CURSOR_CREDIT`` chunks are asked for ahead of the reads (delivered while the client
sends what it got); a cursor unused for ``CURSOR_IDLE_S`` is dropped at the next read of any
stream, and at most ``MAX_CURSORS`` are kept per connection (the subscription ids are the
tails', rabbitmq_stream_streams).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Final

import trio

from gateway.backends.rabbitmq_stream.conn import Connection, check
from gateway.backends.rabbitmq_stream.tail import ALL_CHUNKS, Stored, parse
from gateway.model import BackendUnavailable, GatewayError, Timeout
from protocols import rabbitmq_stream as rs
from protocols._wire import RemoteProtocolError
from protocols.rabbitmq_stream.chunk import DeliveredChunk

CURSOR_CREDIT: Final = 8  # chunks asked for ahead of the reader
MAX_CURSORS: Final = 16  # per connection
CURSOR_IDLE_S: Final = 10.0


class Cursor:
    def __init__(self, conn: Connection, stream: str, offset: int) -> None:
        self.conn = conn
        self.stream = stream
        self.sid = -1
        self.chunks: list[Stored] = []  # user chunks delivered, not yet taken
        self.end = -1  # the next offset after the last chunk (of any type) delivered
        self.first = -1  # id of the first chunk (of any type) delivered
        self.fresh = True  # no read took anything yet: ``first`` tells where it started
        self.resume = offset  # every user chunk below it was taken
        self.credit = 0
        self.busy = False  # a read is using it
        self.error: GatewayError | None = None
        self.arrived = trio.Event()
        self.used_at = time.monotonic()

    @classmethod
    async def open(cls, conn: Connection, stream: str, offset: int) -> Cursor:
        cursor = cls(conn, stream, offset)
        cursor.sid = conn.add_subscriber(cursor)
        cursor.credit = CURSOR_CREDIT
        try:
            reply = await conn.call(
                lambda c: rs.Subscribe(
                    correlation_id=c, subscription_id=cursor.sid, stream=stream,
                    offset=rs.OffsetSpec.offset(offset), credit=CURSOR_CREDIT,
                    properties=ALL_CHUNKS,
                )
            )  # fmt: skip
            check(reply, f"Subscribe to {stream!r}")
        except BaseException:
            conn.remove_subscriber(cursor.sid)
            raise
        return cursor

    @property
    def usable(self) -> bool:
        return self.error is None and self.conn.alive

    def goes_on_from(self, offset: int) -> bool:
        """Whether a read at ``offset`` continues this one: every user chunk below it was taken
        and it is not beyond what came (only tracking chunks lie between ``resume`` and
        ``end``)."""
        return self.usable and self.resume <= offset <= max(self.end, self.resume)

    def drop(self, why: GatewayError) -> None:
        self.conn.remove_subscriber(self.sid)
        self.closed(why)

    async def read(
        self, offset: int, *, max_bytes: int, max_records: int, until: int
    ) -> tuple[list[Stored], int]:
        """The user chunks from the one holding ``offset`` on (all that came: the reader keeps
        what it does not use now, ``Tail.keep_ahead``), at least until
        ``max_bytes``/``max_records`` or offset ``until``; and, on the cursor's first read, the
        id of the first chunk of any type (above ``offset`` when retention dropped it)."""
        self.busy = True
        self.used_at = time.monotonic()
        out: list[Stored] = []
        size = records = 0
        try:
            while True:
                if self.error is not None:
                    raise self.error
                self.arrived = trio.Event()  # before the take: set by whatever comes after it
                taken, self.chunks = self.chunks, []
                for stored in taken:
                    if stored.end <= offset:
                        continue
                    out.append(stored)
                    size += len(stored.body)
                    records += stored.end - max(offset, stored.chunk_id)
                # Nothing found is never full (a read of max_records=0 waits for data too).
                full = bool(out) and (size >= max_bytes or records >= max_records)
                if full or self.end >= until:
                    break
                if self.credit < CURSOR_CREDIT:
                    grant, self.credit = CURSOR_CREDIT - self.credit, CURSOR_CREDIT
                    self.conn.outbox.credit(self.sid, grant)
                timeout = self.conn.settings.request_timeout_s
                with self.conn.watchdog.bound(timeout):
                    await self.arrived.wait()
                if not self.arrived.is_set():
                    raise Timeout(f"RabbitMQ sent no chunk of {self.stream!r} in {timeout} s")
        except BaseException:
            self.drop(BackendUnavailable(f"read of {self.stream!r} ended"))
            raise
        finally:
            self.busy = False
        # What was taken below ``offset`` is gone: a later read from before it starts afresh.
        self.resume = out[-1].end if out else offset
        first, self.fresh = (self.first if self.fresh else -1), False
        return out, first

    # --- the connection's callbacks (Subscriber) -------------------------------------------------

    def deliver(self, chunk: DeliveredChunk) -> None:
        try:
            chunk_id, end, stored = parse(chunk)
        except RemoteProtocolError as exc:
            self.error = GatewayError(f"corrupt chunk from RabbitMQ: {exc}")
            self.arrived.set()
            return
        self.credit -= 1
        if self.first < 0:
            self.first = chunk_id
        self.end = max(self.end, end)
        if stored is not None:
            self.chunks.append(stored)
        self.arrived.set()

    def closed(self, why: GatewayError) -> None:
        if self.error is None:
            self.error = why
        self.chunks = []
        self.arrived.set()


class Cursors:
    """The cursors of one connection, by stream, least recently used dropped first."""

    def __init__(self, conn: Connection, limit: int = MAX_CURSORS) -> None:
        self.conn = conn
        self.items: OrderedDict[str, Cursor] = OrderedDict()
        self._limit = limit

    async def read(
        self, stream: str, offset: int, *, max_bytes: int, max_records: int, until: int
    ) -> tuple[list[Stored], int]:
        self._sweep()
        cursor = self.items.get(stream)
        if cursor is not None and not cursor.busy and not cursor.goes_on_from(offset):
            del self.items[stream]
            cursor.drop(BackendUnavailable(f"read of {stream!r} moved"))
            cursor = None
        if cursor is not None and not cursor.busy:
            self.items.move_to_end(stream)
            return await cursor.read(offset, max_bytes=max_bytes, max_records=max_records,
                                     until=until)  # fmt: skip
        cursor = await Cursor.open(self.conn, stream, offset)
        if stream not in self.items and self._room():
            self.items[stream] = cursor
        else:  # another read of the stream has its cursor, or all are busy: used once
            try:
                return await cursor.read(offset, max_bytes=max_bytes, max_records=max_records,
                                         until=until)  # fmt: skip
            finally:
                cursor.drop(BackendUnavailable(f"one read of {stream!r}"))
        return await cursor.read(offset, max_bytes=max_bytes, max_records=max_records,
                                 until=until)  # fmt: skip

    def _room(self) -> bool:
        """Room for one more, the least recently used idle ones dropped to make it."""
        for name, old in list(self.items.items()):
            if len(self.items) < self._limit:
                break
            if not old.busy:
                del self.items[name]
                old.drop(BackendUnavailable("cursor dropped to make room"))
        return len(self.items) < self._limit

    def _sweep(self) -> None:
        """Drop the cursors nobody read from lately (and those that failed)."""
        now = time.monotonic()
        for name, cursor in list(self.items.items()):
            idle = not cursor.busy and now - cursor.used_at > CURSOR_IDLE_S
            if idle or not cursor.usable:
                del self.items[name]
                cursor.drop(BackendUnavailable("cursor idle"))

    def forget(self, names: list[str]) -> None:
        for name in names:
            cursor = self.items.pop(name, None)
            if cursor is not None:
                cursor.drop(BackendUnavailable(f"RabbitMQ stream {name!r} was deleted"))


__all__ = ["CURSOR_CREDIT", "Cursor", "Cursors"]
