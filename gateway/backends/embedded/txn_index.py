"""Kafka transactions as one partition sees them (KIP-98): which producers have a transaction
open here (from the offset of its first batch), and which transactions were aborted (first
offset to marker offset, per producer).

The last stable offset is the first offset of the oldest open transaction (the high watermark
when none is open): read_committed readers stop there. A batch of an aborted transaction is one
whose producer has an aborted range containing its offset; readers of other protocols skip it,
Kafka read_committed readers get the ranges their fetch overlaps (Kafka's .txnindex) and skip
the records themselves.

Rebuilt like the producer state: from a snapshot (``txns.snapshot``, written when a segment is
sealed, valid as of the active segment's base offset) plus the headers of the batches after it
(stored batches carry the transactional, control and commit bits in their header attributes).
Snapshot, little-endian: ``"SGT1" u64 offset u32 open`` then per open transaction ``i64
producer u64 first_offset``, ``u32 aborted`` then per aborted one ``i64 producer u64 first
u64 last``, then a CRC32C of everything before it.
"""

from __future__ import annotations

import contextlib
import os
import struct
from bisect import bisect_left, insort
from typing import Final, NamedTuple

import crc32c

from .batch_format import ATTR_COMMIT, ATTR_CONTROL, ATTR_TRANSACTIONAL, BatchHeader

SNAPSHOT: Final = "txns.snapshot"
_MAGIC: Final = b"SGT1"
_HEAD = struct.Struct("<4sQI")
_COUNT = struct.Struct("<I")
_OPEN = struct.Struct("<qQ")
_ABORTED = struct.Struct("<qQQ")
_CRC = struct.Struct("<I")


class Aborted(NamedTuple):
    last: int  # the abort marker's offset: ranges sort by it, as Kafka's index
    first: int
    producer_id: int


class TxnIndex:
    __slots__ = ("aborted", "by_producer", "open")

    def __init__(self) -> None:
        self.open: dict[int, int] = {}  # producer id -> first offset of its open transaction
        self.aborted: list[Aborted] = []  # by marker offset
        self.by_producer: dict[int, list[tuple[int, int]]] = {}  # producer -> [(first, last)]

    def stable(self, next_offset: int) -> int:
        """The last stable offset."""
        return min(self.open.values()) if self.open else next_offset

    def begin(self, producer_id: int, offset: int) -> None:
        """A transactional batch at ``offset``: opens the producer's transaction if none is."""
        self.open.setdefault(producer_id, offset)

    def end(self, producer_id: int, marker_offset: int, commit: bool) -> None:
        first = self.open.pop(producer_id, None)
        if first is not None and not commit:
            self._add(Aborted(marker_offset, first, producer_id))

    def _add(self, a: Aborted) -> None:
        insort(self.aborted, a)
        self.by_producer.setdefault(a.producer_id, []).append((a.first, a.last))

    def replay(self, h: BatchHeader) -> None:
        if h.attributes & ATTR_CONTROL:
            self.end(h.producer_id, h.base_offset, bool(h.attributes & ATTR_COMMIT))
        elif h.attributes & ATTR_TRANSACTIONAL:
            self.begin(h.producer_id, h.base_offset)

    def skipped(self, h: BatchHeader) -> bool:
        """Whether a reader of committed data only skips this stored batch (a marker, or a
        batch of an aborted transaction)."""
        if not h.attributes:
            return False
        if h.attributes & ATTR_CONTROL:
            return True
        ranges = self.by_producer.get(h.producer_id)
        return ranges is not None and any(f <= h.base_offset <= last for f, last in ranges)

    def aborted_between(self, start: int, end: int) -> tuple[tuple[int, int], ...]:
        """(producer id, first offset) of the aborted transactions that overlap [start, end)."""
        i = bisect_left(self.aborted, (start,))
        return tuple((a.producer_id, a.first) for a in self.aborted[i:] if a.first < end)

    def trim(self, log_start: int) -> None:
        """Forget aborted ranges wholly below the log start (retention, DeleteRecords)."""
        i = bisect_left(self.aborted, (log_start,))
        if i:
            del self.aborted[:i]
            self.by_producer = {}
            for a in self.aborted:
                self.by_producer.setdefault(a.producer_id, []).append((a.first, a.last))

    # --- snapshot ----------------------------------------------------------------------------

    def dump(self, offset: int) -> bytes:
        parts = [_HEAD.pack(_MAGIC, offset, len(self.open))]
        parts.extend(_OPEN.pack(pid, first) for pid, first in self.open.items())
        parts.append(_COUNT.pack(len(self.aborted)))
        parts.extend(_ABORTED.pack(a.producer_id, a.first, a.last) for a in self.aborted)
        body = b"".join(parts)
        return body + _CRC.pack(crc32c.crc32c(body))

    def write_snapshot(self, directory: str, offset: int) -> None:
        path = os.path.join(directory, SNAPSHOT)
        with open(path + ".tmp", "wb") as f:
            f.write(self.dump(offset))
        os.replace(path + ".tmp", path)

    @classmethod
    def read_snapshot(cls, directory: str) -> tuple[TxnIndex, int] | None:
        """(index, offset it is valid for), or None when missing or damaged."""
        try:
            with open(os.path.join(directory, SNAPSHOT), "rb") as f:
                data = f.read()
        except OSError:
            return None
        with contextlib.suppress(struct.error):
            if len(data) < _HEAD.size + _COUNT.size + _CRC.size:
                return None
            body = data[: -_CRC.size]
            if crc32c.crc32c(body) != _CRC.unpack_from(data, len(body))[0]:
                return None
            magic, offset, n = _HEAD.unpack_from(body)
            if magic != _MAGIC:
                return None
            out = cls()
            pos = _HEAD.size
            for _ in range(n):
                pid, first = _OPEN.unpack_from(body, pos)
                out.open[pid] = first
                pos += _OPEN.size
            (m,) = _COUNT.unpack_from(body, pos)
            pos += _COUNT.size
            for _ in range(m):
                pid, first, last = _ABORTED.unpack_from(body, pos)
                out._add(Aborted(last, first, pid))
                pos += _ABORTED.size
            if pos == len(body):
                return out, offset
        return None


__all__ = ["SNAPSHOT", "Aborted", "TxnIndex"]
