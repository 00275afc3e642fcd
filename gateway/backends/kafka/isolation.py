"""Reads around Kafka transactions on the Kafka backend: which fetched batches a read returns.

``Isolation.UNCOMMITTED`` and ``COMMITTED`` return what the broker answered, transaction markers
(control batches) included: a Kafka client needs them (read_committed drops an aborted
transaction's batches until its producer's abort marker). ``CLEAN`` is the read_committed
filtering of a Kafka consumer done here, for the protocols that cannot say "skip these"
(Kafka's ``CompletedFetch``): walking the batches in offset order, an aborted transaction of the
broker's list joins the set of aborted producers once a batch reaches its first offset; a
transactional batch of a producer in the set is dropped; that producer's abort marker takes it
out of the set again; every control batch is dropped.

Tansu 0.6.0 writes the markers right but never lists aborted transactions in Fetch (measured:
``aborted_transactions`` is empty at either isolation level), so with ``?broker=tansu`` the list
is made here from the markers (``with_aborted``): a producer's transactional batches after its
previous marker belong to the transaction its next marker ends; an abort marker makes that an
aborted transaction (the producer, its first batch's offset). Below the last stable offset every
transaction has ended, but its marker may lie past the fetched batches: up to
``LOOK_AHEAD_BYTES`` more are fetched to find it, and a read stops before a batch whose fate is
still not known.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from typing import Final

from gateway.backends.kafka.fetch import Fetched, Fetcher
from protocols.kafka import RecordBatchHeader, decode_records

LOOK_AHEAD_BYTES: Final = 4 << 20

_ABORT: Final = 0  # a control record's type (key: int16 version, int16 type): 0 abort, 1 commit

Batch = tuple[RecordBatchHeader, memoryview]


def is_abort_marker(header: RecordBatchHeader, view: memoryview) -> bool:
    if not header.is_control:
        return False
    for record in decode_records(header, view):
        key = record.key or b""
        return len(key) >= 4 and int.from_bytes(key[2:4], "big", signed=True) == _ABORT
    return False


def committed_only(batches: Iterable[Batch], aborted: Iterable[tuple[int, int]]) -> Iterator[Batch]:
    """The batches of committed transactions and of non-transactional producers, no markers;
    ``aborted``: (producer id, first offset) of the aborted transactions the batches overlap."""
    pending = sorted(aborted, key=lambda a: a[1])
    aborting: set[int] = set()
    for header, view in batches:
        if header.producer_id >= 0:
            while pending and pending[0][1] <= header.last_offset:
                aborting.add(pending.pop(0)[0])
            if is_abort_marker(header, view):
                aborting.discard(header.producer_id)
            elif header.is_transactional and header.producer_id in aborting:
                continue
        if not header.is_control:
            yield header, view


class _Markers:
    """The aborted transactions that the markers of the batches walked so far show."""

    def __init__(self) -> None:
        self.aborted: list[tuple[int, int]] = []
        self.pending: dict[int, int] = {}  # producer id -> first offset, its marker not seen

    def walk(self, batches: Iterable[Batch]) -> None:
        for header, view in batches:
            if header.producer_id < 0 or not header.is_transactional:
                continue
            if header.is_control:
                first = self.pending.pop(header.producer_id, None)
                if first is not None and is_abort_marker(header, view):
                    self.aborted.append((header.producer_id, first))
            else:
                self.pending.setdefault(header.producer_id, header.base_offset)


async def with_aborted(
    fetcher: Fetcher, name: str, partition: int, leader: int, fetched: Fetched
) -> Fetched:
    """``fetched`` (read_committed, from a broker that lists no aborted transactions) with the
    aborted transactions its markers show, cut before a batch whose fate stays unknown."""
    markers = _Markers()
    markers.walk(fetched.batches)
    if markers.pending and fetched.batches:
        ahead = await fetcher.fetch(
            name, partition, fetched.batches[-1][0].last_offset + 1, leader,
            max_bytes=LOOK_AHEAD_BYTES,
        )  # fmt: skip
        markers.walk(ahead.batches)
    batches = fetched.batches
    if markers.pending:
        unknown = min(markers.pending.values())
        batches = tuple((h, v) for h, v in batches if h.base_offset < unknown)
    aborted = tuple(sorted(markers.aborted, key=lambda a: a[1]))
    return dataclasses.replace(fetched, batches=batches, aborted=aborted)


__all__ = ["LOOK_AHEAD_BYTES", "committed_only", "is_abort_marker", "with_aborted"]
