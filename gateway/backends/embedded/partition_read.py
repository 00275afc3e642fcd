"""Reading a partition: which stored batches a read returns (whole or trimmed, within its
budgets, up to what its isolation may see, without what a committed-only reader skips), and
the wait of a long poll until there is something to return."""

from __future__ import annotations

from bisect import bisect_right
from typing import Protocol

import trio

from gateway.model import Isolation, MessageBatch, Read, ReadResult, WireBatch

from .batch_format import STORED_FORMATS
from .segment import Segment
from .txn_index import TxnIndex


class Partition(Protocol):
    """What reading needs of a partition (partition.py's, which calls these)."""

    segments: list[Segment]
    bases: list[int]
    txns: TxnIndex
    appended: trio.Event

    @property
    def next_offset(self) -> int: ...
    @property
    def log_start(self) -> int: ...
    @property
    def stable(self) -> int: ...
    def visible(self, isolation: Isolation) -> int: ...
    def check_open(self) -> None: ...
    def check_range(self, offset: int) -> None: ...


def read_at_end(part: Partition, cmd: Read) -> ReadResult | None:
    """The answer to a read at the end of the partition that does not wait (most partitions of
    a wide Fetch), without range checks, transaction or batch lookups; None for any other."""
    nxt = part.segments[-1].next_offset
    if cmd.offset != nxt or cmd.max_wait_ms > 0 or part.txns.open:
        return None
    part.check_open()  # (the end is always in range)
    return ReadResult(
        batches=(), high_watermark=nxt, log_start_offset=part.log_start, last_stable_offset=nxt
    )


def has_bytes(
    part: Partition, offset: int, min_bytes: int, isolation: Isolation = Isolation.UNCOMMITTED
) -> bool:
    if part.visible(isolation) <= offset:
        return False
    if min_bytes <= 1:
        return True
    i = max(0, bisect_right(part.bases, offset) - 1)
    seg = part.segments[i]
    available = seg.size - seg.locate(offset) + sum(s.size for s in part.segments[i + 1 :])
    return available >= min_bytes


async def wait_for(
    part: Partition, offset: int, min_bytes: int, max_wait_ms: int, isolation: Isolation
) -> float:
    start = trio.current_time()
    with trio.move_on_at(start + max_wait_ms / 1000):
        while True:
            await part.appended.wait()
            part.check_open()
            if offset < part.log_start or has_bytes(part, offset, min_bytes, isolation):
                break
    return trio.current_time() - start


def read_batches(
    part: Partition,
    offset: int,
    max_messages: int,
    max_bytes: int,
    whole: bool,
    end: int,
    isolation: Isolation,
) -> tuple[MessageBatch, ...]:
    out: list[MessageBatch] = []
    i = max(0, bisect_right(part.bases, offset) - 1)
    pos = part.segments[i].locate(offset)
    clean = isolation is Isolation.CLEAN
    limited = end < part.next_offset
    while i < len(part.segments) and max_messages > 0 and (max_bytes > 0 or not out):
        seg = part.segments[i]
        skipped = False
        for h, payload in seg.read(pos, max_bytes, max_messages, force=not out):
            if limited and h.base_offset >= end:
                return tuple(out)  # the first batch of an open transaction
            if clean and h.attributes and part.txns.skipped(h):
                pos += h.size
                skipped = True
                continue
            wire = WireBatch(
                format=STORED_FORMATS[h.format_id],
                data=payload,
                count=h.records,
                base_offset=h.base_offset,
                first_timestamp_us=h.first_timestamp_us,
                max_timestamp_us=h.max_timestamp_us,
            )
            skip = max(0, offset - h.base_offset)
            take = min(h.records - skip, max_messages)
            if whole or (skip == 0 and take == h.records):
                out.append(MessageBatch(wire=wire))
            else:  # the client asked from inside the batch, or for fewer records
                out.append(MessageBatch(wire.format.decode(wire)[skip : skip + take]))
            max_messages -= take
            max_bytes -= h.size
            pos += h.size
        if pos < seg.size:
            if skipped:
                continue  # what was skipped used no budget: read on from past it
            break  # a budget ran out inside this segment: the next one must wait
        i += 1
        pos = 0
    return tuple(out)


async def wait_past_skipped(
    part: Partition, cmd: Read, waited: float
) -> tuple[tuple[MessageBatch, ...], float]:
    """A CLEAN long poll that found only markers and aborted batches: wait for what comes
    after them (else a subscription would read them again and again), until its deadline."""
    start = trio.current_time()
    batches: tuple[MessageBatch, ...] = ()
    with trio.move_on_at(start + max(0.0, cmd.max_wait_ms / 1000 - waited)):
        while not batches:
            await part.appended.wait()
            part.check_range(cmd.offset)
            batches = read_batches(
                part, cmd.offset, cmd.max_messages, cmd.max_bytes, cmd.whole_batches,
                part.stable, Isolation.CLEAN,
            )  # fmt: skip
    return batches, trio.current_time() - start


__all__ = ["has_bytes", "read_batches", "wait_for", "wait_past_skipped"]
