"""Opening a partition directory after a clean shutdown or a crash.

Sealed segments load their index files (rebuilt by a verifying scan when missing, damaged, or
not matching the log). The active segment is always scanned batch by batch, checking length,
offsets and CRC32C (scan.py). A torn tail (a crash in the middle of a write) is cut off: appends
continue right after the last intact batch. A damaged batch FOLLOWED by intact ones is
corruption: its bytes are cut out of the file, every intact batch after it is kept, the lost
offset range is logged at error level and counted (``Partition.damage`` ->
``streamgate_storage_corrupt_batches_total``), and offsets continue after the highest intact
one, so none is ever given out twice. Readers at an offset inside a lost range continue at the
next intact batch. Idempotent-producer state comes from the last snapshot plus the headers of
every batch after it.
"""

from __future__ import annotations

import contextlib
import os
from itertools import pairwise

import structlog

from .batch_format import BatchHeader
from .partition import SNAPSHOT, LogConfig, Partition
from .producers import Producers
from .scan import Damage, ScanReport, repair
from .segment import Segment, segment_name
from .txn_index import TxnIndex

log = structlog.get_logger()


def open_partition(directory: str, number: int, config: LogConfig, now_us: int) -> Partition:
    part = Partition(directory, number, config)
    bases = _tidy(directory)
    if not bases:
        part.add_segment(Segment.create(directory, 0))
        return part
    for base, next_base in pairwise(bases):
        seg = Segment(directory, base)
        if not seg.load_index() or seg.next_offset > next_base:
            _recover(part, seg, seg.scan(), next_base)
            seg.seal()
        seg.close()
        part.add_segment(seg)
    active = Segment(directory, bases[-1])
    tail: list[BatchHeader] = []

    def note(h: BatchHeader) -> None:
        if h.producer_id >= 0:  # only idempotent batches matter for the producer state
            tail.append(h)

    _recover(part, active, active.scan(note), None)
    part.add_segment(active)
    _rebuild_producers(part, tail, now_us)
    return part


def _recover(part: Partition, seg: Segment, report: ScanReport, next_base: int | None) -> None:
    """Make the file what the scan found intact. ``next_base``: the base of the segment after a
    sealed one, whose bad tail is then corruption too (its offsets up to there are lost)."""
    path = seg.path + ".log"
    damage = list(report.damage)
    if report.torn_at is not None and next_base is not None and next_base > report.next_offset:
        damage.append(
            Damage(
                path,
                report.torn_at,
                report.file_size - report.torn_at,
                report.next_offset,
                next_base - 1,
            )
        )
    for d in damage:
        # Error level: acknowledged messages are gone (a torn tail is normal crash recovery).
        log.error(
            "embedded.corrupt_batch_skipped",
            path=path,
            position=d.position,
            bytes=d.length,
            lost_offsets=f"{d.first}-{d.last}" if d.records else "none",
            lost_records=d.records,
        )
    part.damage.extend(damage)
    if report.damage:
        seg.close()  # its descriptor would be of the file replaced below
        fd = os.open(path, os.O_RDONLY)
        try:
            repair(path, fd, report)
        finally:
            os.close(fd)
    elif report.torn_at is not None:
        os.truncate(path, report.torn_at)
        if not damage:
            log.warning(
                "embedded.torn_tail_truncated"
                if next_base is None
                else "embedded.sealed_segment_truncated",
                path=path,
                at=report.torn_at,
                dropped_bytes=report.file_size - report.torn_at,
            )


def _tidy(directory: str) -> list[int]:
    """Segment bases found on disk; removes temp files and index files without a log."""
    names = os.listdir(directory)
    bases = sorted(
        int(n[:20]) for n in names if n.endswith(".log") and len(n) == 24 and n[:20].isdigit()
    )
    live = {segment_name(b) for b in bases}
    for n in names:
        stem, _, ext = n.partition(".")
        orphan_index = ext in ("index", "timeindex") and stem not in live
        if n.endswith(".tmp") or orphan_index:
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(directory, n))
    return bases


def _rebuild_producers(part: Partition, tail: list[BatchHeader], now_us: int) -> None:
    """``now_us``: the last append of producers known from headers (they keep no append time:
    see producers.py)."""
    snap = Producers.read_snapshot(os.path.join(part.dir, SNAPSHOT), now_us)
    start = part.log_start
    if snap is not None and snap[1] <= part.next_offset:
        part.producers, start = snap
    # Transactions (txn_index.py): their own snapshot, written beside the producers' one.
    txn_snap = TxnIndex.read_snapshot(part.dir)
    txn_start = part.log_start
    if txn_snap is not None and txn_snap[1] <= part.next_offset:
        part.txns, txn_start = txn_snap

    def replay(h: BatchHeader) -> None:
        if h.base_offset >= start:
            part.producers.replay(h, now_us)
        if h.base_offset >= txn_start and h.attributes:
            part.txns.replay(h)

    first = min(start, txn_start)
    for seg in part.segments[:-1]:  # sealed segments after the snapshots: a header walk
        if seg.next_offset > first:
            for _, h in seg.walk():
                replay(h)
            seg.close()
    for h in tail:
        replay(h)
    part.txns.trim(part.log_start)
