"""Canonical commands: every protocol request becomes one or more of these (DESIGN.md §2).

Each class has a ``name`` (the ``command`` metric label). Offsets in commit/fetch are always the
NEXT offset to read; translators convert from their protocol's convention (DESIGN.md §3).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from .messages import MessageBatch
from .names import Topic

_frozen = dataclass(frozen=True, slots=True, kw_only=True)


class Acks(enum.Enum):
    NONE = "none"  # the client wants no answer; the backend still has to accept it
    LEADER = "leader"
    ALL = "all"


class OffsetSpec(enum.Enum):
    EARLIEST = "earliest"
    LATEST = "latest"  # the next offset to be written (high watermark)
    TIMESTAMP = "timestamp"  # first offset whose timestamp >= timestamp_us
    MAX_TIMESTAMP = "max_timestamp"


@_frozen
class TopicConfig:
    """Per-topic settings; ``None`` = the backend's default, -1 = unlimited."""

    retention_ms: int | None = None
    retention_bytes: int | None = None  # per partition, as in Kafka
    segment_bytes: int | None = None
    max_message_bytes: int | None = None
    compression: str | None = None
    extra: Mapping[str, str] = field(default_factory=dict)  # settings the gateway only stores


class Command:
    """Base of all commands."""

    __slots__ = ()
    name: ClassVar[str]


@_frozen
class CreateStream(Command):
    name: ClassVar[str] = "create_stream"
    stream: str
    id: int | None = None  # protocols that let the client choose numeric ids (Iggy)


@_frozen
class DeleteStream(Command):
    name: ClassVar[str] = "delete_stream"
    stream: str


@_frozen
class ListStreams(Command):
    name: ClassVar[str] = "list_streams"


@_frozen
class CreateTopic(Command):
    name: ClassVar[str] = "create_topic"
    topic: Topic
    partitions: int
    config: TopicConfig = field(default_factory=TopicConfig)
    id: int | None = None
    create_stream: bool = True  # create the stream on the fly (Kafka, Rog have no stream verb)


@_frozen
class DeleteTopic(Command):
    name: ClassVar[str] = "delete_topic"
    topic: Topic


@_frozen
class ListTopics(Command):
    name: ClassVar[str] = "list_topics"
    stream: str | None = None  # None = every stream


@_frozen
class DescribeTopic(Command):
    name: ClassVar[str] = "describe_topic"
    topic: Topic


@_frozen
class UpdateTopic(Command):
    name: ClassVar[str] = "update_topic"
    topic: Topic
    config: TopicConfig


@_frozen
class CreatePartitions(Command):
    """Grow the topic to ``total`` partitions (Kafka's convention; Iggy's "add n" converts)."""

    name: ClassVar[str] = "create_partitions"
    topic: Topic
    total: int


@_frozen
class DeletePartitions(Command):
    """Shrink the topic to ``total`` partitions, dropping the highest-numbered ones (Iggy)."""

    name: ClassVar[str] = "delete_partitions"
    topic: Topic
    total: int


@_frozen
class PurgeTopic(Command):
    """Drop every message; offsets go on from where they were (Iggy purge, DeleteRecords)."""

    name: ClassVar[str] = "purge_topic"
    topic: Topic


@_frozen
class Append(Command):
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


@_frozen
class Read(Command):
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


@_frozen
class ListOffsets(Command):
    name: ClassVar[str] = "list_offsets"
    topic: Topic
    partition: int
    spec: OffsetSpec
    timestamp_us: int = 0


@_frozen
class CommitOffset(Command):
    name: ClassVar[str] = "commit_offset"
    group: str
    topic: Topic
    partition: int
    offset: int  # the NEXT offset to read
    metadata: str = ""


@_frozen
class FetchOffset(Command):
    name: ClassVar[str] = "fetch_offset"
    group: str
    topic: Topic
    partition: int


@_frozen
class DeleteOffset(Command):
    name: ClassVar[str] = "delete_offset"
    group: str
    topic: Topic
    partition: int


@_frozen
class JoinGroup(Command):
    """Kafka-style membership; ``topics`` set = the gateway assigns partitions itself (Iggy)."""

    name: ClassVar[str] = "join_group"
    group: str
    stream: str
    member_id: str = ""
    group_instance_id: str | None = None
    client_id: str = ""
    session_timeout_ms: int = 45_000
    rebalance_timeout_ms: int = 300_000
    protocol_type: str = "consumer"
    protocols: tuple[tuple[str, bytes], ...] = ()
    topics: tuple[Topic, ...] = ()


@_frozen
class SyncGroup(Command):
    name: ClassVar[str] = "sync_group"
    group: str
    stream: str
    generation: int
    member_id: str
    assignments: tuple[tuple[str, bytes], ...] = ()  # from the leader: member id -> assignment


@_frozen
class Heartbeat(Command):
    name: ClassVar[str] = "heartbeat"
    group: str
    stream: str
    generation: int
    member_id: str


@_frozen
class LeaveGroup(Command):
    name: ClassVar[str] = "leave_group"
    group: str
    stream: str
    member_ids: tuple[str, ...]


@_frozen
class DescribeGroup(Command):
    name: ClassVar[str] = "describe_group"
    group: str
    stream: str


@_frozen
class ListGroups(Command):
    name: ClassVar[str] = "list_groups"
    stream: str | None = None


@_frozen
class Authenticate(Command):
    name: ClassVar[str] = "authenticate"
    mechanism: str  # "PLAIN" or "TOKEN"
    username: str = ""
    secret: bytes = b""


@_frozen
class Stats(Command):
    name: ClassVar[str] = "stats"


COMMAND_NAMES: tuple[str, ...] = tuple(
    sorted({c.name for c in Command.__subclasses__()})  # every leaf is a direct subclass
)

__all__ = [
    "COMMAND_NAMES",
    "Acks",
    "Append",
    "Authenticate",
    "Command",
    "CommitOffset",
    "CreatePartitions",
    "CreateStream",
    "CreateTopic",
    "DeleteOffset",
    "DeletePartitions",
    "DeleteStream",
    "DeleteTopic",
    "DescribeGroup",
    "DescribeTopic",
    "FetchOffset",
    "Heartbeat",
    "JoinGroup",
    "LeaveGroup",
    "ListGroups",
    "ListOffsets",
    "ListStreams",
    "ListTopics",
    "OffsetSpec",
    "PurgeTopic",
    "Read",
    "Stats",
    "SyncGroup",
    "TopicConfig",
    "UpdateTopic",
]
