"""The ``Backend`` protocol: one async method per canonical command the backend executes.

Group membership and authentication are not here: the router sends them to
``gateway.coordination`` and the user store, unless the backend itself is where they are decided
for every gateway in front of it (``NativeGroups``: a Kafka broker's group coordinator;
``NativeProducerIds``: a broker that grants producer ids and deduplicates by them). Offsets are
here because every backend has a place to keep them (natively or in a file/internal topic);
``capabilities`` tells the router what the backend does natively.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

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
    DeleteGroup,
    DeleteGroupResult,
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
    DescribeGroup,
    DescribeGroupResult,
    DescribeTopic,
    DescribeTopicResult,
    EndTransaction,
    EndTransactionResult,
    FetchOffset,
    FetchOffsetResult,
    Heartbeat,
    HeartbeatResult,
    InitProducer,
    InitProducerResult,
    InitTransaction,
    JoinGroup,
    JoinGroupResult,
    LeaveGroup,
    LeaveGroupResult,
    ListGroups,
    ListGroupsResult,
    ListOffsets,
    ListOffsetsResult,
    ListStreams,
    ListStreamsResult,
    ListTopics,
    ListTopicsResult,
    PublisherSequence,
    PublisherSequenceResult,
    PurgeStream,
    PurgeStreamResult,
    PurgeTopic,
    PurgeTopicResult,
    Read,
    ReadResult,
    Stats,
    StatsResult,
    SyncGroup,
    SyncGroupResult,
    UpdateStream,
    UpdateStreamResult,
    UpdateTopic,
    UpdateTopicResult,
    WireFormat,
)
from gateway.redact import mask_url


class BackendUrlError(ValueError):
    """A backend URL that cannot be used; the message is fit to show the user."""


def shown_url(url: str) -> str:
    """``url`` fit for an error message: credentials masked (``redact.mask_url``) and the
    query left out, since an option's value may be a secret whatever its name."""
    prefix, sep, rest = mask_url(url).shown.partition("://")
    cut = min((i for i in (rest.find("?"), rest.find("#")) if i >= 0), default=len(rest))
    return prefix + sep + rest[:cut]


class Retries:
    """A backend's retries, told to whoever listens (the gateway's metrics): ``reconnect`` (a
    connection attempt after one failed or broke) and ``request`` (a request sent again after
    a transient refusal). Called from the adapters' own loops; a listener must not block."""

    __slots__ = ("_listener",)

    def __init__(self) -> None:
        self._listener: Callable[[str], None] | None = None

    def listen(self, listener: Callable[[str], None]) -> None:
        self._listener = listener

    def __call__(self, reason: str) -> None:
        if self._listener is not None:
            self._listener(reason)


@dataclass(frozen=True, slots=True, kw_only=True)
class BackendSettings:
    """What the gateway's configuration sets for whichever backend its URL selects (the store's
    own settings apply to the embedded log; the topic defaults to backends that create topics)."""

    fsync: str = "interval:1000"
    segment_bytes: int = 64 << 20
    retention_ms: int | None = None
    retention_bytes: int | None = None
    max_message_bytes: int = 16 << 20
    max_open_files: int = 0  # embedded: segment files kept open (0 = half of RLIMIT_NOFILE)


@dataclass(frozen=True, slots=True, kw_only=True)
class Capabilities:
    native_groups: bool = False  # False: gateway.coordination runs the group protocol
    native_offsets: bool = True  # False: gateway.coordination keeps offsets
    timestamp_index: bool = True  # ListOffsets by timestamp without a scan
    idempotent_producers: bool = False  # Append dedups by producer id and sequence
    duplicate_offsets: bool = True  # a duplicate append answers the original offsets
    # Append.publisher/publishing_ids are deduplicated by the broker (RabbitMQ Stream's own),
    # for every gateway in front of it: NativePublisherDedup.
    publisher_dedup: bool = False
    streams: bool = True  # namespaces; False: only the default stream
    max_message_bytes: int = 64 << 20
    # The segment size a topic gets when it names none (None: the broker's own, unknown here).
    segment_bytes: int | None = None
    # Wire formats the backend stores as-is (batches in them are never decoded on append).
    wire_formats: frozenset[WireFormat] = field(default_factory=frozenset)


@runtime_checkable
class Backend(Protocol):
    name: str  # label value: embedded, rabbitmq_stream, kafka, iggy
    capabilities: Capabilities

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Open the backend, report started, run its background work until cancelled, close."""
        ...

    async def ping(self) -> None:
        """Raise ``BackendUnavailable`` unless the backend answers (readiness)."""
        ...

    async def create_stream(self, cmd: CreateStream) -> CreateStreamResult: ...
    async def delete_stream(self, cmd: DeleteStream) -> DeleteStreamResult: ...
    async def update_stream(self, cmd: UpdateStream) -> UpdateStreamResult: ...
    async def purge_stream(self, cmd: PurgeStream) -> PurgeStreamResult: ...
    async def list_streams(self, cmd: ListStreams) -> ListStreamsResult: ...
    async def create_topic(self, cmd: CreateTopic) -> CreateTopicResult: ...
    async def delete_topic(self, cmd: DeleteTopic) -> DeleteTopicResult: ...
    async def list_topics(self, cmd: ListTopics) -> ListTopicsResult: ...
    async def describe_topic(self, cmd: DescribeTopic) -> DescribeTopicResult: ...
    async def update_topic(self, cmd: UpdateTopic) -> UpdateTopicResult: ...
    async def create_partitions(self, cmd: CreatePartitions) -> CreatePartitionsResult: ...
    async def delete_partitions(self, cmd: DeletePartitions) -> DeletePartitionsResult: ...
    async def purge_topic(self, cmd: PurgeTopic) -> PurgeTopicResult: ...
    async def append(self, cmd: Append) -> AppendResult: ...
    async def read(self, cmd: Read) -> ReadResult: ...
    async def list_offsets(self, cmd: ListOffsets) -> ListOffsetsResult: ...
    async def commit_offset(self, cmd: CommitOffset) -> CommitOffsetResult: ...
    async def fetch_offset(self, cmd: FetchOffset) -> FetchOffsetResult: ...
    async def delete_offset(self, cmd: DeleteOffset) -> DeleteOffsetResult: ...
    async def stats(self, cmd: Stats) -> StatsResult: ...


@runtime_checkable
class NativeGroups(Protocol):
    """A backend whose broker coordinates consumer groups (``capabilities.native_groups``): the
    router forwards membership to it, so members through every gateway on that broker form one
    group, and a member's commits carry its generation for the broker to fence."""

    async def join_group(self, cmd: JoinGroup) -> JoinGroupResult: ...
    async def sync_group(self, cmd: SyncGroup) -> SyncGroupResult: ...
    async def heartbeat(self, cmd: Heartbeat) -> HeartbeatResult: ...
    async def leave_group(self, cmd: LeaveGroup) -> LeaveGroupResult: ...
    async def describe_group(self, cmd: DescribeGroup) -> DescribeGroupResult: ...
    async def list_groups(self, cmd: ListGroups) -> ListGroupsResult: ...


@runtime_checkable
class DataWaits(Protocol):
    """A backend that long-polls many partitions with one waiter (``AwaitData``, a Kafka Fetch
    over thousands of partitions); for the others the router waits with a Read per partition."""

    async def await_data(self, cmd: AwaitData) -> AwaitDataResult: ...


@runtime_checkable
class RecordDeletion(Protocol):
    """A backend that can move a partition's log start (Kafka DeleteRecords)."""

    async def delete_records(self, cmd: DeleteRecords) -> DeleteRecordsResult: ...


@runtime_checkable
class NativeGroupDeletion(Protocol):
    """A NativeGroups backend whose broker also deletes groups (Kafka's DeleteGroups)."""

    async def delete_group(self, cmd: DeleteGroup) -> DeleteGroupResult: ...


@runtime_checkable
class NativeProducerIds(Protocol):
    """A backend that grants idempotent-producer ids and deduplicates appends by them itself
    (``capabilities.idempotent_producers``), the same for every gateway in front of it."""

    async def init_producer(self, cmd: InitProducer) -> InitProducerResult: ...


@runtime_checkable
class Transactions(Protocol):
    """A backend where Kafka transactions hold (KIP-98): a coordinator that keeps each
    transactional id's producer id, epoch and open transaction durably, writes the commit or
    abort markers, and serves reads by ``Read.isolation`` (the embedded store's own; a Kafka
    broker's, passed through)."""

    async def init_transaction(self, cmd: InitTransaction) -> InitProducerResult: ...
    async def add_to_transaction(self, cmd: AddToTransaction) -> AddToTransactionResult: ...
    async def commit_transaction_offsets(
        self, cmd: CommitTransactionOffsets
    ) -> CommitTransactionOffsetsResult: ...
    async def end_transaction(self, cmd: EndTransaction) -> EndTransactionResult: ...


@runtime_checkable
class NativePublisherDedup(Protocol):
    """A backend whose broker deduplicates by publisher reference and publishing id
    (``capabilities.publisher_dedup``) and tells the highest id it stored."""

    async def publisher_sequence(self, cmd: PublisherSequence) -> PublisherSequenceResult: ...


class LogApplier(Protocol):
    """What a shared log's records build on each gateway (a replica of shared groups)."""

    next_offset: int  # the next record to apply

    def apply_entry(self, data: bytes, *, offset: int, timestamp_ms: int) -> str | None:
        """Apply one record (``timestamp_ms``: the broker's); its rid, if it has one."""
        ...


class SharedLog(Protocol):
    @property
    def ready(self) -> bool: ...

    async def write(self, record: dict[str, Any]) -> None:
        """Append ``record``; return once this gateway's applier applied it."""
        ...


@runtime_checkable
class SharedLogs(Protocol):
    """A backend without a group coordinator that still gives every gateway on it one log of
    records, appended by all and read back by all in one order: the gateways replicate their
    groups over it (``coordination.shared_groups``)."""

    def shared_log(self, applier: LogApplier) -> SharedLog:
        """The log, applied by ``applier``; call before ``run``."""
        ...


B = TypeVar("B", bound=Backend)


@asynccontextmanager
async def running(
    backend: B, ready: Callable[[], Awaitable[None]] | None = None
) -> AsyncIterator[B]:
    """Run ``backend`` (its ``run`` started in a nursery), wait for ``ready`` if given, yield it,
    then stop it. The caller's own exception is re-raised as it is, not in an ExceptionGroup."""
    body_error: BaseException | None = None
    async with trio.open_nursery() as nursery:
        await nursery.start(backend.run)
        try:
            if ready is not None:
                await ready()
            yield backend
        except BaseException as exc:
            body_error = exc
        finally:
            nursery.cancel_scope.cancel()
    if body_error is not None:
        raise body_error
