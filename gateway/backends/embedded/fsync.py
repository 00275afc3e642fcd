"""When written bytes are forced to stable storage, and how concurrent writers share one fsync.

Every append is written to its file with ``os.write`` before it is acknowledged, so a crash of
the gateway PROCESS never loses an acknowledged append (the bytes are in the kernel's page
cache). What the policy decides is what survives a crash of the MACHINE (power loss, kernel
panic):

- ``always``: an append (and an offset commit) returns only after an fsync that covers it.
  Nothing acknowledged is lost on power loss. Concurrent writers share one fsync (group commit):
  while one fsync runs, the writes that arrive queue up and the next fsync covers them all.
- ``interval:<ms>`` (default ``interval:1000``): a background task fsyncs every dirty file every
  <ms>. Power loss loses at most the last <ms> of acknowledged appends; the log stays consistent
  (recovery truncates a torn tail).
- ``never``: the OS writes back when it likes (Linux: typically within ~30 s). Power loss may
  lose any amount of recent appends; a process crash still loses nothing.

fsyncs run in a worker thread (``trio.to_thread``) on duplicated file descriptors, so a segment
deleted or closed meanwhile (retention, topic deletion) never has its descriptor number reused
under a running fsync.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import trio

from gateway.model import BackendUnavailable, InvalidRequest

from .faults import storage_error


@dataclass(frozen=True, slots=True)
class FsyncPolicy:
    mode: Literal["always", "interval", "never"]
    interval_s: float = 0.0

    @classmethod
    def parse(cls, spec: str) -> FsyncPolicy:
        if spec == "always":
            return cls("always")
        if spec == "never":
            return cls("never")
        if spec.startswith("interval:"):
            try:
                ms = int(spec.removeprefix("interval:"))
            except ValueError:
                ms = 0
            if ms > 0:
                return cls("interval", ms / 1000)
        raise InvalidRequest(f"fsync policy must be always, never or interval:<ms>, not {spec!r}")


def fsync_fds(fds: list[int]) -> None:
    """fsync then close each (duplicated) descriptor; runs in a worker thread."""
    try:
        for fd in fds:
            os.fsync(fd)
    finally:
        for fd in fds:
            os.close(fd)


class GroupCommit:
    """Counts writes and makes them durable, one fsync for every write made before it started.

    ``collect`` returns freshly duplicated descriptors covering every write so far (and forgets
    them): the files written and any directory whose entries changed.
    """

    __slots__ = ("_collect", "_done", "_failed", "_running", "synced", "written")

    def __init__(self, collect: Callable[[], list[int]]) -> None:
        self._collect = collect
        self.written = 0
        self.synced = 0
        self._running = False
        self._done = trio.Event()
        self._failed: OSError | None = None

    def note_write(self) -> int:
        self.written += 1
        return self.written

    @property
    def dirty(self) -> bool:
        return self.synced < self.written

    @property
    def fsync_failed(self) -> bool:
        """An fsync failed: durable writes are refused until a restart (see wait_durable)."""
        return self._failed is not None

    async def wait_durable(self, seq: int) -> None:
        while self.synced < seq:
            if self._failed is not None:
                # After a failed fsync the kernel may have dropped the dirty pages; retrying
                # would report success for lost data (PostgreSQL's "fsyncgate").
                raise storage_error(self._failed, "an earlier fsync")
            if self._running:
                await self._done.wait()
                continue
            self._running = True
            target = self.written
            try:
                try:
                    fds = self._collect()
                except OSError as exc:  # no descriptor to fsync with (EMFILE): nothing lost yet
                    raise BackendUnavailable(f"cannot open files to fsync: {exc}") from exc
                # Not abandoned on cancel: the fsync finishes, and so does the bookkeeping.
                await trio.to_thread.run_sync(fsync_fds, fds)
                self.synced = max(self.synced, target)
            except OSError as exc:
                self._failed = exc
                raise storage_error(exc, "fsync") from exc
            finally:
                self._running = False
                done, self._done = self._done, trio.Event()
                done.set()

    async def flush(self) -> None:
        await self.wait_durable(self.written)
