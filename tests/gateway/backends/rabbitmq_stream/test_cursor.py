"""What the RabbitMQ backend asks of the broker to read and to follow a stream, without a broker:
a ``Cursor`` goes on with Credit where the last read stopped (one Subscribe for a whole catch-up),
and a tail nobody uses stops asking for chunks, then is reopened at its next use."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

import trio
import trio.testing

from gateway.backends.rabbitmq_stream import tail as tail_module
from gateway.backends.rabbitmq_stream.conn import Connection
from gateway.backends.rabbitmq_stream.cursor import CURSOR_CREDIT, Cursors
from gateway.backends.rabbitmq_stream.streams import tails
from gateway.backends.rabbitmq_stream.tail import TAIL_CREDIT, Tail
from gateway.backends.watchdog import Watchdog
from protocols import rabbitmq_stream as rs
from protocols.rabbitmq_stream import OffsetType, ResponseCode
from protocols.rabbitmq_stream.chunk import ChunkType, SimpleEntry, encode_chunk

LIMIT_S = 5


def user_chunk(chunk_id: int, records: int = 2) -> bytes:
    entries = [SimpleEntry(b"m%d" % (chunk_id + i)) for i in range(records)]
    return encode_chunk(entries, chunk_id=chunk_id, timestamp_ms=1)


def tracking_chunk(chunk_id: int) -> bytes:
    return encode_chunk([SimpleEntry(b"t")], chunk_id=chunk_id, timestamp_ms=1,
                        chunk_type=ChunkType.TRACKING_DELTA)  # fmt: skip


@dataclass
class Sub:
    subscriber: Any
    position: int = 0  # index of the next chunk to deliver
    credit: int = 0


@dataclass
class Settings:
    request_timeout_s: float = 5.0


class FakeBroker:
    """One stream's chunks (encoded, in order), delivered to subscriptions as credit allows:
    the part of a connection that tails and cursors use."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks
        self.subs: dict[int, Sub] = {}
        self.subscribes: list[rs.Subscribe] = []
        self.unsubscribed: list[int] = []
        self.credits: list[tuple[int, int]] = []
        self.watchdog = Watchdog()
        self.settings = Settings()
        self.alive = True
        self.outbox = self  # Credit goes through conn.outbox.credit

    def conn(self) -> Connection:
        return cast(Connection, self)

    def add_subscriber(self, subscriber: Any) -> int:
        sid = max(self.subs, default=-1) + 1 + len(self.unsubscribed)
        self.subs[sid] = Sub(subscriber)
        return sid

    def remove_subscriber(self, sid: int) -> None:
        if self.subs.pop(sid, None) is not None:
            self.unsubscribed.append(sid)

    async def call(self, make: Any) -> rs.Frame:
        request = make(1)
        assert isinstance(request, rs.Subscribe)
        self.subscribes.append(request)
        sub = self.subs[request.subscription_id]
        offset = (request.offset.value or 0) if request.offset.type == OffsetType.OFFSET else 0
        sub.position = self._index_of(offset)
        sub.credit = request.credit
        self._pump(request.subscription_id)
        return rs.SubscribeResponse(correlation_id=1, code=ResponseCode.OK)

    def credit(self, sid: int, credit: int) -> None:
        self.credits.append((sid, credit))
        self.subs[sid].credit += credit
        self._pump(sid)

    def append(self, chunk: bytes) -> None:
        self.chunks.append(chunk)
        for sid in list(self.subs):
            self._pump(sid)

    def _index_of(self, offset: int) -> int:
        for i, chunk in enumerate(self.chunks):
            _, end, _ = tail_module.parse(chunk)
            if end > offset:
                return i
        return len(self.chunks)

    def _pump(self, sid: int) -> None:
        sub = self.subs.get(sid)
        while sub is not None and sub.credit > 0 and sub.position < len(self.chunks):
            sub.credit -= 1
            sub.position += 1
            sub.subscriber.deliver(self.chunks[sub.position - 1])


@dataclass
class Reader:
    """Reads as ``Data._gather`` does: what the last read brought is used up first."""

    cursors: Cursors
    until: int
    offsets: list[int] = field(default_factory=list)

    async def read_all(self, offset: int, max_records: int = 3) -> list[int]:
        while offset < self.until:
            found, _ = await self.cursors.read(
                "s", offset, max_bytes=1 << 20, max_records=max_records, until=self.until
            )
            if not found:  # only tracking chunks left
                break
            for stored in found:
                self.offsets.append(stored.chunk_id)
            offset = found[-1].end
        return self.offsets


def stream_of(chunks: int) -> list[bytes]:
    """User chunks of two records each, a tracking chunk (one offset) after every fifth."""
    out, offset = [], 0
    for i in range(chunks):
        out.append(user_chunk(offset))
        offset += 2
        if i % 5 == 4:
            out.append(tracking_chunk(offset))
            offset += 1
    return out


async def test_a_catch_up_is_one_subscription() -> None:
    broker = FakeBroker(stream_of(40))
    end = tail_module.parse(broker.chunks[-1])[1]
    cursors = Cursors(broker.conn())
    with trio.fail_after(LIMIT_S):
        got = await Reader(cursors, end).read_all(0)
    expected = [tail_module.parse(c)[0] for c in broker.chunks if tail_module.parse(c)[2]]
    assert got == expected
    assert len(broker.subscribes) == 1
    assert broker.unsubscribed == []
    # Credit only as the reads go on: never more than CURSOR_CREDIT chunks ahead
    assert all(credit <= CURSOR_CREDIT for _, credit in broker.credits)


async def test_a_read_elsewhere_subscribes_again() -> None:
    broker = FakeBroker(stream_of(20))
    end = tail_module.parse(broker.chunks[-1])[1]
    cursors = Cursors(broker.conn())
    with trio.fail_after(LIMIT_S):
        first, started = await cursors.read("s", 0, max_bytes=1 << 20, max_records=1, until=end)
        assert started == 0 and first[0].chunk_id == 0
        again, started = await cursors.read("s", 4, max_bytes=1 << 20, max_records=1, until=end)
    assert again[0].chunk_id == 4 and started == 4  # a new subscription tells where it began
    assert len(broker.subscribes) == 2 and broker.unsubscribed == [0]


async def test_a_cursor_read_continued_does_not_claim_data_is_gone() -> None:
    """A read that goes on after a tracking chunk starts at an offset the next user chunk is
    above: that is no gap (only a fresh subscription's first chunk tells retention dropped
    something)."""
    broker = FakeBroker([user_chunk(0), tracking_chunk(2)])
    cursors = Cursors(broker.conn())
    with trio.fail_after(LIMIT_S):
        found, _ = await cursors.read("s", 0, max_bytes=1 << 20, max_records=1, until=3)
        assert [c.chunk_id for c in found] == [0]
        broker.append(user_chunk(3))  # delivered at once: the cursor has credit left
        found, first = await cursors.read("s", 2, max_bytes=1 << 20, max_records=1, until=5)
    assert [c.chunk_id for c in found] == [3] and first == -1
    assert len(broker.subscribes) == 1


async def test_an_unused_tail_stops_asking_for_chunks() -> None:
    broker = FakeBroker([])
    tail = Tail(broker.conn(), "s")
    tail.sid = broker.add_subscriber(tail)
    broker.subs[tail.sid].credit = TAIL_CREDIT
    broker.append(user_chunk(0))
    assert broker.credits == [(tail.sid, 1)]  # used just now: topped up
    tail.used_at -= tail_module.TAIL_IDLE_S + 1  # nobody since
    for i in range(1, TAIL_CREDIT + 5):
        broker.append(user_chunk(2 * i))
    assert broker.credits == [(tail.sid, 1)]
    assert tail.end == 2 * TAIL_CREDIT + 2  # what the credit allowed came; the rest waits
    assert tail.stale and not tail.usable


async def test_a_tail_used_again_asks_for_chunks_again() -> None:
    broker = FakeBroker([])
    tail = Tail(broker.conn(), "s")
    tail.sid = broker.add_subscriber(tail)
    broker.subs[tail.sid].credit = TAIL_CREDIT
    tail.used_at -= tail_module.TAIL_IDLE_S + 1
    for i in range(3):
        broker.append(user_chunk(2 * i))
    assert broker.credits == [] and tail.usable
    tail.touch()
    assert broker.credits == [(tail.sid, 3)] and tail.credit == TAIL_CREDIT


async def test_a_stale_tail_is_reopened_and_let_go() -> None:
    made: list[Tail] = []
    broker = FakeBroker([])

    async def make(conn: Connection, stream: str) -> Tail:
        tail = Tail(conn, stream)
        tail.sid = broker.add_subscriber(tail)
        made.append(tail)
        return tail

    kept = tails(broker.conn())
    kept._make = make
    first = await kept.get("s")
    first.stale = True
    second = await kept.get("s")
    assert second is not first and made == [first, second]
    assert broker.unsubscribed == [first.sid] and first.error is not None


async def test_a_read_of_no_records_still_waits_for_some() -> None:
    """``max_records=0`` (the Kafka listener's wait for data) is never full with nothing."""
    broker = FakeBroker([])
    cursors = Cursors(broker.conn())
    with trio.fail_after(LIMIT_S):
        async with trio.open_nursery() as nursery:

            async def read() -> None:
                found, _ = await cursors.read("s", 0, max_bytes=0, max_records=0, until=2)
                assert [c.chunk_id for c in found] == [0]

            nursery.start_soon(read)
            await trio.testing.wait_all_tasks_blocked()
            broker.append(user_chunk(0))
