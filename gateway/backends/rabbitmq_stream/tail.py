"""The end of one RabbitMQ stream, followed live: a ``Tail`` is a subscription at LAST with
``chunk_selector=all`` that the backend keeps per partition stream it writes or reads.

It gives three things RabbitMQ 3.10 has no request for (no StreamStats, no ResolveOffsetSpec,
rabbitmq-stream.md §10):

* the next offset (``end``): Subscribe answers first, then sends every chunk the credit allows
  before it reads our next frame, so a Subscribe followed by a cheap request (the "barrier", a
  QueryOffset) proves that whatever came before the barrier's answer is all there was (observed
  on 3.10.8: Subscribe LAST credit 1 + barrier always gives [SubscribeResponse, Deliver, answer],
  and on an empty stream [SubscribeResponse, answer]). Tracking chunks (StoreOffset writes them)
  take offsets too: ``chunk_selector=all`` delivers them, so ``end`` counts them (user messages
  then have gaps in their offsets, as on RabbitMQ itself);
* the recent user chunks (``chunks``, about 1 MiB): reads near the end (every live consumer) are
  served from memory, and long-polls wake on ``changed``; a read from further back keeps what it
  fetched beyond what it returned (``ahead``) for the next read to go on with;
* where an append landed. RabbitMQ assigns offsets and confirms publishing ids, not offsets, so an
  append registers its entries' bytes (``expect``) before its Publish goes out and the tail finds
  them in the chunks that follow: the first chunk entries equal to ours, in order, skipping
  entries of other writers (RabbitMQ stores entries exactly as published, §6). Exact as long as
  no other writer sends byte-identical entries at the same moment; a batch that another writer
  interleaves with reports the offset of its first entry.

A tail costs RabbitMQ a delivery of every chunk written to its stream (a read of the segment, a
Deliver, a Credit back): measured behind the gateway, a tail on a stream that only RabbitMQ
Stream clients publish to (their appends need no offsets) roughly doubled the broker's CPU per
message. So a tail only asks for chunks while it is wanted: in use (``users``: an append it
locates, a read, a long-poll), or used in the last ``TAIL_IDLE_S``. An unwanted tail gets no
more credit; once it has none left its ``end`` may be behind, so it is ``stale``: no longer
``usable``, and the next use opens a fresh one at LAST (one Subscribe and a barrier).
"""

from __future__ import annotations

import contextlib
import struct
import time
from collections import deque
from dataclasses import dataclass
from typing import Final

import structlog
import trio

from gateway.backends.rabbitmq_stream.conn import Connection, check
from gateway.model import GatewayError, WireBatch
from gateway.translate.rabbitmq_stream.messages import WIRE_FORMAT, record_count
from protocols import rabbitmq_stream as rs
from protocols._wire import RemoteProtocolError
from protocols.rabbitmq_stream import OffsetType
from protocols.rabbitmq_stream.chunk import (
    ChunkType,
    DeliveredChunk,
    Entry,
    decode_entries,
    encode_entry,
    read_chunk,
)

log = structlog.get_logger("streamgate.backend.rabbitmq_stream")

TAIL_CREDIT: Final = 16  # chunks in flight to a tail; topped up one per chunk while wanted
# A tail nobody used for this long stops asking for chunks (see ``Tail.deliver``).
TAIL_IDLE_S: Final = 5.0
CACHE_BYTES: Final = 1 << 20  # recent user chunks kept per tail
BARRIER_REFERENCE: Final = "__streamgate_barrier"  # a QueryOffset nobody stores under
ALL_CHUNKS: Final = (("chunk_selector", "all"),)
_SUB_BATCH = struct.Struct(">BHII")  # flags, records, uncompressed length, length (§6)
_LENGTH = struct.Struct(">I")


@dataclass(frozen=True, slots=True)
class Stored:
    """One user chunk as RabbitMQ delivered it: its entries' bytes, as published."""

    chunk_id: int
    records: int
    entries: int
    timestamp_ms: int
    body: bytes

    @property
    def end(self) -> int:
        return self.chunk_id + self.records

    def wire(self) -> WireBatch:
        ts = self.timestamp_ms * 1000
        return WireBatch(format=WIRE_FORMAT, data=self.body, count=self.records,
                         base_offset=self.chunk_id, first_timestamp_us=ts,
                         max_timestamp_us=ts, entries=self.entries)  # fmt: skip

    def decode(self) -> tuple[Entry, ...]:
        return decode_entries(self.body, self.entries)

    def subset(self, entries: list[Entry], base_offset: int) -> WireBatch:
        """Some of its entries (from ``base_offset`` on), in the same wire form."""
        ts = self.timestamp_ms * 1000
        return WireBatch(format=WIRE_FORMAT, data=b"".join(encode_entry(e) for e in entries),
                         count=sum(record_count(e) for e in entries), base_offset=base_offset,
                         first_timestamp_us=ts, max_timestamp_us=ts)  # fmt: skip


def parse(chunk: DeliveredChunk) -> tuple[int, int, Stored | None]:
    """(chunk id, next offset after the chunk, the chunk when it is a user chunk)."""
    header, body = read_chunk(chunk)
    if header.chunk_type != ChunkType.USER:
        return header.chunk_id, header.next_offset, None
    stored = Stored(header.chunk_id, header.records, header.entries, header.timestamp_ms,
                    bytes(body))  # fmt: skip
    return header.chunk_id, header.next_offset, stored


def barrier(correlation_id: int, stream: str) -> rs.QueryOffset:
    """A cheap request: its answer comes after every Deliver the frames before it caused."""
    return rs.QueryOffset(correlation_id=correlation_id, reference=BARRIER_REFERENCE, stream=stream)


class Expectation:
    """The entries of one append (as a chunk holds them), to be found in the chunks that follow
    its Publish."""

    __slots__ = ("base", "blob", "done", "error", "found_bytes", "found_records", "records",
                 "timestamp_ms")  # fmt: skip

    def __init__(self, blob: bytes, records: int) -> None:
        self.blob = blob
        self.records = records
        self.found_bytes = 0
        self.found_records = 0
        self.base = -1  # offset of the first entry
        self.timestamp_ms = 0
        self.done = trio.Event()
        self.error: GatewayError | None = None


def _entry_end(body: bytes, pos: int) -> tuple[int, int]:
    """(end, records) of the entry at ``pos`` of a chunk body (§6: simple or sub-batch)."""
    if body[pos] & 0x80:
        _, records, _, size = _SUB_BATCH.unpack_from(body, pos)
        return pos + _SUB_BATCH.size + size, records
    return pos + 4 + _LENGTH.unpack_from(body, pos)[0], 1


class Tail:
    def __init__(self, conn: Connection, stream: str) -> None:
        self.conn = conn
        self.stream = stream
        self.sid = -1
        self.end = -1  # the next offset RabbitMQ will give; -1 until known
        self.chunks: deque[Stored] = deque()
        self.cached_bytes = 0
        self.ahead: list[Stored] = []  # the last chunks read from further back (read-ahead)
        self.error: GatewayError | None = None
        self.changed = trio.Event()
        self.users = 0  # reads and appends using it now (not evicted meanwhile)
        self.waiters = 0  # long-polls waiting on ``changed`` (may be evicted: they wake)
        self.credit = TAIL_CREDIT  # chunks RabbitMQ may still send without our Credit
        self.stale = False  # out of credit while unwanted: ``end`` may be behind
        self.used_at = time.monotonic()  # real time, as every bound on the broker
        self._expected: deque[Expectation] = deque()

    @classmethod
    async def open(cls, conn: Connection, stream: str) -> Tail:
        tail = cls(conn, stream)
        tail.sid = conn.add_subscriber(tail)
        try:
            subscribed = conn.start(
                lambda c: rs.Subscribe(
                    correlation_id=c, subscription_id=tail.sid, stream=stream,
                    offset=rs.OffsetSpec(type=OffsetType.LAST), credit=TAIL_CREDIT,
                    properties=ALL_CHUNKS,
                )
            )  # fmt: skip
            answered = conn.start(lambda c: barrier(c, stream))
            check(await subscribed.result(), f"Subscribe to {stream!r}")
            await answered.result()
        except BaseException:
            conn.remove_subscriber(tail.sid)
            raise
        if tail.error is not None:
            raise tail.error
        tail.end = max(tail.end, 0)  # nothing before the barrier's answer: an empty stream
        return tail

    @property
    def usable(self) -> bool:
        return self.error is None and not self.stale and self.conn.alive

    @property
    def idle(self) -> bool:
        return not self.users and not self._expected

    @property
    def wanted(self) -> bool:
        return bool(self.users or self.waiters or self._expected) or (
            time.monotonic() - self.used_at < TAIL_IDLE_S
        )

    def touch(self) -> None:
        """About to be used (by a usable tail's user): asks for chunks again if it stopped."""
        self.used_at = time.monotonic()
        if self.credit < TAIL_CREDIT and not self.stale and self.error is None:
            grant, self.credit = TAIL_CREDIT - self.credit, TAIL_CREDIT
            self.conn.outbox.credit(self.sid, grant)

    def drop(self, why: GatewayError) -> None:
        self.conn.remove_subscriber(self.sid)
        self.closed(why)

    def covering(self, offset: int) -> list[Stored] | None:
        """The kept chunks holding ``offset`` and after (the recent ones, else the read-ahead),
        or None when none starts at or before it."""
        chunks = self.chunks
        if chunks and chunks[0].chunk_id <= offset:
            return [c for c in chunks if c.end > offset]
        ahead = self.ahead
        if ahead and ahead[0].chunk_id <= offset < ahead[-1].end:
            return [c for c in ahead if c.end > offset]
        return None

    def keep_ahead(self, chunks: list[Stored]) -> None:
        """Chunks read from further back than the recent ones: the next read goes on there."""
        self.ahead = chunks

    # --- appends ---------------------------------------------------------------------------------

    def expect(self, blob: bytes, records: int) -> Expectation:
        expectation = Expectation(blob, records)
        if self.error is not None:
            expectation.error = self.error
            expectation.done.set()
        else:
            self._expected.append(expectation)
        return expectation

    def abandon(self, expectation: Expectation) -> None:
        """The append failed: its entries are not (all) there, stop looking for them. Removed
        now, not when a chunk comes: a tail that still expects something is never idle."""
        with contextlib.suppress(ValueError):
            self._expected.remove(expectation)
        expectation.done.set()

    def _match(self, stored: Stored) -> None:
        """Find the waiting appends' entries in a chunk, in order: one comparison of bytes for
        what is ours, entry by entry only past another writer's entries."""
        expected = self._expected
        body = stored.body
        pos = consumed = 0
        offset = stored.chunk_id
        while pos < len(body):
            if not expected:
                return
            head = expected[0]
            at = head.found_bytes
            n = min(len(body) - pos, len(head.blob) - at)
            piece = head.blob if at == 0 and n == len(head.blob) else head.blob[at : at + n]
            if body.startswith(piece, pos):
                # The rest of the chunk, or the rest of the append: ours.
                if pos + n == len(body):
                    records = stored.records - consumed
                else:
                    records = head.records - head.found_records
            else:
                end, records = _entry_end(body, pos)
                n = end - pos
                if not body.startswith(head.blob[at : at + n], pos):
                    pos, consumed, offset = end, consumed + records, offset + records
                    continue  # another writer's entry
            if head.found_bytes == 0:
                head.base, head.timestamp_ms = offset, stored.timestamp_ms
            head.found_bytes += n
            head.found_records += records
            if head.found_bytes >= len(head.blob):
                expected.popleft()
                head.done.set()
            pos, consumed, offset = pos + n, consumed + records, offset + records

    # --- the connection's callbacks (Subscriber) -------------------------------------------------

    def deliver(self, chunk: DeliveredChunk) -> None:
        try:
            _, end, stored = parse(chunk)
            if stored is not None and self._expected:
                self._match(stored)
        except RemoteProtocolError as exc:
            log.error("corrupt chunk from RabbitMQ", stream=self.stream, error=str(exc))
            self.conn.close()
            return
        self.credit -= 1
        if self.wanted:
            self.credit += 1
            self.conn.outbox.credit(self.sid, 1)
        elif self.credit <= 0:
            self.stale = True  # RabbitMQ may hold more chunks: ``end`` can no longer be trusted
        self.end = max(self.end, end)
        if stored is not None:
            self.chunks.append(stored)
            self.cached_bytes += len(stored.body)
            while self.cached_bytes > CACHE_BYTES and len(self.chunks) > 1:
                self.cached_bytes -= len(self.chunks.popleft().body)
        self.pulse()

    def closed(self, why: GatewayError) -> None:
        if self.error is None:
            self.error = why
        while self._expected:
            expectation = self._expected.popleft()
            expectation.error = why
            expectation.done.set()
        self.pulse()

    def pulse(self) -> None:
        """Wake whoever waits on ``changed``."""
        self.changed.set()
        self.changed = trio.Event()


__all__ = ["ALL_CHUNKS", "Expectation", "Stored", "Tail", "barrier", "parse"]
