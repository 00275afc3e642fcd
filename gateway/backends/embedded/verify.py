"""``streamgate verify DATA_DIR``: check an embedded store offline, changing nothing.

Every segment of every partition is scanned as recovery would (scan.py: length, offsets,
CRC32C of each batch), and every sealed segment's index files are checked against what the scan
rebuilt. One line per problem; recovery fixes each kind when the store next opens (a torn tail
is cut, a damaged batch cut out with its offsets lost, an index rebuilt) — except damage inside a
sealed segment whose index files are intact: open trusts those and does not rescan it. With
``repair``, such a segment's index files are removed, so the next open rescans and repairs it.
Run it on a store that no gateway is writing: an append in flight looks like a torn tail.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass

from .batch_format import BatchHeader
from .files import TRASH
from .scan import scan
from .segment import NO_TIMESTAMP, Segment, segment_name


@dataclass(slots=True)
class Summary:
    partitions: int = 0
    segments: int = 0
    problems: int = 0


def verify(root: str, summary: Summary | None = None, *, repair: bool = False) -> Iterator[str]:
    """The problems found under ``root``, one line each."""
    summary = summary if summary is not None else Summary()
    if not os.path.isdir(root):
        summary.problems += 1
        yield f"{root}: not a directory"
        return
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != TRASH)
        bases = sorted(
            int(n[:20])
            for n in filenames
            if n.endswith(".log") and len(n) == 24 and n[:20].isdigit()
        )
        if not bases:
            continue
        summary.partitions += 1
        for i, base in enumerate(bases):
            summary.segments += 1
            next_base = bases[i + 1] if i + 1 < len(bases) else None
            for line in _segment(dirpath, base, next_base, repair):
                summary.problems += 1
                yield line


def _segment(directory: str, base: int, next_base: int | None, repair: bool) -> Iterator[str]:
    seg = Segment(directory, base)  # state only: its own descriptor is never opened here
    path = seg.path + ".log"

    def note(pos: int, h: BatchHeader) -> None:
        seg._note_batch(pos, h.base_offset, h.records, h.size, h.max_timestamp_us)

    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        yield f"{path}: cannot open: {exc.strerror}"
        return
    try:
        report = scan(fd, base, path=path, on_batch=note)
    except OSError as exc:
        yield f"{path}: cannot read: {exc.strerror}"
        return
    finally:
        os.close(fd)
    for d in report.damage:
        lost = f"offsets {d.first}-{d.last} lost" if d.records else "no offset lost"
        yield f"{path}: damaged batch at byte {d.position} ({d.length} bytes): {lost}"
    if report.torn_at is not None:
        cut = report.file_size - report.torn_at
        if next_base is not None and next_base > report.next_offset:
            yield (
                f"{path}: damaged tail at byte {report.torn_at} ({cut} bytes): offsets"
                f" {report.next_offset}-{next_base - 1} lost"
            )
        else:
            yield f"{path}: torn tail at byte {report.torn_at} ({cut} bytes, cut off on open)"
    if next_base is None:
        return  # the active segment's indexes are rebuilt on every open
    if repair and not report.clean:
        for ext in (".index", ".timeindex"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(seg.path + ext)
    if report.next_offset > next_base:
        yield f"{path}: runs to offset {report.next_offset}, past the next segment's {next_base}"
    yield from _index(seg, report.clean)


def _index(scanned: Segment, clean: bool) -> Iterator[str]:
    name = segment_name(scanned.base_offset)
    loaded = Segment(os.path.dirname(scanned.path), scanned.base_offset)
    missing = [ext for ext in (".index", ".timeindex") if not os.path.exists(scanned.path + ext)]
    if missing:
        yield f"{scanned.path}{missing[0]}: missing (rebuilt on open)"
        return
    if not loaded.load_index():
        yield f"{scanned.path}.index: damaged or not matching {name}.log (rebuilt on open)"
        return
    if not clean:
        return  # the log's own problems are reported: its index cannot match the repair yet
    ts_ts, ts_off = list(scanned.ts_ts), list(scanned.ts_off)
    if scanned.max_ts > (ts_ts[-1] if ts_ts else NO_TIMESTAMP):  # as Segment.seal adds it
        ts_ts.append(scanned.max_ts)
        ts_off.append(scanned.max_ts_offset - scanned.base_offset)
    same = (
        list(loaded.idx_off) == list(scanned.idx_off)
        and list(loaded.idx_pos) == list(scanned.idx_pos)
        and (loaded.next_offset, loaded.size) == (scanned.next_offset, scanned.size)
    )
    if not same:
        yield f"{scanned.path}.index: does not match {name}.log (rebuilt on open)"
    elif list(loaded.ts_ts) != ts_ts or list(loaded.ts_off) != ts_off:
        yield f"{scanned.path}.timeindex: does not match {name}.log (rebuilt on open)"
