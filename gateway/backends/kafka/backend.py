"""The Kafka backend: canonical commands on a real Kafka-compatible broker (DESIGN.md §4), through
the client role of ``protocols.kafka`` (kio messages, the record-batch codec).

URL ``kafka://host:port[,host:port...][?option=value&...]``; options: ``client_id``,
``request_timeout_ms`` (10000), ``connect_timeout_ms`` (5000), ``metadata_max_age_ms`` (5000),
``long_poll_slice_ms`` (100) and ``broker`` (``kafka``, or ``tansu`` to work around Tansu's
wrong ListOffsets answers, see ``kafka_fetch`` and kafka.md §5). TLS to every broker:
``kafkas://host:port`` or ``?tls=1``, with ``ca``, ``cert``/``key``, ``server_name`` and
``verify`` as in ``backends.tls`` (each broker's certificate is verified against the host the
cluster's metadata names, unless ``server_name`` is given). SASL to every broker:
``kafka://user@host:port?sasl=SCRAM-SHA-512`` (``PLAIN``, the default, ``SCRAM-SHA-256``,
``SCRAM-SHA-512``), the password from ``password_file=PATH``, ``STREAMGATE_BACKEND_PASSWORD``
or the URL (``kafka.sasl``).

Namespace: Kafka has one, so this backend has exactly one stream, ``default``
(``capabilities.streams`` is False): the canonical topic ``default/x`` is the Kafka topic ``x``,
unchanged, so Kafka clients see the same names through the gateway and directly; a command that
names any other stream fails with ``Unsupported``. A prefix mapping (``<stream>.<topic>``) was
rejected: dots are common in Kafka topic names, so listing could not tell stream ``a`` topic
``b`` from topic ``a.b``, and an empty stream (Iggy's CreateStream) has nothing in Kafka to exist
as. ``list_streams`` answers the one stream (id 0) with every topic.

Groups: ``native_groups`` is True, the broker's group coordinator runs them (``kafka_groups``):
JoinGroup, SyncGroup, Heartbeat and LeaveGroup are forwarded with member ids and generations
intact, so consumers through every gateway on one broker are one group, and a member's commits
carry its generation for the broker to fence. Offsets are the broker's (``native_offsets``).

What Kafka cannot do is ``Unsupported``: renaming topics or streams, removing partitions, and
whatever the broker does not implement: CreatePartitions and OffsetDelete are checked against
its ApiVersions (without OffsetDelete an offset is deleted by committing -1, which OffsetFetch
reports as "none"); DeleteRecords, which Tansu advertises but drops the connection on, goes
on a connection of its own, and a drop while the broker still answers is Unsupported.

Idempotent producers: the broker grants producer ids (InitProducerId, which Tansu answers from
v2 on only) and deduplicates by producer id, epoch and sequence, which batches keep as the
client wrote them (``kafka_data``), so a retry through any gateway on the broker is stored once.
A broker answers a duplicate DUPLICATE_SEQUENCE_NUMBER without its offsets; the append is then
a duplicate with ``base_offset`` -1. Transactions (KIP-98) are the broker's too
(``kafka_transactions``): its coordinators, markers and last stable offset; reads pass the
isolation level on and filter for ``Isolation.CLEAN`` (``kafka_data``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio
from kio.schema.errors import ErrorCode

from gateway.backends.base import BackendSettings, Capabilities, running
from gateway.backends.kafka.cluster import (
    CREATE_PARTITIONS,
    CREATE_TOPICS,
    DELETE_RECORDS,
    DELETE_TOPICS,
    INCREMENTAL_ALTER_CONFIGS,
    LIST_GROUPS,
    TOPIC_RESOURCE,
    Api,
    Cluster,
    TopicMeta,
    parse_url,
)
from gateway.backends.kafka.data import DataPath
from gateway.backends.kafka.groups import BrokerGroups
from gateway.backends.kafka.offsets import GroupOffsets
from gateway.backends.kafka.transactions import BrokerTransactions
from gateway.model import (
    DEFAULT_STREAM,
    AddToTransaction,
    AddToTransactionResult,
    Append,
    AppendResult,
    AwaitData,
    AwaitDataResult,
    BackendUnavailable,
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
    GatewayError,
    Heartbeat,
    HeartbeatResult,
    InitProducer,
    InitProducerResult,
    InitTransaction,
    InvalidPartitions,
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
    PartitionInfo,
    PurgeStream,
    PurgeStreamResult,
    PurgeTopic,
    PurgeTopicResult,
    Read,
    ReadResult,
    Stats,
    StatsResult,
    StreamExists,
    StreamInfo,
    SyncGroup,
    SyncGroupResult,
    Topic,
    TopicInfo,
    UnknownTopic,
    Unsupported,
    UpdateStream,
    UpdateStreamResult,
    UpdateTopic,
    UpdateTopicResult,
    check_name,
)
from gateway.translate.kafka.errors import gateway_error
from gateway.translate.kafka.messages import WIRE_FORMAT, check_topic_name, config_settings

_METADATA_WAIT_S = 5.0  # a new topic's metadata may lag its creation on a real cluster
# UpdateTopic.reset names a TopicConfig field or a Kafka config name (a key of ``extra``).
_KAFKA_NAMES = {"retention_ms": "retention.ms", "retention_bytes": "retention.bytes",
                "segment_bytes": "segment.bytes", "max_message_bytes": "max.message.bytes",
                "compression": "compression.type"}  # fmt: skip


class KafkaBackend:
    name = "kafka"

    def __init__(self, url: str, *, max_message_bytes: int = 16 << 20) -> None:
        servers, options = parse_url(url)
        self._cluster = Cluster(servers, options)
        self.retries = self._cluster.retries  # the cluster's reconnects
        self._data = DataPath(self._cluster)
        self._offsets = GroupOffsets(self._cluster)
        self._groups = BrokerGroups(self._cluster)
        self._txns = BrokerTransactions(self._cluster)
        self.capabilities = Capabilities(
            native_groups=True,
            native_offsets=True,
            timestamp_index=not options.tansu,
            idempotent_producers=True,
            duplicate_offsets=False,  # DUPLICATE_SEQUENCE_NUMBER carries no offsets
            streams=False,
            max_message_bytes=max_message_bytes,
            wire_formats=frozenset({WIRE_FORMAT}),
        )

    @classmethod
    def from_url(cls, url: str, settings: BackendSettings | None = None) -> KafkaBackend:
        s = settings or BackendSettings()
        return cls(url, max_message_bytes=s.max_message_bytes)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        await self._cluster.run(task_status=task_status)

    @property
    def cluster_failure(self) -> str | None:
        """Why the cluster is unreachable now, None while it answers."""
        return self._cluster.failure

    async def ping(self) -> None:
        try:
            await self._cluster.connect()
        except GatewayError as exc:
            raise BackendUnavailable(exc.message) from None

    # --- names ----------------------------------------------------------------------------------

    @staticmethod
    def _kafka_name(topic: Topic) -> str:
        _one_stream(topic.stream)
        return check_name("topic", topic.name)

    async def _admin(self, api: Api, values: dict[str, Any]) -> Any:
        return await self._cluster.request(api, values, node=self._controller())

    def _controller(self) -> int | None:
        c = self._cluster
        return c.controller if c.controller in c.brokers else None

    def _timeout_ms(self) -> int:
        return int(self._cluster.options.request_timeout_s * 1000)

    # --- streams: the one namespace -------------------------------------------------------------

    async def create_stream(self, cmd: CreateStream) -> CreateStreamResult:
        _one_stream(cmd.stream)
        raise StreamExists(f"the kafka backend's one stream {DEFAULT_STREAM!r} always exists")

    async def delete_stream(self, cmd: DeleteStream) -> DeleteStreamResult:
        _one_stream(cmd.stream)
        raise Unsupported("the kafka backend's one stream cannot be deleted")

    async def update_stream(self, cmd: UpdateStream) -> UpdateStreamResult:
        _one_stream(cmd.stream)
        raise Unsupported("the kafka backend's one stream cannot be renamed")

    async def purge_stream(self, cmd: PurgeStream) -> PurgeStreamResult:
        _one_stream(cmd.stream)
        for info in (await self.list_topics(ListTopics(stream=cmd.stream))).topics:
            await self.purge_topic(PurgeTopic(topic=info.topic))
        return PurgeStreamResult()

    async def list_streams(self, cmd: ListStreams) -> ListStreamsResult:
        topics = (await self.list_topics(ListTopics())).topics
        return ListStreamsResult(streams=(StreamInfo(name=DEFAULT_STREAM, id=0, topics=topics),))

    # --- topics ---------------------------------------------------------------------------------

    async def _infos(self, metas: list[TopicMeta]) -> tuple[TopicInfo, ...]:
        bounds = await self._data.fetcher.bounds(
            [(m.name, p, leader) for m in metas for p, leader in enumerate(m.leaders)]
        )
        return tuple(
            TopicInfo(
                topic=Topic(DEFAULT_STREAM, m.name),
                id=m.id,
                partitions=tuple(
                    PartitionInfo(partition=p, log_start_offset=start, next_offset=end)
                    for p in range(len(m.leaders))
                    for start, end in (bounds[m.name, p],)
                ),
                config=m.config,
            )
            for m in metas
        )

    async def _info(self, name: str) -> TopicInfo:
        return (await self._infos([await self._cluster.topic(name, fresh=True)]))[0]

    async def create_topic(self, cmd: CreateTopic) -> CreateTopicResult:
        name = self._kafka_name(cmd.topic)
        check_topic_name(name)
        if cmd.partitions <= 0:
            raise InvalidPartitions(f"a topic needs at least one partition, not {cmd.partitions}")
        settings = config_settings(cmd.config)
        answer = await self._admin(
            CREATE_TOPICS,
            {"topics": [{"name": name, "num_partitions": cmd.partitions,
                         "replication_factor": -1 if self._cluster.version(CREATE_TOPICS) >= 4
                         else 1,
                         "assignments": [],  # none: the broker places the partitions
                         "configs": [{"name": k, "value": v} for k, v in settings.items()]}],
             "timeout": self._timeout_ms(), "validate_only": False},
        )  # fmt: skip
        result = answer.topics[0]
        if result.error_code is not ErrorCode.none:
            raise gateway_error(result.error_code, getattr(result, "error_message", None))
        with self._cluster.watchdog.bound(_METADATA_WAIT_S):
            while True:
                try:
                    return CreateTopicResult(info=await self._info(name))
                except (UnknownTopic, BackendUnavailable):
                    await trio.sleep(0.05)
        raise BackendUnavailable(f"topic {name!r} was created but has no metadata yet")

    async def delete_topic(self, cmd: DeleteTopic) -> DeleteTopicResult:
        name = self._kafka_name(cmd.topic)
        answer = await self._admin(
            DELETE_TOPICS, {"topic_names": [name], "timeout": self._timeout_ms()}
        )
        self._cluster.forget(name)
        self._data.wakeups.notify(name)
        code = answer.responses[0].error_code
        if code is not ErrorCode.none:
            raise gateway_error(code, f"topic {name!r}")
        return DeleteTopicResult()

    async def list_topics(self, cmd: ListTopics) -> ListTopicsResult:
        if cmd.stream is not None:
            _one_stream(cmd.stream)
        metas = await self._cluster.load_topics(None)
        return ListTopicsResult(topics=await self._infos(sorted(metas.values(), key=_by_name)))

    async def describe_topic(self, cmd: DescribeTopic) -> DescribeTopicResult:
        return DescribeTopicResult(info=await self._info(self._kafka_name(cmd.topic)))

    async def update_topic(self, cmd: UpdateTopic) -> UpdateTopicResult:
        name = self._kafka_name(cmd.topic)
        if cmd.new_name not in (None, name):
            raise Unsupported("Kafka cannot rename a topic")
        await self._cluster.topic(name, fresh=True)
        configs = [
            {"name": k, "config_operation": 0, "value": v}  # 0 = SET (KIP-339)
            for k, v in config_settings(cmd.config).items()
        ] + [
            {"name": _KAFKA_NAMES.get(k, k), "config_operation": 1, "value": None}  # 1 = DELETE
            for k in sorted(cmd.reset)
        ]
        answer = await self._admin(
            INCREMENTAL_ALTER_CONFIGS,
            {"resources": [{"resource_type": TOPIC_RESOURCE, "resource_name": name,
                            "configs": configs}], "validate_only": False},
        )  # fmt: skip
        result = answer.responses[0]
        if result.error_code is not ErrorCode.none:
            raise gateway_error(result.error_code, result.error_message)
        return UpdateTopicResult(info=await self._info(name))

    async def create_partitions(self, cmd: CreatePartitions) -> CreatePartitionsResult:
        name = self._kafka_name(cmd.topic)
        self._cluster.version(CREATE_PARTITIONS)  # Unsupported before anything is sent
        current = len((await self._cluster.topic(name, fresh=True)).leaders)
        if cmd.total <= current:
            raise InvalidPartitions(f"topic has {current} partitions, cannot grow to {cmd.total}")
        answer = await self._admin(
            CREATE_PARTITIONS,
            {"topics": [{"name": name, "count": cmd.total, "assignments": None}],
             "timeout": self._timeout_ms(), "validate_only": False},
        )  # fmt: skip
        result = answer.results[0]
        if result.error_code is not ErrorCode.none:
            raise gateway_error(result.error_code, result.error_message)
        return CreatePartitionsResult(info=await self._info(name))

    async def delete_partitions(self, cmd: DeletePartitions) -> DeletePartitionsResult:
        self._kafka_name(cmd.topic)
        raise Unsupported("Kafka cannot remove partitions from a topic")

    async def purge_topic(self, cmd: PurgeTopic) -> PurgeTopicResult:
        name = self._kafka_name(cmd.topic)
        meta = await self._cluster.topic(name, fresh=True)
        for leader in sorted(set(meta.leaders)):
            partitions = [p for p, node in enumerate(meta.leaders) if node == leader]
            answer = await self._cluster.request_alone(
                DELETE_RECORDS,
                {"topics": [{"name": name, "partitions": [
                    {"partition_index": p, "offset": -1} for p in partitions]}],  # -1 = the end
                 "timeout": self._timeout_ms()},
                node=leader,
            )  # fmt: skip
            for part in answer.topics[0].partitions:
                if part.error_code is not ErrorCode.none:
                    raise gateway_error(part.error_code, f"{name}[{part.partition_index}]")
        return PurgeTopicResult()

    async def delete_records(self, cmd: DeleteRecords) -> DeleteRecordsResult:
        name = self._kafka_name(cmd.topic)
        _, leader = await self._cluster.partition(name, cmd.partition)
        answer = await self._cluster.request_alone(
            DELETE_RECORDS,
            {"topics": [{"name": name, "partitions": [
                {"partition_index": cmd.partition, "offset": cmd.offset}]}],
             "timeout": self._timeout_ms()},
            node=leader,
        )  # fmt: skip
        [part] = answer.topics[0].partitions
        if part.error_code is not ErrorCode.none:
            raise gateway_error(part.error_code, f"{name}[{cmd.partition}]")
        return DeleteRecordsResult(log_start_offset=part.low_watermark)

    # --- data -----------------------------------------------------------------------------------

    async def append(self, cmd: Append) -> AppendResult:
        return await self._data.append(self._kafka_name(cmd.topic), cmd)

    async def read(self, cmd: Read) -> ReadResult:
        return await self._data.read(self._kafka_name(cmd.topic), cmd)

    async def await_data(self, cmd: AwaitData) -> AwaitDataResult:
        targets = [(self._kafka_name(t), p, offset) for t, p, offset in cmd.targets]
        return AwaitDataResult(waited_s=await self._data.await_data(targets, cmd.max_wait_ms))

    async def list_offsets(self, cmd: ListOffsets) -> ListOffsetsResult:
        return await self._data.list_offsets(self._kafka_name(cmd.topic), cmd)

    # --- consumer offsets (kafka_offsets) -------------------------------------------------------

    async def commit_offset(self, cmd: CommitOffset) -> CommitOffsetResult:
        name = self._kafka_name(cmd.topic)
        await self._offsets.commit(
            cmd.group, name, cmd.partition, cmd.offset, cmd.metadata,
            generation=cmd.generation, member_id=cmd.member_id, leader_epoch=cmd.leader_epoch,
        )  # fmt: skip
        return CommitOffsetResult()

    async def fetch_offset(self, cmd: FetchOffset) -> FetchOffsetResult:
        name = self._kafka_name(cmd.topic)
        offset, metadata, epoch = await self._offsets.fetch(cmd.group, name, cmd.partition)
        return FetchOffsetResult(offset=offset, metadata=metadata, leader_epoch=epoch)

    async def delete_offset(self, cmd: DeleteOffset) -> DeleteOffsetResult:
        await self._offsets.delete(cmd.group, self._kafka_name(cmd.topic), cmd.partition)
        return DeleteOffsetResult()

    # --- consumer groups (kafka_groups): the broker's coordinator -------------------------------

    async def join_group(self, cmd: JoinGroup) -> JoinGroupResult:
        return await self._groups.join(cmd)

    async def sync_group(self, cmd: SyncGroup) -> SyncGroupResult:
        return await self._groups.sync(cmd)

    async def heartbeat(self, cmd: Heartbeat) -> HeartbeatResult:
        return await self._groups.heartbeat(cmd)

    async def leave_group(self, cmd: LeaveGroup) -> LeaveGroupResult:
        return await self._groups.leave(cmd)

    async def describe_group(self, cmd: DescribeGroup) -> DescribeGroupResult:
        return await self._groups.describe(cmd)

    async def list_groups(self, cmd: ListGroups) -> ListGroupsResult:
        return await self._groups.list(cmd)

    async def delete_group(self, cmd: DeleteGroup) -> DeleteGroupResult:
        return await self._groups.delete(cmd)

    # --- idempotent and transactional producers: the broker's (kafka_transactions) ------------

    async def init_producer(self, cmd: InitProducer) -> InitProducerResult:
        return await self._txns.init_idempotent(cmd)

    async def init_transaction(self, cmd: InitTransaction) -> InitProducerResult:
        return await self._txns.init(cmd)

    async def add_to_transaction(self, cmd: AddToTransaction) -> AddToTransactionResult:
        return await self._txns.add(cmd)

    async def commit_transaction_offsets(
        self, cmd: CommitTransactionOffsets
    ) -> CommitTransactionOffsetsResult:
        return await self._txns.commit_offsets(cmd)

    async def end_transaction(self, cmd: EndTransaction) -> EndTransactionResult:
        return await self._txns.end(cmd)

    async def stats(self, cmd: Stats) -> StatsResult:
        topics = (await self.list_topics(ListTopics())).topics
        groups = await self._admin(LIST_GROUPS, {"states_filter": []})
        if groups.error_code is not ErrorCode.none:
            raise gateway_error(groups.error_code, "list groups")
        return StatsResult(
            streams=1,
            topics=len(topics),
            partitions=sum(t.partition_count for t in topics),
            messages=sum(t.message_count for t in topics),
            size_bytes=0,  # needs DescribeLogDirs, which this backend does not use (yet)
            consumer_groups=len(groups.groups),
        )


def _one_stream(stream: str) -> None:
    if stream != DEFAULT_STREAM:
        raise Unsupported(
            f"the kafka backend has one namespace, the stream {DEFAULT_STREAM!r}, "
            f"not {stream!r} (Kafka has no streams)"
        )


def _by_name(meta: TopicMeta) -> str:
    return meta.name


@asynccontextmanager
async def open_kafka(url: str, **kw: Any) -> AsyncIterator[KafkaBackend]:
    """Start the backend (it reports started even while the cluster is down), yield it, stop."""
    async with running(KafkaBackend(url, **kw)) as started:
        yield started


__all__ = ["KafkaBackend", "open_kafka", "parse_url"]
