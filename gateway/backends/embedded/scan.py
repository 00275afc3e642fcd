"""Verifying scan of one segment file: a torn tail versus corruption in the middle.

Every batch is checked (length within the file, magic, format, count, CRC32C, base offset not
below the end of the batch before it). At a batch that does not check out the scan looks for
the next one that does (a candidate is a position whose magic, format and attribute bytes look
like a header, confirmed by length, offset and CRC):

- nothing valid after it: a **torn tail** (a crash in the middle of a write), normal crash
  recovery: the file is cut there (``ScanReport.torn_at``);
- a valid batch after it: **corruption** (a flipped bit, a bad sector). The bytes in between are
  a ``Damage``; the offsets from the end of the last intact batch to the base of the next one
  are lost, every batch after them is kept, and no offset is ever given out twice.

A batch may start above the end of the one before it: that is a gap a repair left (readers
continue at the next batch, as Kafka's do over a compacted gap). ``repair`` rewrites a file
without its damaged ranges (temp file, fsync, rename), so readers never see their bytes.

This module only reads; the caller decides what to change (recovery) or just reports
(``streamgate verify``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from .batch_format import (
    HEADER_SIZE,
    MAGIC,
    MIN_LENGTH,
    STORED_FORMATS,
    BatchHeader,
    check_batch,
    parse_header,
)
from .files import fsync_dir

_CHUNK: Final = 4 << 20
_MAX_RELATIVE: Final = 0xFFFFFFFF
# magic, a stored format id, attributes 0..7 (u16 LE): where a header may start, 16 bytes
# before a match.
# A lookahead, so matches may overlap: a CRC whose last byte is the magic (01 01 00 00 ...) must
# not hide the real header one byte later.
_CANDIDATE: Final = re.compile(
    b"(?="
    + re.escape(bytes([MAGIC]))
    + b"["
    + re.escape(bytes(sorted(STORED_FORMATS)))
    + b"][\x00-\x07]\x00)"
)
_MAGIC_AT: Final = 16


@dataclass(frozen=True, slots=True)
class Damage:
    """Bytes ``[position, position + length)`` of a segment file that hold no intact batch,
    followed by an intact one: offsets ``first .. last`` (inclusive) are lost (none when
    ``last < first``: garbage between two batches)."""

    path: str
    position: int
    length: int
    first: int
    last: int

    @property
    def records(self) -> int:
        return max(0, self.last - self.first + 1)


@dataclass(slots=True)
class ScanReport:
    file_size: int
    damage: list[Damage] = field(default_factory=list)
    keep: list[tuple[int, int]] = field(default_factory=list)  # byte ranges of intact batches
    torn_at: int | None = None  # where a torn tail begins (file positions)
    next_offset: int = 0

    @property
    def clean(self) -> bool:
        return not self.damage and self.torn_at is None


class _Window:
    """pread with a read-ahead window: a scan reads each byte about once."""

    def __init__(self, fd: int, size: int) -> None:
        self.fd, self.size = fd, size
        self.buf, self.at = b"", 0

    def get(self, pos: int, n: int) -> bytes:
        rel = pos - self.at
        if rel < 0 or rel + n > len(self.buf):
            self.buf, self.at, rel = os.pread(self.fd, max(_CHUNK, n), pos), pos, 0
        return self.buf[rel : rel + n]


def scan(
    fd: int,
    base_offset: int,
    *,
    path: str = "",
    on_batch: Callable[[int, BatchHeader], None] | None = None,
) -> ScanReport:
    """Check the whole file; ``on_batch(position, header)`` for each intact batch, with the
    position it will have once the damage is cut out (``repair``)."""
    size = os.fstat(fd).st_size
    win = _Window(fd, size)
    report = ScanReport(size, next_offset=base_offset)
    pos = out = 0
    expected = base_offset
    while pos < size:
        h = _valid_at(win, pos, expected, base_offset)
        if h is None:
            found = _resync(win, pos + 1, expected, base_offset)
            if found is None:
                report.torn_at = pos
                break
            nxt, h = found
            report.damage.append(Damage(path, pos, nxt - pos, expected, h.base_offset - 1))
            pos = nxt
        if report.keep and report.keep[-1][1] == pos:
            report.keep[-1] = (report.keep[-1][0], pos + h.size)
        else:
            report.keep.append((pos, pos + h.size))
        if on_batch is not None:
            on_batch(out, h)
        out += h.size
        pos += h.size
        expected = h.next_offset
    report.next_offset = expected
    return report


def _valid_at(win: _Window, pos: int, expected: int, base: int) -> BatchHeader | None:
    if pos + HEADER_SIZE > win.size:
        return None
    h = parse_header(win.get(pos, HEADER_SIZE))
    if (
        h.length < MIN_LENGTH
        or pos + h.size > win.size
        or h.base_offset < expected
        or h.records <= 0
        or h.next_offset - base > _MAX_RELATIVE
    ):
        return None
    return h if check_batch(win.get(pos, h.size), 0, h) else None


def _resync(win: _Window, start: int, expected: int, base: int) -> tuple[int, BatchHeader] | None:
    """The first position at or after ``start`` holding a valid batch."""
    at = start
    while at + HEADER_SIZE <= win.size:
        chunk = os.pread(win.fd, _CHUNK + HEADER_SIZE, at)
        for m in _CANDIDATE.finditer(chunk):
            cand = at + m.start() - _MAGIC_AT
            if cand < start:
                continue
            h = _valid_at(win, cand, expected, base)
            if h is not None:
                return cand, h
        at += _CHUNK
    return None


def repair(path: str, fd: int, report: ScanReport) -> None:
    """Rewrite the file at ``path`` (open as ``fd``) with only ``report.keep``: written to a
    temp file, fsynced, renamed over it (a crash leaves the old file or the new one). The
    caller must reopen its descriptor afterwards."""
    tmp = path + ".tmp"  # recovery's _tidy removes a leftover one
    out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for start, end in report.keep:
            pos = start
            while pos < end:
                data = os.pread(fd, min(_CHUNK, end - pos), pos)
                if not data:
                    raise OSError(f"{path} shrank during repair")
                view = memoryview(data)
                while view:
                    view = view[os.write(out, view) :]
                pos += len(data)
        os.fsync(out)
    finally:
        os.close(out)
    os.replace(tmp, path)
    fsync_dir(os.path.dirname(path) or ".")
