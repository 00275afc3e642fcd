"""Opening a partition directory after a clean shutdown or a crash.

Sealed segments load their index files (rebuilt by a verifying scan when missing, damaged, or
not matching the log). The active segment is always scanned batch by batch, checking length,
offset continuity and CRC32C; at the first torn or corrupt batch the file is truncated there, so
appends continue right after the last intact batch. Idempotent-producer state comes from the
last snapshot plus the headers of every batch after it.
"""

from __future__ import annotations

import contextlib
import os
from itertools import pairwise

import structlog

from .batch_format import BatchHeader
from .partition import SNAPSHOT, LogConfig, Partition
from .producers import Producers
from .segment import Segment, segment_name

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
            if not seg.scan():
                log.warning("embedded.sealed_segment_truncated", path=seg.path, at=seg.size)
            seg.seal()
        seg.close()
        part.add_segment(seg)
    active = Segment(directory, bases[-1])
    tail: list[BatchHeader] = []

    def note(h: BatchHeader) -> None:
        if h.producer_id >= 0:  # only idempotent batches matter for the producer state
            tail.append(h)

    before = os.stat(active.path + ".log").st_size
    if not active.scan(note):
        log.warning(
            "embedded.torn_tail_truncated",
            path=active.path + ".log",
            at=active.size,
            dropped_bytes=before - active.size,
        )
    part.add_segment(active)
    _rebuild_producers(part, tail, now_us)
    return part


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
    for seg in part.segments[:-1]:  # sealed segments after the snapshot: a header walk
        if seg.next_offset > start:
            for _, h in seg.walk():
                if h.base_offset >= start:
                    part.producers.replay(h, now_us)
            seg.close()
    for h in tail:
        if h.base_offset >= start:
            part.producers.replay(h, now_us)
