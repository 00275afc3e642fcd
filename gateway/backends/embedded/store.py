"""The open store: catalog, offsets and background work (fsync interval, retention, idle
producers' expiry, trash).

``run()`` locks the directory (``owner``), opens (recovers) everything in a worker thread, runs
the background tasks until it is cancelled, then fsyncs and closes every file whatever the fsync
policy, and frees the lock last.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Iterator

import structlog
import trio

from gateway.model import BackendUnavailable, GatewayError, StorageError, Topic

from . import catalog, files, owner
from .catalog import StreamEntry, TopicEntry
from .faults import StorageHealth
from .fd_cache import FILES
from .fsync import FsyncPolicy, GroupCommit
from .offsets import OffsetStore
from .partition import LogConfig, Partition
from .producers import EXPIRATION_MS

log = structlog.get_logger()
_PARALLEL_FLUSHES = 32


class Store:
    def __init__(
        self,
        root: str,
        *,
        policy: FsyncPolicy,
        defaults: LogConfig,
        clock: Callable[[], float],
        retention_check_interval_s: float,
        producer_id_expiration_ms: int = EXPIRATION_MS,
        max_open_files: int = 0,
    ) -> None:
        if producer_id_expiration_ms <= 0:
            raise ValueError(
                f"producer_id_expiration_ms must be > 0, not {producer_id_expiration_ms}"
            )
        self.root = root
        self.policy = policy
        self.sync = policy.mode == "always"  # appends and commits wait for their fsync
        self.defaults = defaults
        self.clock = clock
        self.retention_check_interval_s = retention_check_interval_s
        self.producer_id_expiration_ms = producer_id_expiration_ms
        if max_open_files < 0:
            raise ValueError(f"max_open_files must be 0 (derived) or more, not {max_open_files}")
        self.max_open_files = max_open_files  # segment files open at once: fd_cache.py
        self.streams: dict[str, StreamEntry] = {}
        self.offsets = OffsetStore(root)
        self.lock = trio.Lock()  # serialises metadata changes (they await file work)
        self.ownership: owner.Ownership | None = None  # the directory's lock, while open
        self._nursery: trio.Nursery | None = None
        # Started (``nursery.start``) once the store is open, before it reports started.
        self.services: list[Callable[..., Awaitable[None]]] = []
        self.health = StorageHealth()  # writable or not, damage found by recovery

    def now_us(self) -> int:
        return int(self.clock() * 1_000_000)

    # --- lifecycle ---------------------------------------------------------------------------

    def _open(self) -> None:
        os.makedirs(self.root, exist_ok=True)
        FILES.configure(self.max_open_files)
        self.ownership = owner.acquire(self.root)  # before anything is read: see owner.py
        try:
            self._load()
        except BaseException:
            self._close_files()
            raise

    def _load(self) -> None:
        self.streams = catalog.load(self.root, self.defaults, self.now_us())
        damage = [d for part in self.partitions() for d in part.damage]
        if damage:  # each range was logged by recovery; counted here (metrics)
            self.health.corrupt(len(damage), sum(d.records for d in damage))
        self.expire_producers()  # those a snapshot knows, idle while the store was closed
        self.offsets.open()
        counts = {
            (s.name, t.name): len(t.partitions)
            for s in self.streams.values()
            for t in s.topics.values()
        }
        # Offsets of partitions deleted by a process that died before it could forget them.
        self.offsets.delete([k for k in self.offsets.live if k[3] >= counts.get((k[1], k[2]), 0)])

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        await trio.to_thread.run_sync(self._open)
        try:
            async with trio.open_nursery() as nursery:
                if self.policy.mode == "interval":
                    nursery.start_soon(self._flush_loop)
                nursery.start_soon(self._retention_loop)
                self._nursery = nursery
                # What must run on the open store before anyone is served (the transaction
                # coordinator finishing decided transactions), then beside it.
                for task in self.services:
                    await nursery.start(task)
                task_status.started()
                await trio.sleep_forever()
        finally:
            self._nursery = None
            with trio.CancelScope(shield=True):
                try:
                    await self.flush()
                finally:
                    self._close_files()

    def _close_files(self) -> None:
        """Close every file, the lock last: nothing may write once another process can own
        the directory."""
        try:
            for part in self.partitions():
                part.close()
            self.offsets.close()
        finally:
            if self.ownership is not None:
                self.ownership.release()
                self.ownership = None

    async def record_owner(self, listeners: tuple[owner.Listener, ...]) -> None:
        """Write in the lock file where this process serves the store (see owner.py)."""
        if self.ownership is not None:
            record = owner.Owner(pid=os.getpid(), listeners=listeners)
            await trio.to_thread.run_sync(self.ownership.record, record)

    def check_open(self) -> None:
        if self._nursery is None:
            raise BackendUnavailable("the embedded store is not open")

    def partitions(self) -> Iterator[Partition]:
        for stream in list(self.streams.values()):
            for topic in list(stream.topics.values()):
                yield from topic.partitions

    async def flush(self) -> None:
        """fsync everything written so far; the files' fsyncs run in parallel threads."""
        dirty = [p.commit for p in self.partitions() if p.commit.dirty]
        if self.offsets.commit.dirty:
            dirty.append(self.offsets.commit)
        # Bounded: each flush holds duplicated descriptors until its fsync ran (fd_cache.py).
        limiter = trio.CapacityLimiter(_PARALLEL_FLUSHES)

        async def flush(commit: GroupCommit) -> None:
            async with limiter:
                await commit.flush()

        async with trio.open_nursery() as nursery:
            for commit in dirty:
                nursery.start_soon(flush, commit)

    async def _flush_loop(self) -> None:
        while True:
            await trio.sleep(self.policy.interval_s)
            try:
                await self.flush()
            except* StorageError as group:
                # The files concerned refuse further durable writes (see GroupCommit); the
                # store keeps serving what it can rather than taking the gateway down, and
                # reports itself not writable (logged there, once).
                for exc in group.exceptions:
                    if isinstance(exc, StorageError):
                        self.health.fsync_failed(exc)
            except* GatewayError as group:  # no fsync ran (no descriptor to do it with)
                log.error("embedded.fsync_failed", errors=[str(e) for e in group.exceptions])

    async def _retention_loop(self) -> None:
        while True:
            await trio.sleep(self.retention_check_interval_s)
            self.enforce_retention()
            self.expire_producers()

    def enforce_retention(self) -> int:
        now_us = self.now_us()
        return sum(part.enforce_retention(now_us) for part in self.partitions())

    def expire_producers(self) -> int:
        """Forget the idempotent producers idle for ``producer_id_expiration_ms`` (producers.py);
        returns how many producer states (one per partition a producer wrote to) went."""
        idle_since_us = self.now_us() - self.producer_id_expiration_ms * 1000
        return sum(part.producers.expire(idle_since_us) for part in self.partitions())

    async def trash(self, path: str) -> None:
        """Take a directory out of the store now (atomic rename); remove it in the background."""
        dest = await trio.to_thread.run_sync(files.move_to_trash, self.root, path)
        if self._nursery is not None:
            self._nursery.start_soon(trio.to_thread.run_sync, files.remove_tree, dest)

    async def durable(self, offsets_seq: int | None) -> None:
        """Wait, under ``always``, until an offsets-store write is fsynced."""
        if self.sync and offsets_seq is not None:
            await self.offsets.commit.wait_durable(offsets_seq)
        else:
            await trio.lowlevel.checkpoint()

    # --- lookups -----------------------------------------------------------------------------

    def stream(self, name: str) -> StreamEntry:
        self.check_open()
        return catalog.resolve(self.streams, name)

    def topic(self, topic: Topic) -> TopicEntry:
        return self.stream(topic.stream).topic(topic.name)

    def partition(self, topic: Topic, partition: int) -> Partition:
        return self.topic(topic).partition(partition)
