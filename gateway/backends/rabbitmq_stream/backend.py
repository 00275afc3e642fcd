"""``RabbitStreamBackend``: the ``Backend`` protocol on a real RabbitMQ (3.10+, stream plugin;
DESIGN.md §4), over the stream protocol with the client role of ``protocols.rabbitmq_stream``.

URL: ``rabbitmq-stream://user:password@host:port/<virtual host, URL-encoded>``, e.g.
``rabbitmq-stream://guest:guest@127.0.0.1:5552/%2F``; port 5552 and vhost ``/`` by default;
``?heartbeat=<s>&frame_max=<bytes>`` tune the connection. TLS: ``rabbitmq-stream+tls://``
(port 5551 by default) or ``?tls=1``, with ``ca``, ``cert``/``key``, ``server_name`` and
``verify`` as in ``backends.tls``. One backend URL is one virtual host,
holding every canonical stream: ``rabbitmq_stream_catalog`` tells how canonical names map to
RabbitMQ streams (``default``/``t`` is stream ``t``, its partitions ``t-0``..; another stream's
topics are prefixed ``<stream>.``) and where the catalog lives.

Only what RabbitMQ 3.10.8 knows is ever sent: keys 1-25, version 1 (no ExchangeCommandVersions,
StreamStats, super-stream commands or Publish v2, which close the connection, §10).

Who does what: two ``rabbitmq_stream_link``s keep a publishing and a subscribing connection
(reconnecting with backoff; commands fail with ``BackendUnavailable`` meanwhile, ``ping`` too, so
``/readyz`` follows; why two: ``_streams``), ``_conn`` and ``_handshake`` speak the protocol,
``_catalog``/``_catalog_log`` keep the names, ``_admin`` runs the topic commands, ``_data``
messages and offsets (``_tail``, ``_fetch``, ``_publisher``, ``_streams``).

Capabilities: no native groups (the gateways replicate theirs over a log, ``shared_log``),
native offsets (StoreOffset/QueryOffset; ``delete_offset`` is Unsupported: RabbitMQ cannot delete
one), a timestamp index (RabbitMQ's chunk-time index narrows a scan by message time), Kafka's
idempotent producers by RabbitMQ's publisher deduplication, the ``rabbitmq_stream`` wire format
stored as it is.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Final
from urllib.parse import parse_qs, unquote, urlsplit

import trio

from gateway.backends.base import (
    BackendSettings,
    BackendUrlError,
    Capabilities,
    LogApplier,
    Retries,
    SharedLog,
    running,
    shown_url,
)
from gateway.backends.rabbitmq_stream.admin import Admin
from gateway.backends.rabbitmq_stream.catalog import CATALOG_STREAM, COORDINATION_STREAM, Catalog
from gateway.backends.rabbitmq_stream.catalog_log import CatalogLog
from gateway.backends.rabbitmq_stream.conn import Connection, Settings
from gateway.backends.rabbitmq_stream.data import Data, partition_stream
from gateway.backends.rabbitmq_stream.link import Link
from gateway.backends.rabbitmq_stream.producers import stored_sequence
from gateway.backends.tls import TLS_OPTIONS, tls_client
from gateway.backends.watchdog import Watchdog
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
    TopicConfig,
    Unsupported,
    UpdateStream,
    UpdateStreamResult,
    UpdateTopic,
    UpdateTopicResult,
)
from gateway.translate.rabbitmq_stream.messages import PUBLISHED_FORMAT, WIRE_FORMAT
from protocols import rabbitmq_stream as rs

SCHEME: Final = "rabbitmq-stream"
TLS_SCHEME: Final = "rabbitmq-stream+tls"
DEFAULT_PORT: Final = 5552
DEFAULT_TLS_PORT: Final = 5551  # RabbitMQ's stream TLS listener
_OPTIONS: Final = frozenset({"heartbeat", "frame_max"}) | TLS_OPTIONS
NO_LEADER: Final = 0xFFFF
# The coordination stream's retention: an hour, in 8 MB segments (a snapshot fits in one).
COORDINATION_ARGUMENTS: Final = (
    ("max-age", "3600s"),
    ("stream-max-segment-size-bytes", str(8 << 20)),
)


def parse_url(url: str) -> Settings:
    """``rabbitmq-stream://`` or, with TLS, ``rabbitmq-stream+tls://`` (RabbitMQ's own scheme,
    port 5551 by default) or ``?tls=1``; TLS options as in ``backends.tls``. Errors show the
    URL with its password masked."""
    shown = shown_url(url)
    try:
        parts = urlsplit(url)
    except ValueError:  # a bracket that does not hold an IPv6 address
        raise BackendUrlError(f"not a valid URL: {shown!r}") from None
    scheme = parts.scheme.lower()
    try:
        host, port = parts.hostname, parts.port
    except ValueError:
        host = port = None
    if scheme not in (SCHEME, TLS_SCHEME) or not host:
        raise BackendUrlError(f"expected {SCHEME}://user:password@host:port/vhost, not {shown!r}")
    path = parts.path[1:] if parts.path.startswith("/") else parts.path
    query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    unknown = sorted(set(query) - _OPTIONS)
    if unknown:
        raise BackendUrlError(f"unknown rabbitmq-stream URL option {unknown[0]!r} in {shown!r}")
    tls = tls_client(query, tls=scheme == TLS_SCHEME, what="rabbitmq-stream")
    default_port = DEFAULT_TLS_PORT if scheme == TLS_SCHEME else DEFAULT_PORT
    try:
        return Settings(
            host=host,
            port=port or default_port,
            username=unquote(parts.username or "guest"),
            password=unquote(parts.password or "guest"),
            vhost=unquote(path) or "/",
            heartbeat_s=int(query.get("heartbeat", 60)),
            frame_max=int(query.get("frame_max", rs.DEFAULT_MAX_FRAME_SIZE)),
            tls=tls,
        )
    except ValueError:
        raise BackendUrlError(
            f"bad rabbitmq-stream URL {shown!r}: heartbeat and frame_max must be integers"
        ) from None


class RabbitStreamBackend:
    name = "rabbitmq_stream"

    def __init__(
        self,
        settings: Settings,
        *,
        defaults: TopicConfig | None = None,
        max_message_bytes: int = 16 << 20,
        connect_wait_s: float = 2.0,
    ) -> None:
        self.settings = settings
        self.catalog = Catalog()
        self.watchdog = Watchdog(tick_s=0.01)
        # Two connections: a Publish is answered 10-20 times later on a connection that also
        # subscribes to its stream (rabbitmq_stream_streams).
        wait = connect_wait_s
        self.link = Link(settings, self.watchdog, name="streamgate-publish", connect_wait_s=wait)
        self.sub_link = Link(settings, self.watchdog, name="streamgate-subscribe",
                             connect_wait_s=wait, on_connect=self._on_connect)  # fmt: skip
        self.retries = Retries()  # both links' reconnects and retried requests
        self.link.retries = self.sub_link.retries = self.retries
        self.log = CatalogLog(self.link, self.sub_link, self.catalog, self._catalog_changed)
        self.coordination: CatalogLog | None = None  # shared groups' log, once asked for
        self.admin = Admin(self.link, self.sub_link, self.catalog, self.log,
                           defaults or TopicConfig(), dropped=self._dropped)  # fmt: skip
        self.data = Data(self.link, self.sub_link, self.catalog, self.log, self.admin.resolve,
                         max_message_bytes)  # fmt: skip
        self.capabilities = Capabilities(
            native_groups=False,
            native_offsets=True,
            timestamp_index=True,
            # Kafka producer ids (the gateway's) become publisher references (data.py)
            idempotent_producers=True,
            duplicate_offsets=False,  # RabbitMQ drops a duplicate without saying where it is
            publisher_dedup=True,  # the client's reference on the broker's publisher
            streams=True,
            max_message_bytes=max_message_bytes,
            wire_formats=frozenset({WIRE_FORMAT, PUBLISHED_FORMAT}),
        )

    @classmethod
    def from_url(cls, url: str, settings: BackendSettings | None = None) -> RabbitStreamBackend:
        s = settings or BackendSettings()
        defaults = TopicConfig(retention_ms=s.retention_ms, retention_bytes=s.retention_bytes)
        return cls(parse_url(url), defaults=defaults, max_message_bytes=s.max_message_bytes)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.watchdog.run)
            await nursery.start(self.link.run)
            await nursery.start(self.sub_link.run)
            task_status.started()

    def shared_log(self, applier: LogApplier) -> SharedLog:
        """The coordination stream: a log that every gateway on this virtual host appends to
        and follows (shared consumer groups replicate over it). Kept for an hour, in small
        segments so that RabbitMQ can drop the old ones; its readers start from a snapshot."""
        self.coordination = CatalogLog(
            self.link, self.sub_link, applier, lambda: None,
            stream=COORDINATION_STREAM, arguments=COORDINATION_ARGUMENTS,
        )  # fmt: skip
        return self.coordination

    async def _on_connect(self, conn: Connection) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.log.attach, conn)
            if self.coordination is not None:
                nursery.start_soon(self.coordination.attach, conn)

    def _catalog_changed(self) -> None:
        self.data.pulse()

    def _dropped(self, names: list[str]) -> None:
        self.data.forget(names)

    async def ping(self) -> None:
        conn = self.link.current()
        self.sub_link.current()
        if not self.log.ready:
            raise BackendUnavailable(self.log.last_error)
        reply = await conn.call(lambda c: rs.Metadata(correlation_id=c, streams=(CATALOG_STREAM,)))
        assert isinstance(reply, rs.MetadataResponse)
        if not reply.streams or reply.streams[0].leader == NO_LEADER:
            raise BackendUnavailable("RabbitMQ streams have no leader yet")

    # --- streams and topics ----------------------------------------------------------------------

    async def create_stream(self, cmd: CreateStream) -> CreateStreamResult:
        return CreateStreamResult(info=await self.admin.create_stream(cmd))

    async def delete_stream(self, cmd: DeleteStream) -> DeleteStreamResult:
        await self.admin.delete_stream(cmd.stream)
        return DeleteStreamResult()

    async def update_stream(self, cmd: UpdateStream) -> UpdateStreamResult:
        return UpdateStreamResult(info=await self.admin.rename_stream(cmd.stream, cmd.new_name))

    async def purge_stream(self, cmd: PurgeStream) -> PurgeStreamResult:
        catalog = await self.admin.loaded()
        catalog.stream(cmd.stream)
        await self.admin.purge_topics(catalog.stream_topics(cmd.stream))
        return PurgeStreamResult()

    async def list_streams(self, cmd: ListStreams) -> ListStreamsResult:
        catalog = await self.admin.loaded()
        names = sorted(catalog.streams, key=lambda n: catalog.streams[n].id)
        return ListStreamsResult(streams=tuple([await self.admin.stream_info(n) for n in names]))

    async def create_topic(self, cmd: CreateTopic) -> CreateTopicResult:
        # No tails opened in advance: a tail costs the broker a delivery of every chunk
        # (rabbitmq_stream_tail), and appends from RabbitMQ Stream clients need none.
        entry = await self.admin.create_topic(cmd)
        return CreateTopicResult(info=await self.admin.info(entry))

    async def delete_topic(self, cmd: DeleteTopic) -> DeleteTopicResult:
        await self.admin.delete_topic(cmd.topic)
        return DeleteTopicResult()

    async def list_topics(self, cmd: ListTopics) -> ListTopicsResult:
        catalog = await self.admin.loaded()
        if cmd.stream is None:
            entries = sorted(catalog.topics.values(), key=lambda t: (t.stream, t.id))
        else:
            catalog.stream(cmd.stream)
            entries = catalog.stream_topics(cmd.stream)
        return ListTopicsResult(topics=tuple(await self.admin.infos(entries)))

    async def describe_topic(self, cmd: DescribeTopic) -> DescribeTopicResult:
        return DescribeTopicResult(info=await self.admin.info(await self.admin.resolve(cmd.topic)))

    async def update_topic(self, cmd: UpdateTopic) -> UpdateTopicResult:
        entry = await self.admin.update_topic(cmd.topic, cmd.config, cmd.new_name, cmd.reset)
        return UpdateTopicResult(info=await self.admin.info(entry))

    async def create_partitions(self, cmd: CreatePartitions) -> CreatePartitionsResult:
        entry = await self.admin.create_partitions(cmd.topic, cmd.total)
        return CreatePartitionsResult(info=await self.admin.info(entry))

    async def delete_partitions(self, cmd: DeletePartitions) -> DeletePartitionsResult:
        entry = await self.admin.delete_partitions(cmd.topic, cmd.total)
        return DeletePartitionsResult(info=await self.admin.info(entry))

    async def purge_topic(self, cmd: PurgeTopic) -> PurgeTopicResult:
        await self.admin.purge_topics([await self.admin.resolve(cmd.topic)])
        return PurgeTopicResult()

    # --- messages and offsets --------------------------------------------------------------------

    async def append(self, cmd: Append) -> AppendResult:
        return await self.data.append(cmd)

    async def read(self, cmd: Read) -> ReadResult:
        return await self.data.read(cmd)

    async def publisher_sequence(self, cmd: PublisherSequence) -> PublisherSequenceResult:
        """The broker's QueryPublisherSequence: what every gateway's publishers with that
        reference stored on the partition's stream (0: nothing)."""
        stream = partition_stream(await self.admin.resolve(cmd.topic), cmd.partition)
        sequence = await stored_sequence(self.link, stream, cmd.publisher)
        return PublisherSequenceResult(sequence=sequence)

    async def list_offsets(self, cmd: ListOffsets) -> ListOffsetsResult:
        return await self.data.list_offsets(cmd)

    async def commit_offset(self, cmd: CommitOffset) -> CommitOffsetResult:
        await self.data.commit_offset(cmd)
        return CommitOffsetResult()

    async def fetch_offset(self, cmd: FetchOffset) -> FetchOffsetResult:
        offset, metadata = await self.data.fetch_offset(cmd)
        return FetchOffsetResult(offset=offset, metadata=metadata)

    async def delete_offset(self, cmd: DeleteOffset) -> DeleteOffsetResult:
        partition_stream(await self.admin.resolve(cmd.topic), cmd.partition)
        raise Unsupported("RabbitMQ cannot delete a stored consumer offset (StoreOffset only)")

    async def stats(self, cmd: Stats) -> StatsResult:
        catalog = await self.admin.loaded()
        infos = await self.admin.infos(list(catalog.topics.values()))
        parts = [p for info in infos for p in info.partitions]
        return StatsResult(
            streams=len(catalog.streams),
            topics=len(infos),
            partitions=len(parts),
            messages=sum(p.next_offset - p.log_start_offset for p in parts),
            size_bytes=sum(p.size_bytes for p in parts),
            consumer_groups=len(catalog.groups),
        )

    async def wait_ready(self, limit_s: float = 30.0) -> None:
        """Until ``ping`` succeeds (connected, catalog read), at most ``limit_s`` (real time)."""
        deadline = time.monotonic() + limit_s
        while True:
            try:
                await self.ping()
                return
            except BackendUnavailable:
                if time.monotonic() > deadline:
                    raise
            await trio.sleep(0.05)


@asynccontextmanager
async def open_rabbitmq_stream(url: str, **kw: Any) -> AsyncIterator[RabbitStreamBackend]:
    """A running backend, ready (connected, catalog read); stopped on exit."""
    backend = RabbitStreamBackend.from_url(url, **kw)
    async with running(backend, backend.wait_ready) as started:
        yield started


__all__ = ["RabbitStreamBackend", "open_rabbitmq_stream", "parse_url"]
