"""Canonical commands: every protocol request becomes one or more of these (DESIGN.md §2).

Each class has a ``name`` (the ``command`` metric label). Offsets in commit/fetch are always the
NEXT offset to read; translators convert from their protocol's convention (DESIGN.md §3).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

from . import results as r
from .messages import MessageBatch
from .names import Topic
from .options import Acks, Isolation, OffsetSpec, TopicConfig

R = TypeVar("R")


class Command(Generic[R]):
    """Base of all commands; ``R`` is the result type, so ``router.execute`` is typed."""

    __slots__ = ()
    name: ClassVar[str]


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateStream(Command[r.CreateStreamResult]):
    name: ClassVar[str] = "create_stream"
    stream: str
    id: int | None = None  # protocols that let the client choose numeric ids (Iggy)


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteStream(Command[r.DeleteStreamResult]):
    name: ClassVar[str] = "delete_stream"
    stream: str


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateStream(Command[r.UpdateStreamResult]):
    """Rename a stream; its id, topics, messages and committed offsets go with it (Iggy)."""

    name: ClassVar[str] = "update_stream"
    stream: str
    new_name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class PurgeStream(Command[r.PurgeStreamResult]):
    """``purge_topic`` for every topic of the stream (Iggy PurgeStream)."""

    name: ClassVar[str] = "purge_stream"
    stream: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ListStreams(Command[r.ListStreamsResult]):
    name: ClassVar[str] = "list_streams"
    # With the gateways' own (``names.is_internal``): to resolve a name, never to show a list.
    internal: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateTopic(Command[r.CreateTopicResult]):
    name: ClassVar[str] = "create_topic"
    topic: Topic
    partitions: int
    config: TopicConfig = field(default_factory=TopicConfig)
    id: int | None = None
    create_stream: bool = True  # create the stream on the fly (Kafka, Rog have no stream verb)


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteTopic(Command[r.DeleteTopicResult]):
    name: ClassVar[str] = "delete_topic"
    topic: Topic


@dataclass(frozen=True, slots=True, kw_only=True)
class ListTopics(Command[r.ListTopicsResult]):
    name: ClassVar[str] = "list_topics"
    stream: str | None = None  # None = every stream
    internal: bool = False  # as ListStreams.internal


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeTopic(Command[r.DescribeTopicResult]):
    name: ClassVar[str] = "describe_topic"
    topic: Topic


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateTopic(Command[r.UpdateTopicResult]):
    name: ClassVar[str] = "update_topic"
    topic: Topic
    config: TopicConfig
    # Iggy's UpdateTopic carries the name too: a different one renames the topic in its stream,
    # in the same step as the config change.
    new_name: str | None = None
    # Settings returned to the backend's default (Kafka's IncrementalAlterConfigs DELETE): a
    # TopicConfig field name (``retention_ms``, ``compression``) or a key of ``extra``. A
    # backend that cannot forget a setting refuses the update rather than ignore this.
    reset: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatePartitions(Command[r.CreatePartitionsResult]):
    """Grow the topic to ``total`` partitions (Kafka's convention; Iggy's "add n" converts)."""

    name: ClassVar[str] = "create_partitions"
    topic: Topic
    total: int


@dataclass(frozen=True, slots=True, kw_only=True)
class DeletePartitions(Command[r.DeletePartitionsResult]):
    """Shrink the topic to ``total`` partitions, dropping the highest-numbered ones (Iggy)."""

    name: ClassVar[str] = "delete_partitions"
    topic: Topic
    total: int


@dataclass(frozen=True, slots=True, kw_only=True)
class PurgeTopic(Command[r.PurgeTopicResult]):
    """Drop every message; offsets go on from where they were (Iggy purge, DeleteRecords)."""

    name: ClassVar[str] = "purge_topic"
    topic: Topic


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteRecords(Command[r.DeleteRecordsResult]):
    """Drop one partition's messages below ``offset`` (-1: all of them): its log start moves
    there and reads below it are out of range (Kafka DeleteRecords)."""

    name: ClassVar[str] = "delete_records"
    topic: Topic
    partition: int
    offset: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Append(Command[r.AppendResult]):
    name: ClassVar[str] = "append"
    topic: Topic
    partition: int
    batch: MessageBatch
    acks: Acks = Acks.ALL
    # Idempotent producers (Kafka): the batch is dropped as a duplicate when its sequence was
    # already stored for this producer id and partition.
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    # False when the client is never told where the batch landed (RabbitMQ Stream confirms
    # publishing ids, Rog says Ok): a backend that learns offsets only after the broker stored
    # them (RabbitMQ) may then answer at once, with ``base_offset`` -1.
    offset_needed: bool = True
    # RabbitMQ Stream deduplication by the backend (``capabilities.publisher_dedup``): the
    # client's publisher reference and its publishing ids, one per entry of ``batch``; an id
    # not above the highest stored for the reference is dropped by the broker. Offsets are then
    # not learned (``offset_needed`` is False).
    publisher: str = ""
    publishing_ids: tuple[int, ...] = ()
    # Set: a Kafka transactional producer's batch (KIP-98), part of the open transaction of
    # this transactional id, which must already name the partition (``AddToTransaction``);
    # readers see it once the transaction commits (``Read.isolation``).
    transactional_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class InitProducer(Command[r.InitProducerResult]):
    """An idempotent producer's id and epoch (Kafka's InitProducerId without a transactional
    id). Executed where the dedup happens: a backend that deduplicates by producer id itself (a
    Kafka broker) grants them; for the embedded store the gateway does."""

    name: ClassVar[str] = "init_producer"
    # KIP-360 (InitProducerId v3+): the producer's current id and epoch, or -1. Without a
    # transactional id Kafka grants a new id at epoch 0 all the same; an idempotent producer
    # bumps its epoch itself, on its batches.
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class InitTransaction(Command[r.InitProducerResult]):
    """A transactional producer's id and epoch (Kafka's InitProducerId with a transactional
    id, KIP-98): a new id at epoch 0 for a new transactional id, else the same id at the next
    epoch, which fences every earlier instance; an open transaction of the id is aborted
    first. ``producer_id``/``producer_epoch``: the caller's current ones (KIP-360), or -1."""

    name: ClassVar[str] = "init_transaction"
    transactional_id: str
    timeout_ms: int
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class AddToTransaction(Command[r.AddToTransactionResult]):
    """Partitions a transaction writes to (AddPartitionsToTxn) and groups whose offsets it
    commits (AddOffsetsToTxn); opens the transaction when none is open."""

    name: ClassVar[str] = "add_to_transaction"
    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: tuple[tuple[Topic, int], ...] = ()
    groups: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class CommitTransactionOffsets(Command[r.CommitTransactionOffsetsResult]):
    """A group's offsets committed as part of a transaction (TxnOffsetCommit): they take
    effect when it commits and are dropped when it aborts."""

    name: ClassVar[str] = "commit_transaction_offsets"
    transactional_id: str
    producer_id: int
    producer_epoch: int
    group: str
    stream: str
    # (topic, partition, the NEXT offset to read, metadata, leader epoch or -1)
    offsets: tuple[tuple[Topic, int, int, str, int], ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class EndTransaction(Command[r.EndTransactionResult]):
    """Commit or abort the producer's open transaction (EndTxn): a marker is written to every
    partition in it, and its offsets are committed or dropped."""

    name: ClassVar[str] = "end_transaction"
    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class PublisherSequence(Command[r.PublisherSequenceResult]):
    """The highest publishing id a partition stored for a publisher reference (RabbitMQ
    Stream's QueryPublisherSequence), where the backend deduplicates (0: none)."""

    name: ClassVar[str] = "publisher_sequence"
    topic: Topic
    partition: int
    publisher: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Read(Command[r.ReadResult]):
    """Messages from ``offset`` on; waits up to ``max_wait_ms`` until ``min_bytes`` are there."""

    name: ClassVar[str] = "read"
    topic: Topic
    partition: int
    offset: int
    max_messages: int = 1_000_000
    max_bytes: int = 1 << 20
    max_wait_ms: int = 0
    min_bytes: int = 1
    # The store may return whole stored batches that start before ``offset`` (Kafka clients
    # skip such records themselves); translators that cannot must trim.
    whole_batches: bool = False
    # Around Kafka transactions: CLEAN (the default) never returns an uncommitted or aborted
    # message nor a marker; the Kafka listener asks for what its client's isolation level says.
    isolation: Isolation = Isolation.CLEAN


@dataclass(frozen=True, slots=True, kw_only=True)
class AwaitData(Command[r.AwaitDataResult]):
    """Wait up to ``max_wait_ms`` until any of ``targets`` (topic, partition, offset) has a
    message at or past its offset, or is gone or out of range: one long poll over many
    partitions (a Kafka Fetch), where a Read per partition would be a waiter per partition.
    Nothing is read; the caller reads again, and the read reports any error."""

    name: ClassVar[str] = "await_data"
    targets: tuple[tuple[Topic, int, int], ...]
    max_wait_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ListOffsets(Command[r.ListOffsetsResult]):
    name: ClassVar[str] = "list_offsets"
    topic: Topic
    partition: int
    spec: OffsetSpec
    timestamp_us: int = 0
    # COMMITTED: LATEST is the last stable offset (Kafka's ListOffsets for read_committed)
    isolation: Isolation = Isolation.UNCOMMITTED


@dataclass(frozen=True, slots=True, kw_only=True)
class CommitOffset(Command[r.CommitOffsetResult]):
    name: ClassVar[str] = "commit_offset"
    group: str
    topic: Topic
    partition: int
    offset: int  # the NEXT offset to read
    metadata: str = ""
    # Kafka (KIP-320): the leader epoch of the last record read, answered back by FetchOffset
    # (-1: none; kept where the backend stores it: the embedded store, a Kafka broker).
    leader_epoch: int = -1
    # Kafka: a commit from a group member names its generation; the coordinator refuses commits
    # from a stale generation or an unknown member (-1 / "" = a standalone commit, always taken).
    generation: int = -1
    member_id: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchOffset(Command[r.FetchOffsetResult]):
    name: ClassVar[str] = "fetch_offset"
    group: str
    topic: Topic
    partition: int


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteOffset(Command[r.DeleteOffsetResult]):
    name: ClassVar[str] = "delete_offset"
    group: str
    topic: Topic
    partition: int


@dataclass(frozen=True, slots=True, kw_only=True)
class JoinGroup(Command[r.JoinGroupResult]):
    """Kafka-style membership; ``topics`` set = the gateway assigns partitions itself (Iggy)."""

    name: ClassVar[str] = "join_group"
    group: str
    stream: str
    member_id: str = ""
    group_instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    session_timeout_ms: int = 45_000
    rebalance_timeout_ms: int = 300_000
    protocol_type: str = "consumer"
    protocols: tuple[tuple[str, bytes], ...] = ()
    topics: tuple[Topic, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class SyncGroup(Command[r.SyncGroupResult]):
    name: ClassVar[str] = "sync_group"
    group: str
    stream: str
    generation: int
    member_id: str
    assignments: tuple[tuple[str, bytes], ...] = ()  # from the leader: member id -> assignment


@dataclass(frozen=True, slots=True, kw_only=True)
class Heartbeat(Command[r.HeartbeatResult]):
    name: ClassVar[str] = "heartbeat"
    group: str
    stream: str
    generation: int
    member_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaveGroup(Command[r.LeaveGroupResult]):
    name: ClassVar[str] = "leave_group"
    group: str
    stream: str
    member_ids: tuple[str, ...]
    group_instance_ids: tuple[str | None, ...] = ()  # parallel to member_ids when given


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeGroup(Command[r.DescribeGroupResult]):
    name: ClassVar[str] = "describe_group"
    group: str
    stream: str


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteGroup(Command[r.DeleteGroupResult]):
    """Delete an Empty group and its committed offsets (Kafka DeleteGroups)."""

    name: ClassVar[str] = "delete_group"
    group: str
    stream: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ListGroups(Command[r.ListGroupsResult]):
    name: ClassVar[str] = "list_groups"
    stream: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Authenticate(Command[r.AuthenticateResult]):
    name: ClassVar[str] = "authenticate"
    mechanism: str  # "PLAIN", "TOKEN" or "SCRAM-SHA-256"/"SCRAM-SHA-512"
    username: str = ""
    # the password, the token, or a SCRAM exchange's transcript (AuthMessage ",p=" proof)
    secret: bytes = b""
    # the client's address ("host:port"), for failed-login backoff; "" = not tracked
    peer: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Stats(Command[r.StatsResult]):
    name: ClassVar[str] = "stats"


def _leaves(cls: type[Any]) -> list[type[Any]]:
    subs = cls.__subclasses__()
    return [c for c in subs if hasattr(c, "name")] + [x for c in subs for x in _leaves(c)]


COMMAND_NAMES: tuple[str, ...] = tuple(
    sorted({c.name for c in _leaves(Command)})  # every leaf is a direct subclass
)

__all__ = [
    "COMMAND_NAMES",
    "AddToTransaction",
    "Append",
    "Authenticate",
    "AwaitData",
    "Command",
    "CommitOffset",
    "CommitTransactionOffsets",
    "CreatePartitions",
    "CreateStream",
    "CreateTopic",
    "DeleteGroup",
    "DeleteOffset",
    "DeletePartitions",
    "DeleteRecords",
    "DeleteStream",
    "DeleteTopic",
    "DescribeGroup",
    "DescribeTopic",
    "EndTransaction",
    "FetchOffset",
    "Heartbeat",
    "InitProducer",
    "InitTransaction",
    "JoinGroup",
    "LeaveGroup",
    "ListGroups",
    "ListOffsets",
    "ListStreams",
    "ListTopics",
    "PublisherSequence",
    "PurgeStream",
    "PurgeTopic",
    "Read",
    "Stats",
    "SyncGroup",
    "UpdateStream",
    "UpdateTopic",
]
