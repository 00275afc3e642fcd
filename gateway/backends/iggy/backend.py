"""``IggyBackend``: the ``Backend`` protocol on a real Iggy server (DESIGN.md §4), over Iggy's
binary TCP protocol in the current (VSR) framing, with the client role of ``protocols.iggy``.

A canonical stream is an Iggy stream, a topic an Iggy topic, partitions 0-based (iggy.md §4).
Kafka groups and single active consumers are replicated by every gateway on the server over a
topic of its own (``backends.topic_log``, ``coordination.shared_groups``); offsets live on the
server, in Iggy single consumers. The connections and their
health are ``iggy_pool``'s, streams and topics ``iggy_admin``'s, messages and offsets
``iggy_data``'s.
"""

from __future__ import annotations

from urllib.parse import parse_qs, unquote, urlsplit

import trio

from gateway.backends.base import (
    BackendSettings,
    BackendUrlError,
    Capabilities,
    LogApplier,
    SharedLog,
    shown_url,
)
from gateway.backends.iggy import admin
from gateway.backends.iggy import data as iggy_data
from gateway.backends.iggy.pool import IggyTarget, Pool
from gateway.backends.tls import TLS_OPTIONS, tls_client
from gateway.backends.topic_log import TopicLog
from gateway.model import (
    Append,
    AppendResult,
    BackendUnavailable,
    CommitOffset,
    CommitOffsetResult,
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
    DeleteStream,
    DeleteStreamResult,
    DeleteTopic,
    DeleteTopicResult,
    DescribeTopic,
    DescribeTopicResult,
    FetchOffset,
    FetchOffsetResult,
    GatewayError,
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
    UpdateStream,
    UpdateStreamResult,
    UpdateTopic,
    UpdateTopicResult,
    check_name,
)
from gateway.translate.iggy.messages import WIRE_FORMAT
from gateway.translate.lossy import Lossy, ignore_lossy
from protocols import iggy as wire

DEFAULT_PORT = 8090


def parse_url(url: str) -> IggyTarget:
    """``iggy://user:password@host:port`` (DESIGN.md §4); ``iggy://<token>@host:port`` logs in
    with a personal access token (the SDK's connection string form). Without credentials the
    default root user iggy/iggy is used (iggy.md §0.6). Options: TLS (``?tls=1`` with ``ca``,
    ``cert``/``key``, ``server_name``, ``verify``: ``backends.tls``). Errors show the URL
    masked (a token too)."""
    shown = shown_url(url)
    try:
        parts = urlsplit(url)
    except ValueError:  # a bracket that does not hold an IPv6 address
        raise BackendUrlError(f"not a valid URL: {shown!r}") from None
    if parts.scheme.lower() != "iggy" or not parts.hostname:
        raise BackendUrlError(f"expected iggy://user:password@host:port, not {shown!r}")
    try:
        port = parts.port or DEFAULT_PORT
    except ValueError:
        raise BackendUrlError(f"bad port in {shown!r}") from None
    query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    unknown = sorted(set(query) - TLS_OPTIONS)
    if unknown:
        raise BackendUrlError(f"unknown iggy URL option {unknown[0]!r} in {shown!r}")
    tls = tls_client(query, tls=False, what="iggy")
    user = unquote(parts.username or "")
    password = unquote(parts.password or "")
    if user and parts.password is None:
        return IggyTarget(
            host=parts.hostname, port=port, username="", password="", token=user, tls=tls
        )
    return IggyTarget(
        host=parts.hostname, port=port, username=user or "iggy", password=password or "iggy",
        tls=tls,
    )  # fmt: skip


class IggyBackend:
    name = "iggy"

    def __init__(
        self,
        target: IggyTarget,
        *,
        connections: int = 8,
        connect_timeout_s: float = 5.0,
        request_timeout_s: float = 30.0,
        ping_interval_s: float = 2.0,
        max_message_bytes: int = 16 << 20,
        lossy: Lossy = ignore_lossy,
    ) -> None:
        self.target = target
        self.pool = Pool(
            target,
            size=connections,
            connect_timeout_s=connect_timeout_s,
            request_timeout_s=request_timeout_s,
            ping_interval_s=ping_interval_s,
        )
        self.retries = self.pool.retries  # the pool's reconnects
        # ``lossy`` is called with a field a message lost on its way to Iggy (headers, key).
        self.data = iggy_data.Data(self.pool, max_message_bytes, lossy)
        self.capabilities = Capabilities(
            native_groups=False,  # the gateways replicate theirs over a topic (shared_log)
            native_offsets=True,
            timestamp_index=True,
            idempotent_producers=False,
            streams=True,
            max_message_bytes=max_message_bytes,
            wire_formats=frozenset({WIRE_FORMAT}),
        )
        self.shared: TopicLog | None = None  # the shared log, once asked for

    @classmethod
    def from_url(cls, url: str, settings: BackendSettings | None = None) -> IggyBackend:
        s = settings or BackendSettings()
        return cls(parse_url(url), max_message_bytes=s.max_message_bytes)

    def shared_log(self, applier: LogApplier) -> SharedLog:
        """A topic on the server every gateway appends to and follows (``backends.topic_log``):
        shared consumer groups replicate over it."""
        self.shared = TopicLog(self, applier)
        return self.shared

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        if self.shared is None:
            await self.pool.run(task_status=task_status)
            return
        refused: GatewayError | None = None  # a start that fails (bad credentials) as itself
        async with trio.open_nursery() as nursery:
            try:
                await nursery.start(self.pool.run)
            except GatewayError as exc:
                refused = exc
                nursery.cancel_scope.cancel()
            else:
                await nursery.start(self.shared.run)
                task_status.started()
        if refused is not None:
            raise refused

    async def ping(self) -> None:
        reply = await self.pool.call(wire.Ping(), safe=True)
        if reply.status:
            raise BackendUnavailable(f"iggy server {self.target} answered ping with {reply.status}")

    # --- streams and topics ---------------------------------------------------------------------

    async def create_stream(self, cmd: CreateStream) -> CreateStreamResult:
        return CreateStreamResult(info=await admin.create_stream(self.pool, cmd))

    async def delete_stream(self, cmd: DeleteStream) -> DeleteStreamResult:
        check_name("stream", cmd.stream)
        await admin.request(self.pool, wire.DeleteStream(stream_id=cmd.stream))
        self.data.forget(cmd.stream)
        return DeleteStreamResult()

    async def update_stream(self, cmd: UpdateStream) -> UpdateStreamResult:
        check_name("stream", cmd.new_name)
        await admin.request(self.pool, wire.UpdateStream(stream_id=cmd.stream, name=cmd.new_name))
        self.data.forget(cmd.stream)
        return UpdateStreamResult(info=await admin.stream(self.pool, cmd.new_name))

    async def purge_stream(self, cmd: PurgeStream) -> PurgeStreamResult:
        check_name("stream", cmd.stream)
        await admin.request(self.pool, wire.PurgeStream(stream_id=cmd.stream))
        self.data.forget(cmd.stream)
        return PurgeStreamResult()

    async def list_streams(self, cmd: ListStreams) -> ListStreamsResult:
        return ListStreamsResult(streams=tuple(await admin.streams(self.pool)))

    async def create_topic(self, cmd: CreateTopic) -> CreateTopicResult:
        return CreateTopicResult(info=await admin.create_topic(self.pool, cmd))

    async def delete_topic(self, cmd: DeleteTopic) -> DeleteTopicResult:
        await admin.request(
            self.pool, wire.DeleteTopic(stream_id=cmd.topic.stream, topic_id=cmd.topic.name)
        )
        self.data.forget(cmd.topic.stream, cmd.topic.name)
        return DeleteTopicResult()

    async def list_topics(self, cmd: ListTopics) -> ListTopicsResult:
        if cmd.stream is None:
            found = await admin.streams(self.pool)
        else:
            found = [await admin.stream(self.pool, cmd.stream)]
        return ListTopicsResult(topics=tuple(t for s in found for t in s.topics))

    async def describe_topic(self, cmd: DescribeTopic) -> DescribeTopicResult:
        return DescribeTopicResult(info=await admin.describe(self.pool, cmd.topic))

    async def update_topic(self, cmd: UpdateTopic) -> UpdateTopicResult:
        info = await admin.update_topic(self.pool, cmd)
        self.data.forget(cmd.topic.stream, cmd.topic.name)
        return UpdateTopicResult(info=info)

    async def create_partitions(self, cmd: CreatePartitions) -> CreatePartitionsResult:
        return CreatePartitionsResult(info=await admin.create_partitions(self.pool, cmd))

    async def delete_partitions(self, cmd: DeletePartitions) -> DeletePartitionsResult:
        info = await admin.delete_partitions(self.pool, cmd)
        self.data.forget(cmd.topic.stream, cmd.topic.name)
        return DeletePartitionsResult(info=info)

    async def purge_topic(self, cmd: PurgeTopic) -> PurgeTopicResult:
        await admin.request(
            self.pool, wire.PurgeTopic(stream_id=cmd.topic.stream, topic_id=cmd.topic.name)
        )
        self.data.forget(cmd.topic.stream, cmd.topic.name)
        return PurgeTopicResult()

    # --- messages and offsets -------------------------------------------------------------------

    async def append(self, cmd: Append) -> AppendResult:
        return await iggy_data.append(self.data, cmd)

    async def read(self, cmd: Read) -> ReadResult:
        return await iggy_data.read(self.data, cmd)

    async def list_offsets(self, cmd: ListOffsets) -> ListOffsetsResult:
        return await iggy_data.list_offsets(self.data, cmd)

    async def commit_offset(self, cmd: CommitOffset) -> CommitOffsetResult:
        await iggy_data.commit_offset(self.data, cmd)
        return CommitOffsetResult()

    async def fetch_offset(self, cmd: FetchOffset) -> FetchOffsetResult:
        return await iggy_data.fetch_offset(self.data, cmd)

    async def delete_offset(self, cmd: DeleteOffset) -> DeleteOffsetResult:
        await iggy_data.delete_offset(self.data, cmd)
        return DeleteOffsetResult()

    async def stats(self, cmd: Stats) -> StatsResult:
        return await admin.stats(self.pool)


__all__ = ["DEFAULT_PORT", "IggyBackend", "parse_url"]
