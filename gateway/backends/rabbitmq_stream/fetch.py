"""Short-lived subscriptions for what 3.10 has no request for (rabbitmq-stream.md §10): a
stream's first and next offsets, and offsets by timestamp (reads of a range:
``rabbitmq_stream_cursor``).

A ``Scan`` subscribes at an offset specification with some credit, then sends the barrier (see
``rabbitmq_stream_tail``): the chunks that came before its answer are what the credit allowed of
what there is, so a round that brought fewer chunks than its credit reached the end. More
rounds (Credit + barrier) go on from there. The subscription is dropped when the scan ends.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from contextlib import aclosing, asynccontextmanager
from dataclasses import dataclass
from typing import Final

from gateway.backends.rabbitmq_stream.conn import Connection, check, gathering
from gateway.backends.rabbitmq_stream.tail import ALL_CHUNKS, Stored, barrier, parse
from gateway.model import GatewayError, Message
from gateway.translate.rabbitmq_stream.messages import decode_wire
from protocols import rabbitmq_stream as rs
from protocols._wire import RemoteProtocolError
from protocols.rabbitmq_stream import OffsetType
from protocols.rabbitmq_stream.chunk import DeliveredChunk

ROUND_CREDIT: Final = 8  # chunks asked for per round of a read
TIMESTAMP_SKEW_MS: Final = 10 * 60 * 1000  # see find_timestamp


class Collector:
    """A subscription's chunks, kept until taken (the connection's Subscriber)."""

    def __init__(self, stream: str) -> None:
        self.stream = stream
        self.chunks: list[Stored] = []
        self.delivered = 0  # chunks of any type, this round
        self.first = -1  # id of the first chunk of any type
        self.end = -1  # next offset after the last chunk of any type
        self.error: GatewayError | None = None

    def deliver(self, chunk: DeliveredChunk) -> None:
        try:
            chunk_id, end, stored = parse(chunk)
        except RemoteProtocolError as exc:
            self.error = GatewayError(f"corrupt chunk from RabbitMQ: {exc}")
            return
        if self.first < 0:
            self.first = chunk_id
        self.delivered += 1
        self.end = max(self.end, end)
        if stored is not None:
            self.chunks.append(stored)

    def closed(self, why: GatewayError) -> None:
        if self.error is None:
            self.error = why


class Scan:
    def __init__(self, conn: Connection, sid: int, collector: Collector, credit: int) -> None:
        self.conn = conn
        self.sid = sid
        self.collector = collector
        self.credit = credit
        self.exhausted = False

    def take(self) -> list[Stored]:
        """The user chunks delivered since the last take."""
        if self.collector.error is not None:
            raise self.collector.error
        chunks, self.collector.chunks = self.collector.chunks, []
        return chunks

    async def more(self) -> None:
        """One more round of ``credit`` chunks (sets ``exhausted`` when fewer came)."""
        self.collector.delivered = 0
        self.conn.outbox.credit(self.sid, self.credit)
        await self.conn.call(lambda c: barrier(c, self.collector.stream))
        self._settle()

    def _settle(self) -> None:
        if self.collector.error is not None:
            raise self.collector.error
        self.exhausted = self.collector.delivered < self.credit

    async def chunks(self) -> AsyncGenerator[Stored, None]:
        """Every user chunk from the start to the end found by the rounds."""
        while True:
            for stored in self.take():
                yield stored
            if self.exhausted:
                return
            await self.more()


@asynccontextmanager
async def scanning(
    conn: Connection,
    stream: str,
    spec: rs.OffsetSpec,
    *,
    credit: int = ROUND_CREDIT,
    all_chunks: bool = False,
) -> AsyncIterator[Scan]:
    collector = Collector(stream)
    sid = conn.add_subscriber(collector)
    try:
        subscribed = conn.start(
            lambda c: rs.Subscribe(
                correlation_id=c, subscription_id=sid, stream=stream, offset=spec, credit=credit,
                properties=ALL_CHUNKS if all_chunks else None,
            )
        )  # fmt: skip
        answered = conn.start(lambda c: barrier(c, stream))
        check(await subscribed.result(), f"Subscribe to {stream!r}")
        await answered.result()
        scan = Scan(conn, sid, collector, credit)
        scan._settle()
        yield scan
    finally:
        conn.remove_subscriber(sid)


def at(offset: int) -> rs.OffsetSpec:
    return rs.OffsetSpec.offset(offset)


@dataclass(frozen=True, slots=True)
class Bounds:
    start: int  # the first offset kept (retention may move it)
    end: int  # the next offset
    record_bytes: float  # average record size in the last user chunk (0: none)


async def probe(conn: Connection, stream: str) -> Bounds:
    """The first and next offsets of a stream without a tail: its first chunk, and its last
    user chunk plus the tracking chunks after it (LAST with chunk_selector=all)."""
    first: list[int] = []
    async with gathering() as nursery:

        async def first_chunk() -> None:
            first_spec = rs.OffsetSpec(type=OffsetType.FIRST)
            async with scanning(conn, stream, first_spec, credit=1, all_chunks=True) as scan:
                if scan.collector.first >= 0:
                    first.append(scan.collector.first)

        nursery.start_soon(first_chunk)
        last_spec = rs.OffsetSpec(type=OffsetType.LAST)
        async with scanning(conn, stream, last_spec, all_chunks=True) as scan:
            last: Stored | None = None
            async with aclosing(scan.chunks()) as chunks:
                async for stored in chunks:
                    last = stored
            end = max(scan.collector.end, 0)
    record_bytes = len(last.body) / last.records if last is not None and last.records else 0.0
    start = end if not first else min(first[0], end)
    return Bounds(start=start, end=end, record_bytes=record_bytes)


def _messages(stored: Stored) -> Iterator[Message]:
    yield from decode_wire(stored.wire())


async def find_timestamp(
    conn: Connection, stream: str, timestamp_us: int, *, start: int
) -> tuple[int, int] | None:
    """(offset, timestamp) of the first message at or after ``start`` whose canonical timestamp
    is >= ``timestamp_us``, or None.

    RabbitMQ's own index is by chunk time (the broker's clock when stored), not by the messages'
    timestamps (creation-time, which producers set). The scan starts at the first chunk stored
    ``TIMESTAMP_SKEW_MS`` before the time asked for (Subscribe TIMESTAMP) and reads on until a
    message qualifies: exact unless a producer stamps messages more than that ahead of the
    broker's clock."""
    spec = rs.OffsetSpec.timestamp(max(0, timestamp_us // 1000 - TIMESTAMP_SKEW_MS))
    # aclosing: the scan's generator is closed on the early return too, not left to the GC
    async with scanning(conn, stream, spec) as scan, aclosing(scan.chunks()) as chunks:
        async for stored in chunks:
            for m in _messages(stored):
                if m.offset >= start and m.timestamp_us >= timestamp_us:
                    return m.offset, m.timestamp_us
    return None


async def max_timestamp(conn: Connection, stream: str, *, start: int) -> tuple[int, int] | None:
    """(offset, timestamp) of the first message with the largest timestamp: a full scan."""
    best: tuple[int, int] | None = None
    async with scanning(conn, stream, at(start)) as scan, aclosing(scan.chunks()) as chunks:
        async for stored in chunks:
            for m in _messages(stored):
                if m.offset >= start and (best is None or m.timestamp_us > best[1]):
                    best = (m.offset, m.timestamp_us)
    return best


__all__ = [
    "Bounds",
    "Collector",
    "Scan",
    "find_timestamp",
    "max_timestamp",
    "probe",
    "scanning",
]
