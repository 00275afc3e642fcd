"""Executes canonical commands on the backend, timing every one into Prometheus.

Listeners never call the backend directly: everything goes through ``Router.execute`` so that
every command is measured the same way and failures are always ``GatewayError``s.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import structlog
import trio

from gateway.access_log import AccessLog, Client, Line, batch_bytes
from gateway.authorization import Authorizer
from gateway.backends import (
    Backend,
    DataWaits,
    NativeGroupDeletion,
    NativeGroups,
    NativeProducerIds,
    NativePublisherDedup,
    RecordDeletion,
    Transactions,
)
from gateway.coordination import GroupCoordinator, Groups, ProducerIds, SharedGroups, UserStore
from gateway.coordination.login_guard import LoginRefused
from gateway.metrics import Metrics
from gateway.model import (
    AddToTransaction,
    Append,
    AppendResult,
    Authenticate,
    AwaitData,
    AwaitDataResult,
    Command,
    CommitOffset,
    CommitOffsetResult,
    CommitTransactionOffsets,
    CreatePartitions,
    CreateStream,
    CreateTopic,
    DeleteGroup,
    DeleteGroupResult,
    DeleteOffset,
    DeletePartitions,
    DeleteRecords,
    DeleteStream,
    DeleteStreamResult,
    DeleteTopic,
    DeleteTopicResult,
    DescribeGroup,
    DescribeTopic,
    EndTransaction,
    FetchOffset,
    Forbidden,
    GatewayError,
    Heartbeat,
    InitProducer,
    InitProducerResult,
    InitTransaction,
    InvalidPartitions,
    JoinGroup,
    LeaveGroup,
    ListGroups,
    ListGroupsResult,
    ListOffsets,
    ListStreams,
    ListStreamsResult,
    ListTopics,
    ListTopicsResult,
    NotFound,
    PublisherSequence,
    PurgeStream,
    PurgeTopic,
    Read,
    ReadResult,
    Stats,
    SyncGroup,
    Topic,
    UnknownGroup,
    Unsupported,
    UpdateStream,
    UpdateTopic,
    is_internal,
)

# Commands after which the authorizer's name -> id resolution is stale.
_RENAMING = (CreateStream, DeleteStream, UpdateStream, CreateTopic, DeleteTopic, UpdateTopic)
R = TypeVar("R")
C = TypeVar("C", bound=Command[Any])
log = structlog.get_logger("streamgate.router")

_LISTINGS = (ListStreamsResult, ListTopicsResult, ListGroupsResult)
_PARTITIONING = (CreateTopic, CreatePartitions)
# Commands whose authorization depends on their type and topic only (``Authorizer.check``).
_PER_TOPIC = (Read, Append, FetchOffset, CommitOffset, ListOffsets)


def _without_internal(result: Any) -> Any:
    if isinstance(result, ListStreamsResult):
        streams = tuple(
            dataclasses.replace(
                s, topics=tuple(t for t in s.topics if not is_internal(t.topic.name))
            )
            for s in result.streams
            if not is_internal(s.name)
        )
        return ListStreamsResult(streams=streams)
    if isinstance(result, ListTopicsResult):
        return ListTopicsResult(
            topics=tuple(t for t in result.topics if not is_internal(t.topic.name))
        )
    return ListGroupsResult(groups=tuple(g for g in result.groups if not is_internal(g.group)))


# What executes a command, keyed by its class. The value type cannot name the key's class, so
# entries go in only through ``_bind``, where mypy checks that the method accepts that class.
Handlers = Mapping[type[Command[Any]], Callable[[Any], Awaitable[Any]]]


def _bind(
    table: dict[type[Command[Any]], Callable[[Any], Awaitable[Any]]],
    cls: type[C],
    fn: Callable[[C], Awaitable[Any]],
) -> None:
    table[cls] = fn


@dataclass(slots=True)
class RequestContext:
    """One wire request: the labels its commands are measured under, and the time they took
    (the listener subtracts it to get the gateway's own overhead); for the access log, whom it
    came from, how long its reads long-polled, and its commands' lines until it ends."""

    protocol: str
    wire_command: str
    command_s: float = 0.0
    client: Client | None = None
    waited_s: float = 0.0
    access_lines: list[Line] | None = None
    errors: int = 0  # commands of this request that failed (each counted in the metrics)
    # Whose request it is, for authorization: the authenticated user's name, or None for a
    # connection that did not authenticate (it acts as the ``anonymous`` user). ``system``:
    # a command the gateway runs for its own bookkeeping (shared groups), not for a client.
    user: str | None = None
    system: bool = False
    # Data commands already allowed in this request, by command type and topic: a Fetch or a
    # Produce over a thousand partitions of one topic is authorized once, not a thousand times
    # (permissions are read afresh by the next request). None: every command is checked (a
    # context that outlives a request: a RabbitMQ subscription's deliveries, which a revoked
    # permission must stop).
    allowed: set[tuple[type, Topic]] | None = None


class Router:
    def __init__(
        self,
        backend: Backend,
        metrics: Metrics,
        *,
        coordinator: Groups | None = None,
        users: UserStore | None = None,
        producer_ids: ProducerIds | None = None,
        access_log: AccessLog | None = None,
        on_commit: Callable[[str, Topic], None] | None = None,
        authorizer: Authorizer | None = None,
        max_partitions_per_topic: int | None = None,
    ) -> None:
        self.backend = backend
        # limits.max_partitions_per_topic, for every listener and backend (None: the backend's)
        self.max_partitions = max_partitions_per_topic
        # None: every command runs (a router built without users, e.g. the client commands)
        self.authorizer = authorizer
        self.metrics = metrics
        self.access_log = access_log
        # Told of every committed (group, topic): the lag sampler learns which groups to follow.
        self.on_commit = on_commit
        self.coordinator = coordinator
        self._producer_ids = producer_ids if producer_ids is not None else ProducerIds()
        self._handlers: Handlers = self._bind_handlers(backend, coordinator, users)

    def _bind_handlers(
        self, backend: Backend, coordinator: Groups | None, users: UserStore | None
    ) -> Handlers:
        # Every command the Backend protocol has a method for; group membership goes to the
        # broker when the backend is where groups are decided (NativeGroups), else to the
        # gateway's coordinator; producer ids to the broker that deduplicates by them, else the
        # gateway grants them where the backend deduplicates; authentication to the user store.
        # A command left out here is answered ``Unsupported``.
        t: dict[type[Command[Any]], Callable[[Any], Awaitable[Any]]] = {}
        _bind(t, CreateStream, backend.create_stream)
        _bind(t, DeleteStream, backend.delete_stream)
        _bind(t, UpdateStream, backend.update_stream)
        _bind(t, PurgeStream, backend.purge_stream)
        _bind(t, ListStreams, backend.list_streams)
        _bind(t, CreateTopic, backend.create_topic)
        _bind(t, DeleteTopic, backend.delete_topic)
        _bind(t, ListTopics, backend.list_topics)
        _bind(t, DescribeTopic, backend.describe_topic)
        _bind(t, UpdateTopic, backend.update_topic)
        _bind(t, CreatePartitions, backend.create_partitions)
        _bind(t, DeletePartitions, backend.delete_partitions)
        _bind(t, PurgeTopic, backend.purge_topic)
        if isinstance(backend, RecordDeletion):
            _bind(t, DeleteRecords, backend.delete_records)
        _bind(t, Append, backend.append)
        _bind(t, Read, backend.read)
        _bind(
            t, AwaitData, backend.await_data if isinstance(backend, DataWaits) else self._await_data
        )
        _bind(t, ListOffsets, backend.list_offsets)
        _bind(t, CommitOffset, backend.commit_offset)
        _bind(t, FetchOffset, backend.fetch_offset)
        _bind(t, DeleteOffset, backend.delete_offset)
        _bind(t, Stats, backend.stats)
        # Producer ids only where something deduplicates by them (the broker granting them, or
        # the backend by ids the gateway grants); elsewhere InitProducer is Unsupported.
        if isinstance(backend, NativeProducerIds) and backend.capabilities.idempotent_producers:
            _bind(t, InitProducer, backend.init_producer)
        elif backend.capabilities.idempotent_producers:
            _bind(t, InitProducer, self._init_producer)
        if isinstance(backend, Transactions):
            # Kafka transactions only where markers, the last stable offset and a durable
            # coordinator are the backend's (elsewhere Unsupported: the listener refuses).
            _bind(t, InitTransaction, backend.init_transaction)
            _bind(t, AddToTransaction, backend.add_to_transaction)
            _bind(t, CommitTransactionOffsets, backend.commit_transaction_offsets)
            _bind(t, EndTransaction, backend.end_transaction)
        if isinstance(backend, NativePublisherDedup) and backend.capabilities.publisher_dedup:
            _bind(t, PublisherSequence, backend.publisher_sequence)
        native = isinstance(backend, NativeGroups) and backend.capabilities.native_groups
        groups: NativeGroups | None = coordinator  # the same methods, structurally
        if isinstance(backend, NativeGroups) and native:
            groups = backend
        if groups is not None:
            _bind(t, JoinGroup, groups.join_group)
            _bind(t, SyncGroup, groups.sync_group)
            _bind(t, Heartbeat, groups.heartbeat)
            _bind(t, LeaveGroup, groups.leave_group)
            _bind(t, DescribeGroup, groups.describe_group)
            _bind(t, ListGroups, groups.list_groups)
        if native and isinstance(backend, NativeGroupDeletion):
            _bind(t, DeleteGroup, backend.delete_group)
        elif not native and isinstance(coordinator, GroupCoordinator):
            # (SharedGroups would need the deletion in its log: not offered there.)
            _bind(t, DeleteGroup, self._delete_group)
        if not native and coordinator is not None:
            # replaces the backend's own: a member's commit is checked against its group first
            _bind(t, CommitOffset, self._commit_offset)
        if users is not None:
            _bind(t, Authenticate, users.authenticate)
            # A deleted stream's or topic's grants go with it: ids are reused (the embedded
            # store gives a freed topic id to the next topic), and a grant must not pass on.
            self._users = users
            _bind(t, DeleteTopic, self._delete_topic)
            _bind(t, DeleteStream, self._delete_stream)
        return t

    @property
    def groups_shared(self) -> bool:
        """Whether group membership is decided where every gateway on the backend sees it (the
        broker's coordinator, or the gateways' replicated groups), not in this process only."""
        native = self.backend.capabilities.native_groups and isinstance(self.backend, NativeGroups)
        return native or isinstance(self.coordinator, SharedGroups)

    def supports(self, cls: type[Command[Any]]) -> bool:
        """Whether ``execute`` has something to run a command of this class on."""
        return cls in self._handlers

    async def _init_producer(self, cmd: InitProducer) -> InitProducerResult:
        # A fresh id at epoch 0 every time, whatever id and epoch the request names: Kafka's
        # TransactionCoordinator.handleInitProducerId answers a request without a transactional
        # id so ("blindly accept the request and return a new producerId"). An idempotent
        # producer bumps its epoch itself (librdkafka, the Java client) and the backend checks
        # the new epoch on its batches.
        await trio.lowlevel.checkpoint()
        return InitProducerResult(producer_id=self._producer_ids.allocate(), producer_epoch=0)

    async def _ids(self, stream: str, topic: str | None) -> tuple[int, int | None] | None:
        for s in (await self.backend.list_streams(ListStreams())).streams:
            if s.name == stream:
                if topic is None:
                    return s.id, None
                tid = next((t.id for t in s.topics if t.topic.name == topic), None)
                return None if tid is None else (s.id, tid)
        return None

    async def _delete_topic(self, cmd: DeleteTopic) -> DeleteTopicResult:
        ids = await self._ids(cmd.topic.stream, cmd.topic.name)
        result = await self.backend.delete_topic(cmd)
        if ids is not None:
            self._users.revoke_grants(*ids)
        return result

    async def _delete_stream(self, cmd: DeleteStream) -> DeleteStreamResult:
        ids = await self._ids(cmd.stream, None)
        result = await self.backend.delete_stream(cmd)
        if ids is not None:
            self._users.revoke_grants(ids[0])
        return result

    async def _await_data(self, cmd: AwaitData) -> AwaitDataResult:
        # A Read per partition that waits for one message and reads none; the first to return
        # (data, a deadline, an error such as a deleted topic) ends them all.
        read = self.backend.read
        waited = [0.0]  # as the read that ended it measured its wait

        async def one(topic: Topic, partition: int, offset: int, stop: trio.CancelScope) -> None:
            with contextlib.suppress(GatewayError):
                result = await read(
                    Read(topic=topic, partition=partition, offset=offset,
                         max_wait_ms=cmd.max_wait_ms, max_bytes=1, max_messages=0)
                )  # fmt: skip
                waited.append(result.waited_s)
            stop.cancel()

        async with trio.open_nursery() as nursery:
            for topic, partition, offset in cmd.targets:
                nursery.start_soon(one, topic, partition, offset, nursery.cancel_scope)
        return AwaitDataResult(waited_s=max(waited))

    async def _commit_offset(self, cmd: CommitOffset) -> CommitOffsetResult:
        # A commit from a group member must come from the current generation (Kafka's
        # OffsetCommit rule), checked where the group state lives.
        assert self.coordinator is not None
        self.coordinator.check_commit(cmd.group, cmd.topic.stream, cmd.generation, cmd.member_id)
        return await self.backend.commit_offset(cmd)

    async def _delete_group(self, cmd: DeleteGroup) -> DeleteGroupResult:
        # Kafka's DeleteGroups: only an Empty (or memberless, offsets-only) group goes, and its
        # committed offsets with it; a group known nowhere is GROUP_ID_NOT_FOUND.
        assert isinstance(self.coordinator, GroupCoordinator)
        known = True
        try:
            self.coordinator.delete_group(cmd.stream, cmd.group)
        except UnknownGroup:
            known = False
        try:
            topics = (await self.backend.list_topics(ListTopics(stream=cmd.stream))).topics
        except NotFound:
            topics = ()
        for info in topics:
            for p in info.partitions:
                group, topic, n = cmd.group, info.topic, p.partition
                fetch = FetchOffset(group=group, topic=topic, partition=n)
                if (await self.backend.fetch_offset(fetch)).offset is None:
                    continue
                known = True
                delete = DeleteOffset(group=group, topic=topic, partition=n)
                await self.backend.delete_offset(delete)
        if not known:
            raise UnknownGroup(f"group {cmd.group!r} does not exist")
        return DeleteGroupResult()

    async def query(self, cmd: Command[R]) -> R:
        """Run a command for the gateway's own bookkeeping (the lag sampler): not a client's,
        so neither timed into the metrics nor written to the access log."""
        handler = self._handlers.get(type(cmd))
        if handler is None:
            raise Unsupported(f"{cmd.name} is not supported by the {self.backend.name} backend")
        result: R = await handler(cmd)
        return result

    async def permits(self, cmd: Command[Any], ctx: RequestContext) -> bool:
        """Whether ``ctx``'s user may run ``cmd`` (what a listener filters a listing by)."""
        if self.authorizer is None or ctx.system:
            return True
        return await self.authorizer.permits(cmd, ctx.user)

    async def _authorize(self, cmd: Command[Any], ctx: RequestContext) -> None:
        assert self.authorizer is not None
        t0 = time.perf_counter()
        try:
            await self.authorizer.check(cmd, ctx.user)
        except Forbidden as exc:
            elapsed = time.perf_counter() - t0
            ctx.command_s += elapsed
            ctx.errors += 1
            m = self.metrics
            m.authorization_denied.labels(ctx.protocol, cmd.name).inc()
            m.observe_command(ctx.protocol, cmd.name, ctx.wire_command, elapsed, exc.error_type)
            if self.access_log is not None:
                self.access_log.command(cmd, ctx, None, elapsed, None, exc.error_type)
            log.debug("command denied", command=cmd.name, protocol=ctx.protocol, error=exc.message)
            raise

    async def execute(self, cmd: Command[R], ctx: RequestContext) -> R:
        name = cmd.name
        if self.authorizer is not None and not ctx.system:
            if ctx.allowed is not None and isinstance(cmd, _PER_TOPIC):
                key = (type(cmd), cmd.topic)
                if key not in ctx.allowed:
                    await self._authorize(cmd, ctx)
                    ctx.allowed.add(key)
            else:
                await self._authorize(cmd, ctx)
        handler = self._handlers.get(type(cmd))
        m = self.metrics
        t0 = time.perf_counter()
        try:
            if handler is None:
                raise Unsupported(f"{name} is not supported by the {self.backend.name} backend")
            if isinstance(cmd, _PARTITIONING):
                self.check_partitions(cmd)
            result: R = await handler(cmd)
            listing = isinstance(result, _LISTINGS)
            if listing and not (ctx.system or getattr(cmd, "internal", False)):
                result = _without_internal(result)
        except GatewayError as exc:
            elapsed = time.perf_counter() - t0
            ctx.command_s += elapsed
            ctx.errors += 1
            m.observe_command(ctx.protocol, name, ctx.wire_command, elapsed, exc.error_type)
            m.child(m.backend_request_duration, m.backend, name, "error").observe(elapsed)
            m.backend_errors.labels(m.backend, exc.error_type).inc()
            if isinstance(exc, LoginRefused):  # backoff, rate limit or a full login queue
                m.connection_errors.labels(ctx.protocol, "login_throttled").inc()
            if self.access_log is not None:
                self.access_log.command(cmd, ctx, None, elapsed, None, exc.error_type)
            raise
        except (trio.Cancelled, KeyboardInterrupt):
            raise
        except Exception as exc:
            # A bug or an unexpected OS error in a backend must fail the one command with a
            # protocol error, not the connection or the listener.
            elapsed = time.perf_counter() - t0
            ctx.command_s += elapsed
            ctx.errors += 1
            log.exception("backend command failed", command=name, protocol=ctx.protocol)
            m.observe_command(ctx.protocol, name, ctx.wire_command, elapsed, "internal")
            m.child(m.backend_request_duration, m.backend, name, "error").observe(elapsed)
            m.backend_errors.labels(m.backend, "internal").inc()
            if self.access_log is not None:
                self.access_log.command(cmd, ctx, None, elapsed, None, "internal")
            raise GatewayError(f"internal error in {name}: {exc.__class__.__name__}") from exc
        elapsed = time.perf_counter() - t0
        ctx.command_s += elapsed
        if self.authorizer is not None and isinstance(cmd, _RENAMING):
            self.authorizer.invalidate()  # names and ids changed: resolve afresh
        waited: float | None = None
        if isinstance(result, (ReadResult, AwaitDataResult)):
            waited = result.waited_s
            if waited:
                m.child(m.long_poll_wait, ctx.protocol, m.backend).observe(waited)
                ctx.waited_s += waited
                elapsed = max(0.0, elapsed - waited)
            if isinstance(result, ReadResult) and result.batches:  # (most of a wide fetch: none)
                m.child(m.messages_out, ctx.protocol).inc(result.count)
                if m.topics and isinstance(cmd, Read) and m.topics(cmd.topic):
                    self._topic_out(cmd.topic, result)
        elif isinstance(result, AppendResult) and not result.duplicate:
            m.child(m.messages_in, ctx.protocol).inc(result.count)
            if m.topics and isinstance(cmd, Append) and m.topics(cmd.topic):
                self._topic_in(cmd, result.count)
        elif self.on_commit is not None and isinstance(cmd, CommitOffset):
            self.on_commit(cmd.group, cmd.topic)
        m.observe_command(ctx.protocol, name, ctx.wire_command, elapsed)
        m.child(m.backend_request_duration, m.backend, name, "ok").observe(elapsed)
        if self.access_log is not None:
            self.access_log.command(cmd, ctx, result, elapsed, waited, "")
        return result

    def check_partitions(self, cmd: CreateTopic | CreatePartitions) -> None:
        """``limits.max_partitions_per_topic`` (``execute`` checks it; a validate-only request
        asks here)."""
        total = cmd.partitions if isinstance(cmd, CreateTopic) else cmd.total
        if self.max_partitions is not None and total > self.max_partitions:
            # Kafka has no hard limit of its own: the configured one, as INVALID_PARTITIONS.
            raise InvalidPartitions(
                f"{cmd.topic}: {total} partitions asked, at most {self.max_partitions} per topic"
                " (limits.max_partitions_per_topic)"
            )

    def _topic_in(self, cmd: Append, count: int) -> None:
        m, t = self.metrics, cmd.topic
        m.topic_messages_in.labels(t.stream, t.name).inc(count)
        m.topic_bytes_in.labels(t.stream, t.name).inc(batch_bytes(cmd.batch))

    def _topic_out(self, topic: Topic, result: ReadResult) -> None:
        m = self.metrics
        m.topic_messages_out.labels(topic.stream, topic.name).inc(result.count)
        m.topic_bytes_out.labels(topic.stream, topic.name).inc(
            sum(batch_bytes(b) for b in result.batches)
        )


__all__ = ["RequestContext", "Router"]
