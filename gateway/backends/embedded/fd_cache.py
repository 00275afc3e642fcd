"""The open segment files of the process, at most a budget of them: least recently used closed.

Every partition keeps one log file per segment. Holding them all open would take a descriptor
per partition for ever, and a few thousand topics would exhaust ``RLIMIT_NOFILE`` (the accept
loops and the store's own JSON writes would then fail with EMFILE). Segments therefore open
their log on first use (``Segment.fd``) and register here; when more than ``budget`` are open,
the least recently used one that nobody is using is closed. It reopens on its next use, which
costs one ``open(2)``: appends keep the active segments of busy partitions hot.

One cache per process (``FILES``): the limit it protects is the process's. Its budget defaults to
half of the soft ``RLIMIT_NOFILE`` (``default_budget``), leaving the other half to sockets,
transient files and the fsync thread's duplicated descriptors; the store sets the configured
``backend.max_open_files``.

Threads: the trio thread reads and appends; worker threads create partitions, recover them at
open and fsync. A descriptor must never be closed while another thread uses it (a closed number
is reused by the next ``open``, and a read or fsync would then hit another file), so users
``pin`` a segment around every use; eviction skips pinned segments and goes over the budget
rather than fail when all are pinned. An ``open`` that fails with EMFILE/ENFILE evicts one more
unpinned segment and tries again, so sockets eating into the budget degrade to reopens rather
than errors.
"""

from __future__ import annotations

import errno
import os
import resource
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Final, Protocol

_FD_ERRNOS: Final = (errno.EMFILE, errno.ENFILE)
_MIN_BUDGET: Final = 8


class Cached(Protocol):
    """What the cache keeps of a segment: its descriptor (-1 = closed) and its pin count."""

    _fd: int
    _pins: int


def default_budget() -> int:
    """Half of the soft RLIMIT_NOFILE (at least 8); 4096 when the limit is unlimited."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft <= 0:
        return 4096
    return max(_MIN_BUDGET, soft // 2)


class FdCache:
    def __init__(self, budget: int | None = None) -> None:
        self.budget = budget if budget is not None else default_budget()
        self._open: OrderedDict[Cached, None] = OrderedDict()  # oldest use first
        self._lock = threading.Lock()
        self.opens = 0  # files opened (first use and reopens): a cache-miss counter
        self.evictions = 0

    def configure(self, budget: int) -> None:
        """``budget`` files at most (0 = ``default_budget()``); closes the excess now."""
        if budget < 0:
            raise ValueError(f"max_open_files must be 0 (derived) or more, not {budget}")
        with self._lock:
            self.budget = budget or default_budget()
            self._make_room(0)

    def __len__(self) -> int:
        return len(self._open)

    def get(self, item: Cached, opener: Callable[[], int]) -> int:
        """``item``'s descriptor, opened with ``opener`` if closed; marks it recently used."""
        with self._lock:
            if item._fd >= 0:
                self._open.move_to_end(item)
                return item._fd
            self._make_room(1)
            item._fd = self._open_with_retry(opener)
            self._open[item] = None
            self.opens += 1
            return item._fd

    def pin(self, item: Cached) -> None:
        with self._lock:
            item._pins += 1

    def unpin(self, item: Cached) -> None:
        with self._lock:
            item._pins -= 1
            if item._pins == 0 and len(self._open) > self.budget:
                self._make_room(0)  # over the budget while everything was pinned

    def close(self, item: Cached) -> None:
        """Close ``item``'s file now (the segment is closed or deleted by its owner)."""
        with self._lock:
            self._open.pop(item, None)
            fd, item._fd = item._fd, -1
        if fd >= 0:
            os.close(fd)

    def _open_with_retry(self, opener: Callable[[], int]) -> int:
        while True:
            try:
                return opener()
            except OSError as exc:
                # Something else (sockets, another store's files) took the descriptors:
                # give one of ours back and retry, until none is left to give.
                if exc.errno not in _FD_ERRNOS or not self._evict_one():
                    raise

    def _make_room(self, wanted: int) -> None:
        while len(self._open) + wanted > self.budget and self._evict_one():
            pass

    def _evict_one(self) -> bool:
        victim = next((item for item in self._open if item._pins == 0), None)
        if victim is None:
            return False
        del self._open[victim]
        fd, victim._fd = victim._fd, -1
        self.evictions += 1
        os.close(fd)
        return True


FILES: Final = FdCache()
