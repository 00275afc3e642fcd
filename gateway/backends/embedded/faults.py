"""Storage faults: which OS errors mean "the disk refused the write", and the store's one view of
whether it can write (``/readyz``, ``streamgate_storage_writable``) and what recovery found
damaged (``streamgate_storage_corrupt_batches_total``).

A write that fails with ENOSPC, EDQUOT, EFBIG, EIO or EROFS becomes a ``StorageError`` (each
protocol answers its storage error) and starts an *episode*: logged once at error level, the
store reported not writable, every further failure only counted. The first write that succeeds
again ends it (logged once, with how many writes failed meanwhile), and so does a successful
probe (``probe_write``: a small file written, fsynced and removed) that a readiness check makes
while no write comes (an unready pod may get no traffic to prove the disk writable again).
Nothing needs restarting when space returns, except after a failed fsync (see fsync.py: the
kernel may have dropped the pages, so that file stays refused until a restart rescans it).
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Callable
from typing import Final

import structlog

from gateway.model import STORAGE_ERROR_KINDS, BackendUnavailable, GatewayError, StorageError

log = structlog.get_logger("streamgate.storage")

# errno -> the bounded ``kind`` label of streamgate_storage_errors_total.
STORAGE_ERRNOS: Final[dict[int, str]] = {
    errno.ENOSPC: "no_space",
    errno.EFBIG: "no_space",  # a file-size limit (RLIMIT_FSIZE, the file system's maximum)
    errno.EDQUOT: "quota",
    errno.EIO: "io",
    errno.EROFS: "read_only",
}


PROBE_FILE: Final = ".storage-probe"  # a dot file: the catalog never takes it for a stream
PROBE_BYTES: Final = 256 << 10


def probe_write(root: str) -> bool:
    """Whether ``root`` takes a write of ``PROBE_BYTES`` now (blocking: run it in a thread)."""
    path = os.path.join(root, PROBE_FILE)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            view = memoryview(bytes(PROBE_BYTES))
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        return False
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
    return True


def storage_error(exc: OSError, what: str) -> GatewayError:
    """The canonical error for an OS error while ``what`` (e.g. "writing x.log"): a
    ``StorageError`` for the errors above, else (a descriptor gone under a deleted topic...)
    the retriable ``BackendUnavailable`` as before."""
    kind = STORAGE_ERRNOS.get(exc.errno or 0)
    if kind is None:
        return BackendUnavailable(f"{what} failed: {exc}")
    return StorageError(f"storage error ({kind}): {what} failed: {exc.strerror or exc}", kind=kind)


class StorageHealth:
    """Whether the store's last write succeeded, and what it has counted. Listeners (the app's
    metrics) get every event; the counts are kept too, for a listener that comes late."""

    __slots__ = (
        "_failing",
        "_fsync_failed",
        "_listeners",
        "_suppressed",
        "corrupt_batches",
        "errors",
        "lost_records",
    )

    def __init__(self) -> None:
        self._failing: StorageError | None = None
        self._fsync_failed: str | None = None
        self._suppressed = 0
        self._listeners: list[Callable[[str, str, int], None]] = []
        self.errors: dict[str, int] = dict.fromkeys(STORAGE_ERROR_KINDS, 0)
        self.corrupt_batches = 0
        self.lost_records = 0

    def listen(self, listener: Callable[[str, str, int], None]) -> None:
        """``listener(event, kind, n)``: ("error", kind, 1), ("writable", "", 0|1),
        ("corrupt", "", batches), ("lost", "", records). Replays what happened before."""
        self._listeners.append(listener)
        for kind, n in self.errors.items():
            if n:
                listener("error", kind, n)
        listener("writable", "", int(self.writable))
        if self.corrupt_batches:
            listener("corrupt", "", self.corrupt_batches)
            listener("lost", "", self.lost_records)

    def _emit(self, event: str, kind: str, n: int) -> None:
        for listener in self._listeners:
            listener(event, kind, n)

    @property
    def write_failing(self) -> bool:
        """In an episode that a successful write (or probe) ends; not after a failed fsync."""
        return self._failing is not None and self._fsync_failed is None

    @property
    def writable(self) -> bool:
        return self._failing is None and self._fsync_failed is None

    def why_not_writable(self) -> str | None:
        if self._fsync_failed is not None:
            return f"storage not writable: {self._fsync_failed} (restart to recover)"
        if self._failing is not None:
            return f"storage not writable: {self._failing.message}"
        return None

    def failed(self, exc: StorageError) -> None:
        self.errors[exc.kind] += 1
        self._emit("error", exc.kind, 1)
        if self._failing is None:
            log.error("embedded.storage_write_failed", kind=exc.kind, error=exc.message)
            self._failing = exc
            self._emit("writable", "", 0)
        else:
            self._suppressed += 1  # one log line per episode, not one per request

    def fsync_failed(self, exc: GatewayError) -> None:
        if isinstance(exc, StorageError):
            self.errors[exc.kind] += 1
            self._emit("error", exc.kind, 1)
        if self._fsync_failed is None:
            log.error("embedded.storage_fsync_failed", error=exc.message)
            self._fsync_failed = exc.message
            self._emit("writable", "", 0)

    def succeeded(self) -> None:
        if self._failing is not None:
            log.warning(
                "embedded.storage_writable_again",
                kind=self._failing.kind,
                failed_writes=self._suppressed + 1,
            )
            self._failing = None
            self._suppressed = 0
            if self._fsync_failed is None:
                self._emit("writable", "", 1)

    def corrupt(self, batches: int, records: int) -> None:
        self.corrupt_batches += batches
        self.lost_records += records
        self._emit("corrupt", "", batches)
        self._emit("lost", "", records)
