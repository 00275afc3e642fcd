"""One segment of a partition's log: ``<base>.log`` plus its sparse offset and time indexes.

The log file is a sequence of batches (``batch_format``). Indexes live in memory while the
segment is open and are written to ``<base>.index`` / ``<base>.timeindex`` when the segment is
sealed (rolled); the active segment's indexes are never trusted from disk because recovery
rescans it anyway.

- offset index: an entry (relative offset u32, position u32) for the first batch and then for
  the first batch after every ``INDEX_INTERVAL`` bytes, so a lookup is a bisect plus a walk of
  at most ~4 KiB of batch headers.
- time index: entries (max timestamp so far i64, relative offset u32 of the batch that set it),
  appended at the same cadence when the running maximum grew (Kafka's scheme). Every batch
  before an entry's offset has timestamps below the entry's, so a search for the first record
  with timestamp >= t starts at the last entry < t.

Index files (little-endian) carry a header with a CRC32C over header and entries; anything that
does not check out is ignored and the index is rebuilt by scanning the log::

    .index      "SGIX" u8 version, 3 pad, base u64, next_offset u64, log_size u64,
                max_ts i64, max_ts_offset u64, entries u32, crc u32 · entries (u32 rel, u32 pos)
    .timeindex  "SGTI" u8 version, 3 pad, base u64, entries u32, crc u32 · entries (i64, u32 rel)
"""

from __future__ import annotations

import contextlib
import functools
import os
import struct
import sys
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator
from typing import Concatenate, Final, ParamSpec, TypeVar

import crc32c

from gateway.model import WireBatch

from .batch_format import (
    HEADER_SIZE,
    STORED_FORMATS,
    BatchHeader,
    Payload,
    parse_header,
)
from .fd_cache import FILES, FdCache
from .files import release, reserve
from .scan import ScanReport
from .scan import scan as scan_file

INDEX_INTERVAL: Final = 4096
NO_TIMESTAMP: Final = -1
_INDEX_VERSION: Final = 1
_IDX_HEAD = struct.Struct("<4sB3xQQQqQII")
_TIX_HEAD = struct.Struct("<4sB3xQII")
_TIX_ENTRY = struct.Struct("<qI")
_BIG_ENDIAN: Final = sys.byteorder == "big"
# A read for this many messages (what a Kafka Fetch asks: whatever its byte budget holds) pulls the
# budget at once. Not fewer: an Iggy poll of 1,000 messages with a 32 MiB budget wants one batch.
_MANY_MESSAGES: Final = 1_000_000
# A segment this big reserves its next blocks ahead of its appends (``files.reserve``): as many
# as it holds, at most RESERVE_MAX, never past its room. Small segments (most partitions of a
# wide topic) reserve nothing; a busy one at most 16 MiB more than it holds, freed when it is
# sealed or closed.
RESERVE_FROM: Final = 1 << 20
RESERVE_MAX: Final = 16 << 20
_NO_RESERVE: Final = sys.maxsize  # a reserve failed: appends allocate as they write


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}"


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _pinned(
    method: Callable[Concatenate[Segment, _P], _R],
) -> Callable[Concatenate[Segment, _P], _R]:
    """The segment's file stays open (``fd_cache``: not evicted by another thread) while
    ``method`` runs; every method that uses ``self.fd`` carries it."""

    @functools.wraps(method)
    def wrapper(self: Segment, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        self._cache.pin(self)
        try:
            return method(self, *args, **kwargs)
        finally:
            self._cache.unpin(self)

    return wrapper


class Segment:
    __slots__ = (
        "_cache",
        "_fd",
        "_next_offset_at",
        "_pins",
        "_reserved",
        "_since_index",
        "base_offset",
        "idx_off",
        "idx_pos",
        "max_ts",
        "max_ts_offset",
        "next_offset",
        "path",
        "size",
        "ts_off",
        "ts_ts",
    )

    def __init__(self, directory: str, base_offset: int, cache: FdCache = FILES) -> None:
        self.path = os.path.join(directory, segment_name(base_offset))
        self.base_offset = base_offset
        self._cache = cache
        self._fd = -1
        self._pins = 0
        # The file's blocks are allocated up to here (``reserve``); 0 when not known to be
        # past ``size`` (a reopened segment may still hold a reserve a crash left: sealing
        # frees it).
        self._reserved = 0
        self._reset()

    def _reset(self) -> None:
        self.next_offset = self.base_offset
        self.size = 0
        self.max_ts = NO_TIMESTAMP
        self.max_ts_offset = self.base_offset
        self.idx_off: array[int] = array("I")
        self.idx_pos: array[int] = array("I")
        self.ts_ts: array[int] = array("q")
        self.ts_off: array[int] = array("I")
        self._since_index = INDEX_INTERVAL  # the first batch is always indexed
        # Where the batch after the last one read starts: (its offset, its position). A
        # consumer's next read asks for exactly that offset, found without a walk of headers
        # (a fetch over many partitions locates in each). Bytes below ``size`` never change
        # while the segment is open, so the pair stays true.
        self._next_offset_at = (-1, 0)

    # --- files -------------------------------------------------------------------------------

    @classmethod
    def create(cls, directory: str, base_offset: int, cache: FdCache = FILES) -> Segment:
        seg = cls(directory, base_offset, cache)
        for ext in (".index", ".timeindex"):  # never trust indexes of an earlier incarnation
            with contextlib.suppress(FileNotFoundError):
                os.unlink(seg.path + ext)
        # O_EXCL: a new segment never takes over an existing log file (that would lose data).
        flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_APPEND
        cache.get(seg, lambda: os.open(seg.path + ".log", flags, 0o644))
        return seg

    @property
    def fd(self) -> int:
        """The log's descriptor, opened on use through ``fd_cache`` (which may close it again
        once unused): only valid inside a ``_pinned`` method."""
        return self._cache.get(self, self._open_log)

    def _open_log(self) -> int:
        return os.open(self.path + ".log", os.O_RDWR | os.O_APPEND)

    @_pinned
    def dup_fd(self) -> int:
        """A descriptor of its own (for an fsync in a worker thread): it survives eviction."""
        return os.dup(self.fd)

    @_pinned
    def fsync(self) -> None:
        os.fsync(self.fd)

    def close(self) -> None:
        """Close the log, freeing what was reserved past its end."""
        if self._reserved > self.size:
            with contextlib.suppress(OSError):  # best effort: sealing frees it at the latest
                self._release()
        self._cache.close(self)

    @_pinned
    def _release(self) -> None:
        release(self.fd, self.size)
        self._reserved = self.size

    def delete(self) -> None:
        self._cache.close(self)
        for ext in (".log", ".index", ".timeindex"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path + ext)

    # --- append ------------------------------------------------------------------------------

    @_pinned
    def append(
        self,
        header: bytes,
        payload: Payload,
        base: int,
        count: int,
        max_ts: int,
        total: int,
        room: int = 0,
    ) -> None:
        """Write one framed batch (``total`` bytes); the in-memory state moves only once the
        bytes are written. ``room``: the size the segment may grow to (its blocks are reserved
        ahead within it); 0: reserve nothing."""
        fd = self.fd
        size = self.size
        if size + total > self._reserved and size >= RESERVE_FROM and room:
            end = min(room, size + total + min(size, RESERVE_MAX))
            if end > size and not reserve(fd, size, end - size):
                end = _NO_RESERVE
            self._reserved = end
        try:
            n = os.writev(fd, (header, *payload))
            if n != total:  # short write (disk full): finish it or fail below
                rest = b"".join((header, *payload))[n:]
                while rest:
                    rest = rest[os.write(fd, rest) :]
        except BaseException:
            # Leave no partial batch behind: the next append must start at a batch boundary
            # (the truncation frees the reserve too).
            with contextlib.suppress(OSError):
                os.ftruncate(fd, self.size)
                self._reserved = min(self._reserved, self.size)
            raise
        self._note_batch(self.size, base, count, total, max_ts)

    def _note_batch(self, pos: int, base: int, count: int, size: int, max_ts: int) -> None:
        if max_ts > self.max_ts:
            self.max_ts = max_ts
            self.max_ts_offset = base
        if self._since_index >= INDEX_INTERVAL:
            self._since_index = 0
            self.idx_off.append(base - self.base_offset)
            self.idx_pos.append(pos)
            if not self.ts_ts or self.max_ts > self.ts_ts[-1]:
                self.ts_ts.append(self.max_ts)
                self.ts_off.append(self.max_ts_offset - self.base_offset)
        self._since_index += size
        self.size = pos + size
        self.next_offset = base + count

    # --- read --------------------------------------------------------------------------------

    @_pinned
    def header_at(self, pos: int) -> BatchHeader:
        return parse_header(os.pread(self.fd, HEADER_SIZE, pos))

    @_pinned
    def locate(self, offset: int) -> int:
        """Position of the batch holding ``offset`` (or of the first one after it; size if none)."""
        if offset == self._next_offset_at[0]:
            return self._next_offset_at[1]
        rel = offset - self.base_offset
        i = bisect_right(self.idx_off, rel) - 1
        if i >= 0 and self.idx_off[i] == rel:
            return self.idx_pos[i]  # an indexed batch begins there: no header to read
        pos = self.idx_pos[i] if i >= 0 else 0
        while pos < self.size:
            h = self.header_at(pos)
            if h.base_offset + h.records > offset:
                return pos
            pos += h.size
        return self.size

    @_pinned
    def read(
        self, pos: int, max_bytes: int, max_messages: int, *, force: bool
    ) -> list[tuple[BatchHeader, bytes]]:
        """Whole batches from ``pos`` while both budgets allow; with ``force`` the first always
        (a reader must make progress even when one batch is over its max_bytes)."""
        end = self.size
        if pos >= end:
            return []
        fd = self.fd
        if max_messages >= _MANY_MESSAGES:
            # A reader that wants many batches (a Kafka Fetch) reads its budget at once, the
            # first header with it: one pread per read, not two.
            chunk = os.pread(fd, min(end - pos, max(max_bytes, HEADER_SIZE)), pos)
            first = parse_header(chunk)
            if first.size > len(chunk):  # over max_bytes on its own
                if not force:
                    return []
                self._next_offset_at = (first.base_offset + first.records, pos + first.size)
                return [(first, os.pread(fd, first.size - HEADER_SIZE, pos + HEADER_SIZE))]
        else:
            first = self.header_at(pos)
            if first.size > max_bytes and not force:
                return []
            if first.size >= max_bytes or first.records >= max_messages or pos + first.size >= end:
                # One batch is the answer: read just it (Iggy-style polls of one message would
                # otherwise pull max_bytes from the page cache every time).
                self._next_offset_at = (first.base_offset + first.records, pos + first.size)
                return [(first, os.pread(fd, first.size - HEADER_SIZE, pos + HEADER_SIZE))]
            chunk = os.pread(fd, min(end - pos, max_bytes), pos)
        out: list[tuple[BatchHeader, bytes]] = []
        p = 0
        limit = len(chunk) - HEADER_SIZE
        while p <= limit and max_messages > 0:
            h = parse_header(chunk, p)
            q = p + h.size
            if q > len(chunk):
                break
            out.append((h, chunk[p + HEADER_SIZE : q]))
            max_messages -= h.records
            p = q
        if out:
            last = out[-1][0]
            self._next_offset_at = (last.base_offset + last.records, pos + p)
        return out

    def walk(self, pos: int = 0) -> Iterator[tuple[int, BatchHeader]]:
        while pos < self.size:
            h = self.header_at(pos)
            yield pos, h
            pos += h.size

    def find_timestamp(self, ts: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= ts, if the segment has one."""
        if self.max_ts < ts:
            return None
        j = bisect_left(self.ts_ts, ts) - 1
        start = self.base_offset + self.ts_off[j] if j >= 0 else self.base_offset
        for pos, h in self.walk(self.locate(start)):
            if h.max_timestamp_us < ts:
                continue
            if h.first_timestamp_us >= ts:
                return h.base_offset, h.first_timestamp_us
            return self._first_record(pos, h, lambda t: t >= ts)
        return None

    def max_timestamp_record(self) -> tuple[int, int]:
        pos = self.locate(self.max_ts_offset)
        h = self.header_at(pos)
        if h.first_timestamp_us == self.max_ts:
            return h.base_offset, self.max_ts
        return self._first_record(pos, h, lambda t: t == self.max_ts)

    @_pinned
    def _first_record(
        self, pos: int, h: BatchHeader, match: Callable[[int], bool]
    ) -> tuple[int, int]:
        payload = os.pread(self.fd, h.size - HEADER_SIZE, pos + HEADER_SIZE)
        wire = WireBatch(
            format=STORED_FORMATS[h.format_id],
            data=payload,
            count=h.records,
            base_offset=h.base_offset,
        )
        for m in wire.format.decode(wire):
            if match(m.timestamp_us):
                return m.offset, m.timestamp_us
        return h.base_offset, h.first_timestamp_us  # headers and records disagree: be lenient

    # --- recovery ----------------------------------------------------------------------------

    @_pinned
    def scan(self, on_batch: Callable[[BatchHeader], None] | None = None) -> ScanReport:
        """Rebuild the in-memory state from the log, verifying every batch; positions are the
        ones the file has once ``scan.repair`` cut out any damage. Changes nothing on disk: the
        caller cuts a torn tail or repairs (recovery.py)."""
        self._reset()

        def note(pos: int, h: BatchHeader) -> None:
            self._note_batch(pos, h.base_offset, h.records, h.size, h.max_timestamp_us)
            if on_batch is not None:
                on_batch(h)

        return scan_file(self.fd, self.base_offset, path=self.path + ".log", on_batch=note)

    def seal(self) -> None:
        """Close the segment for appends, write its index files (no fsync: a lost or torn
        index is rebuilt on open) and free the blocks reserved past its end."""
        if self.max_ts > (self.ts_ts[-1] if self.ts_ts else NO_TIMESTAMP):
            self.ts_ts.append(self.max_ts)
            self.ts_off.append(self.max_ts_offset - self.base_offset)
        entries = _interleave(self.idx_off, self.idx_pos)
        head = _IDX_HEAD.pack(
            b"SGIX",
            _INDEX_VERSION,
            self.base_offset,
            self.next_offset,
            self.size,
            self.max_ts,
            self.max_ts_offset,
            len(self.idx_off),
            0,
        )
        _write_file(self.path + ".index", _with_crc(head, entries))
        tentries = b"".join(
            _TIX_ENTRY.pack(t, o) for t, o in zip(self.ts_ts, self.ts_off, strict=True)
        )
        thead = _TIX_HEAD.pack(b"SGTI", _INDEX_VERSION, self.base_offset, len(self.ts_ts), 0)
        _write_file(self.path + ".timeindex", _with_crc(thead, tentries))
        with contextlib.suppress(OSError):  # what was reserved past its end, even before a crash
            self._release()

    def load_index(self) -> bool:
        """Load the sealed index files; False when they are missing or do not match the log."""
        try:
            with open(self.path + ".index", "rb") as f:
                idx = f.read()
            with open(self.path + ".timeindex", "rb") as f:
                tix = f.read()
            log_size = os.stat(self.path + ".log").st_size
        except OSError:
            return False
        if not (_crc_ok(idx, _IDX_HEAD.size) and _crc_ok(tix, _TIX_HEAD.size)):
            return False
        magic, ver, base, next_offset, size, max_ts, max_ts_offset, n, _ = _IDX_HEAD.unpack_from(
            idx
        )
        tmagic, tver, tbase, tn, _ = _TIX_HEAD.unpack_from(tix)
        if (
            (magic, ver, tmagic, tver) != (b"SGIX", _INDEX_VERSION, b"SGTI", _INDEX_VERSION)
            or base != self.base_offset
            or tbase != base
            or size != log_size
            or len(idx) != _IDX_HEAD.size + 8 * n
            or len(tix) != _TIX_HEAD.size + _TIX_ENTRY.size * tn
        ):
            return False
        pairs: array[int] = array("I", idx[_IDX_HEAD.size :])
        if _BIG_ENDIAN:
            pairs.byteswap()
        self.idx_off, self.idx_pos = pairs[0::2], pairs[1::2]
        for t, o in _TIX_ENTRY.iter_unpack(tix[_TIX_HEAD.size :]):
            self.ts_ts.append(t)
            self.ts_off.append(o)
        self.next_offset, self.size = next_offset, size
        self.max_ts, self.max_ts_offset = max_ts, max_ts_offset
        self._since_index = 0
        return True


def _interleave(a: array[int], b: array[int]) -> bytes:
    out: array[int] = array("I", bytes(8 * len(a)))
    out[0::2] = a
    out[1::2] = b
    if _BIG_ENDIAN:
        out.byteswap()
    return out.tobytes()


def _with_crc(head: bytes, entries: bytes) -> bytes:
    crc = crc32c.crc32c(entries, crc32c.crc32c(head[:-4]))
    return head[:-4] + struct.pack("<I", crc) + entries


def _crc_ok(data: bytes, head_size: int) -> bool:
    if len(data) < head_size:
        return False
    (crc,) = struct.unpack_from("<I", data, head_size - 4)
    return bool(crc32c.crc32c(data[head_size:], crc32c.crc32c(data[: head_size - 4])) == crc)


def _write_file(path: str, data: bytes) -> None:
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
