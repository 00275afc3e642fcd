"""``EmbeddedBackend``: the ``Backend`` protocol on the local segmented log (DESIGN.md §4).

Metadata commands go through ``admin`` (one lock, file work in worker threads). The data path
(append, read, offsets) runs in the trio thread on open file descriptors and yields only for
fsyncs under ``always`` and for long-polls.
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import trio

from gateway.model import (
    AddToTransaction,
    AddToTransactionResult,
    Append,
    AppendResult,
    AwaitData,
    AwaitDataResult,
    CommitOffset,
    CommitOffsetResult,
    CommitTransactionOffsets,
    CommitTransactionOffsetsResult,
    CreatePartitions,
    CreatePartitionsResult,
    CreateStream,
    CreateStreamResult,
    CreateTopic,
    CreateTopicResult,
    DeleteOffset,
    DeleteOffsetResult,
    DeletePartitions,
    DeletePartitionsResult,
    DeleteRecords,
    DeleteRecordsResult,
    DeleteStream,
    DeleteStreamResult,
    DeleteTopic,
    DeleteTopicResult,
    DescribeTopic,
    DescribeTopicResult,
    EndTransaction,
    EndTransactionResult,
    FetchOffset,
    FetchOffsetResult,
    GatewayError,
    InitProducerResult,
    InitTransaction,
    InvalidRequest,
    ListOffsets,
    ListOffsetsResult,
    ListStreams,
    ListStreamsResult,
    ListTopics,
    ListTopicsResult,
    PurgeStream,
    PurgeStreamResult,
    PurgeTopic,
    PurgeTopicResult,
    Read,
    ReadResult,
    Stats,
    StatsResult,
    StorageError,
    TopicConfig,
    UpdateStream,
    UpdateStreamResult,
    UpdateTopic,
    UpdateTopicResult,
)

from ..base import BackendSettings, BackendUrlError, Capabilities, running
from . import catalog
from .admin import Admin
from .batch_format import STORED_FORMATS
from .faults import StorageHealth, probe_write, storage_error
from .fsync import FsyncPolicy
from .owner import Listener
from .partition import LogConfig
from .producers import EXPIRATION_MS
from .store import Store
from .transactions import TransactionCoordinator


def embedded_path(url: str) -> Path:
    """``embedded:./data``, ``embedded:/var/lib/x`` or ``embedded:///var/lib/x``."""
    scheme, _, rest = url.partition(":")
    if scheme.lower() != "embedded":
        raise BackendUrlError(f"not an embedded: URL: {url!r}")
    if rest.startswith("//"):
        rest = urlsplit(url).path
    rest = unquote(rest)
    if not rest:
        raise BackendUrlError("embedded backend URL needs a path, e.g. embedded:./data")
    return Path(rest)


def _capabilities(defaults: Any) -> Capabilities:
    return Capabilities(
        native_groups=False,
        native_offsets=True,
        timestamp_index=True,
        idempotent_producers=True,
        streams=True,
        max_message_bytes=defaults.max_message_bytes,
        segment_bytes=defaults.segment_bytes,
        wire_formats=frozenset(STORED_FORMATS.values()),
    )


class EmbeddedBackend:
    name = "embedded"

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        fsync: str = "interval:1000",
        segment_bytes: int = 64 << 20,
        retention_ms: int | None = None,
        retention_bytes: int | None = None,
        max_message_bytes: int = 16 << 20,
        retention_check_interval_s: float = 30.0,
        producer_id_expiration_ms: int = EXPIRATION_MS,
        clock: Callable[[], float] = time.time,
        max_open_files: int = 0,
    ) -> None:
        config = TopicConfig(
            segment_bytes=segment_bytes,
            retention_ms=retention_ms,
            retention_bytes=retention_bytes,
            max_message_bytes=max_message_bytes,
        )
        catalog.check_config(config)
        defaults = catalog.effective(config, LogConfig(segment_bytes, max_message_bytes))
        self.store = Store(
            os.fspath(path),
            policy=FsyncPolicy.parse(fsync),
            defaults=defaults,
            clock=clock,
            retention_check_interval_s=retention_check_interval_s,
            producer_id_expiration_ms=producer_id_expiration_ms,
            max_open_files=max_open_files,
        )
        self._admin = Admin(self.store)
        self.transactions = TransactionCoordinator(self.store, self.commit_offset)
        self.store.services.append(self.transactions.run)
        self.capabilities = _capabilities(defaults)

    @classmethod
    def from_url(cls, url: str, settings: BackendSettings | None = None) -> EmbeddedBackend:
        s = settings or BackendSettings()
        return cls(
            embedded_path(url),
            fsync=s.fsync,
            segment_bytes=s.segment_bytes,
            retention_ms=s.retention_ms,
            retention_bytes=s.retention_bytes,
            max_message_bytes=s.max_message_bytes,
            max_open_files=s.max_open_files,
        )

    @staticmethod
    def capabilities_for(settings: BackendSettings) -> Capabilities:
        """What a store started with ``settings`` can do (``link``: a worker's, before it
        reaches the owner)."""
        config = TopicConfig(
            segment_bytes=settings.segment_bytes,
            retention_ms=settings.retention_ms,
            retention_bytes=settings.retention_bytes,
            max_message_bytes=settings.max_message_bytes,
        )
        catalog.check_config(config)
        return _capabilities(
            catalog.effective(config, LogConfig(settings.segment_bytes, settings.max_message_bytes))
        )

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        await self.store.run(task_status=task_status)

    @property
    def storage(self) -> StorageHealth:
        """Whether the store can write, and the damage recovery found (faults.py)."""
        return self.store.health

    async def ping(self) -> None:
        """Fails (so ``/readyz`` answers 503) while the store's writes fail: a disk that is
        full, read-only or failing; ready again after the first write that succeeds."""
        self.store.check_open()
        health = self.store.health
        if health.write_failing and await trio.to_thread.run_sync(probe_write, self.store.root):
            health.succeeded()
        why = health.why_not_writable()
        if why is not None:
            raise StorageError(why)
        await trio.lowlevel.checkpoint()

    async def flush(self) -> None:
        """fsync everything written so far, whatever the policy."""
        await self.store.flush()

    async def record_listeners(self, listeners: Iterable[Listener]) -> None:
        """Tell whoever finds the directory in use where this process serves it (owner.py)."""
        await self.store.record_owner(tuple(listeners))

    def enforce_retention(self) -> int:
        """One retention pass over every partition, now; returns how many segments went."""
        return self.store.enforce_retention()

    def expire_producers(self) -> int:
        """Forget idempotent producers idle longer than ``producer_id_expiration_ms`` (Kafka's
        ``producer.id.expiration.ms``), now; the retention pass does it too. Returns how many
        producer states (one per partition) went."""
        return self.store.expire_producers()

    # --- metadata ----------------------------------------------------------------------------

    async def create_stream(self, cmd: CreateStream) -> CreateStreamResult:
        return CreateStreamResult(info=(await self._admin.create_stream(cmd)).info())

    async def delete_stream(self, cmd: DeleteStream) -> DeleteStreamResult:
        await self._admin.delete_stream(cmd.stream)
        return DeleteStreamResult()

    async def update_stream(self, cmd: UpdateStream) -> UpdateStreamResult:
        stream = await self._admin.update_stream(cmd.stream, cmd.new_name)
        return UpdateStreamResult(info=stream.info())

    async def purge_stream(self, cmd: PurgeStream) -> PurgeStreamResult:
        await self._admin.purge_stream(cmd.stream)
        return PurgeStreamResult()

    async def list_streams(self, cmd: ListStreams) -> ListStreamsResult:
        self.store.check_open()
        await trio.lowlevel.checkpoint()
        streams = sorted(self.store.streams.values(), key=lambda s: s.id)
        return ListStreamsResult(streams=tuple(s.info() for s in streams))

    async def create_topic(self, cmd: CreateTopic) -> CreateTopicResult:
        return CreateTopicResult(info=(await self._admin.create_topic(cmd)).info(cmd.topic.stream))

    async def delete_topic(self, cmd: DeleteTopic) -> DeleteTopicResult:
        await self._admin.delete_topic(cmd.topic)
        return DeleteTopicResult()

    async def list_topics(self, cmd: ListTopics) -> ListTopicsResult:
        self.store.check_open()
        await trio.lowlevel.checkpoint()
        if cmd.stream is None:
            streams = sorted(self.store.streams.values(), key=lambda s: s.id)
        else:
            streams = [self.store.stream(cmd.stream)]
        return ListTopicsResult(topics=tuple(t for s in streams for t in s.info().topics))

    async def describe_topic(self, cmd: DescribeTopic) -> DescribeTopicResult:
        topic = self.store.topic(cmd.topic)
        await trio.lowlevel.checkpoint()
        return DescribeTopicResult(info=topic.info(cmd.topic.stream))

    async def update_topic(self, cmd: UpdateTopic) -> UpdateTopicResult:
        topic = await self._admin.update_topic(cmd.topic, cmd.config, cmd.new_name, cmd.reset)
        return UpdateTopicResult(info=topic.info(cmd.topic.stream))

    async def create_partitions(self, cmd: CreatePartitions) -> CreatePartitionsResult:
        topic = await self._admin.create_partitions(cmd.topic, cmd.total)
        return CreatePartitionsResult(info=topic.info(cmd.topic.stream))

    async def delete_partitions(self, cmd: DeletePartitions) -> DeletePartitionsResult:
        topic = await self._admin.delete_partitions(cmd)
        return DeletePartitionsResult(info=topic.info(cmd.topic.stream))

    async def purge_topic(self, cmd: PurgeTopic) -> PurgeTopicResult:
        await self._admin.purge_topic(cmd.topic)
        return PurgeTopicResult()

    async def delete_records(self, cmd: DeleteRecords) -> DeleteRecordsResult:
        async with self.store.lock:
            part = self.store.partition(cmd.topic, cmd.partition)
            try:
                start = part.delete_before(cmd.offset)
            except OSError as exc:
                raise storage_error(exc, "moving the log start") from exc
        return DeleteRecordsResult(log_start_offset=start)

    # --- data --------------------------------------------------------------------------------

    async def append(self, cmd: Append) -> AppendResult:
        part = self.store.partition(cmd.topic, cmd.partition)
        if cmd.transactional_id is not None:
            self.transactions.check_append(
                cmd.producer_id, cmd.producer_epoch, cmd.topic, cmd.partition
            )
        try:
            result = await part.append(
                cmd.batch,
                self.store.now_us(),
                sync=self.store.sync,
                producer_id=cmd.producer_id,
                producer_epoch=cmd.producer_epoch,
                base_sequence=cmd.base_sequence,
                transactional=cmd.transactional_id is not None,
            )
        except StorageError as exc:
            self._storage_failed(exc, part.commit.fsync_failed)
            raise
        self.store.health.succeeded()
        return result

    def _storage_failed(self, exc: StorageError, fsync: bool) -> None:
        if fsync:
            self.store.health.fsync_failed(exc)
        else:
            self.store.health.failed(exc)

    async def read(self, cmd: Read) -> ReadResult:
        return await self.store.partition(cmd.topic, cmd.partition).read(cmd)

    async def await_data(self, cmd: AwaitData) -> AwaitDataResult:
        # One event every partition sets when it grows, is cut or goes: no task per partition.
        start = trio.current_time()
        parts = []
        for topic, number, offset in cmd.targets:
            try:
                part = self.store.partition(topic, number)
            except GatewayError:  # the read that follows reports it
                await trio.lowlevel.checkpoint()
                return AwaitDataResult()
            if part.has_news(offset):
                await trio.lowlevel.checkpoint()
                return AwaitDataResult()
            parts.append(part)
        event = trio.Event()
        for part in parts:
            part.watch(event)
        try:
            with trio.move_on_at(start + cmd.max_wait_ms / 1000):
                await event.wait()
        finally:
            for part in parts:
                part.unwatch(event)
        return AwaitDataResult(waited_s=trio.current_time() - start)

    async def list_offsets(self, cmd: ListOffsets) -> ListOffsetsResult:
        part = self.store.partition(cmd.topic, cmd.partition)
        await trio.lowlevel.checkpoint()
        return part.list_offsets(cmd.spec, cmd.timestamp_us, cmd.isolation)

    async def commit_offset(self, cmd: CommitOffset) -> CommitOffsetResult:
        self.store.partition(cmd.topic, cmd.partition)
        if cmd.offset < 0:
            raise InvalidRequest(f"a committed offset must be >= 0, not {cmd.offset}")
        key = (cmd.group, cmd.topic.stream, cmd.topic.name, cmd.partition)
        try:
            await self.store.durable(
                self.store.offsets.put(key, cmd.offset, cmd.metadata, cmd.leader_epoch)
            )
        except StorageError as exc:
            self._storage_failed(exc, self.store.offsets.commit.fsync_failed)
            raise
        self.store.health.succeeded()
        return CommitOffsetResult()

    async def fetch_offset(self, cmd: FetchOffset) -> FetchOffsetResult:
        self.store.partition(cmd.topic, cmd.partition)
        await trio.lowlevel.checkpoint()
        key = (cmd.group, cmd.topic.stream, cmd.topic.name, cmd.partition)
        found = self.store.offsets.get(key)
        if found is None:
            return FetchOffsetResult(offset=None)
        return FetchOffsetResult(offset=found[0], metadata=found[1], leader_epoch=found[2])

    async def delete_offset(self, cmd: DeleteOffset) -> DeleteOffsetResult:
        self.store.partition(cmd.topic, cmd.partition)
        key = (cmd.group, cmd.topic.stream, cmd.topic.name, cmd.partition)
        await self.store.durable(self.store.offsets.delete([key]))
        return DeleteOffsetResult()

    # --- transactions (transactions.py) -------------------------------------------------------

    async def init_transaction(self, cmd: InitTransaction) -> InitProducerResult:
        return await self.transactions.init(cmd)

    async def add_to_transaction(self, cmd: AddToTransaction) -> AddToTransactionResult:
        return await self.transactions.add(cmd)

    async def commit_transaction_offsets(
        self, cmd: CommitTransactionOffsets
    ) -> CommitTransactionOffsetsResult:
        return await self.transactions.commit_offsets(cmd)

    async def end_transaction(self, cmd: EndTransaction) -> EndTransactionResult:
        return await self.transactions.end(cmd)

    async def stats(self, cmd: Stats) -> StatsResult:
        self.store.check_open()
        await trio.lowlevel.checkpoint()
        infos = [p.info() for p in self.store.partitions()]
        return StatsResult(
            streams=len(self.store.streams),
            topics=sum(len(s.topics) for s in self.store.streams.values()),
            partitions=len(infos),
            messages=sum(i.next_offset - i.log_start_offset for i in infos),
            size_bytes=sum(i.size_bytes for i in infos),
            consumer_groups=self.store.offsets.group_count(),
        )


@asynccontextmanager
async def open_embedded(path: str | os.PathLike[str], **kw: Any) -> AsyncIterator[EmbeddedBackend]:
    """Open the store (recovery included), yield the running backend, then fsync and close."""
    async with running(EmbeddedBackend(path, **kw)) as started:
        yield started
