"""Streams, topics, partitions and segments (iggy.md §5.3-§5.5, era differences §7, §9.2-§9.3).

Fields that only some eras carry have defaults; the layouts in ``body_streams`` say which.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from .headers import Header
from .identifiers import Identifier

__all__ = [
    "CompressionAlgorithm",
    "CreatePartitions",
    "CreateStream",
    "CreateTopic",
    "DeletePartitions",
    "DeleteSegments",
    "DeleteStream",
    "DeleteTopic",
    "GetStream",
    "GetStreams",
    "GetTopic",
    "GetTopics",
    "Partition",
    "PurgeStream",
    "PurgeTopic",
    "Stream",
    "StreamDetails",
    "Streams",
    "Topic",
    "TopicDetails",
    "Topics",
    "UpdateStream",
    "UpdateTopic",
]


class CompressionAlgorithm(IntEnum):
    NONE = 1
    GZIP = 2


# --- requests ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateStream:
    name: str
    options: tuple[Header, ...] = ()  # era C: string-keyed TLV to the end of the body
    stream_id: int = 0  # era A: explicit id, 0 = let the server pick


@dataclass(frozen=True, slots=True, kw_only=True)
class GetStream:
    stream_id: Identifier


@dataclass(frozen=True, slots=True, kw_only=True)
class GetStreams:
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateStream:
    stream_id: Identifier
    name: str
    options: tuple[Header, ...] = ()  # era C


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteStream:
    stream_id: Identifier


@dataclass(frozen=True, slots=True, kw_only=True)
class PurgeStream:
    stream_id: Identifier


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateTopic:
    stream_id: Identifier
    name: str
    partitions_count: int
    # Era C carries every setting in ``options`` (§5.4: durability, compression_algorithm,
    # message_expiry, ...); eras A/B have fixed fields instead.
    options: tuple[Header, ...] = ()
    compression_algorithm: int = CompressionAlgorithm.NONE  # eras A/B
    message_expiry: int = 0  # eras A/B, µs; 0 = server default, u64::MAX = never
    max_topic_size: int = 0  # eras A/B, bytes; 0 = server default, u64::MAX = unlimited
    replication_factor: int = 0  # eras A/B
    topic_id: int = 0  # era A: explicit id, 0 = let the server pick


@dataclass(frozen=True, slots=True, kw_only=True)
class GetTopic:
    stream_id: Identifier
    topic_id: Identifier


@dataclass(frozen=True, slots=True, kw_only=True)
class GetTopics:
    stream_id: Identifier


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateTopic:
    stream_id: Identifier
    topic_id: Identifier
    name: str
    options: tuple[Header, ...] = ()  # era C: only the changed keys (a patch)
    compression_algorithm: int = CompressionAlgorithm.NONE  # eras A/B
    message_expiry: int = 0  # eras A/B
    max_topic_size: int = 0  # eras A/B
    replication_factor: int = 0  # eras A/B


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteTopic:
    stream_id: Identifier
    topic_id: Identifier


@dataclass(frozen=True, slots=True, kw_only=True)
class PurgeTopic:
    stream_id: Identifier
    topic_id: Identifier


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatePartitions:
    stream_id: Identifier
    topic_id: Identifier
    partitions_count: int


@dataclass(frozen=True, slots=True, kw_only=True)
class DeletePartitions:
    stream_id: Identifier
    topic_id: Identifier
    partitions_count: int  # the LAST n partitions go (§5.5)


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteSegments:
    stream_id: Identifier
    topic_id: Identifier
    partition_id: int
    segments_count: int


# --- replies ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Stream:
    id: int
    created_at: int
    topics_count: int
    size_bytes: int
    messages_count: int
    name: str
    options: tuple[Header, ...] = ()  # era C


@dataclass(frozen=True, slots=True, kw_only=True)
class Partition:
    id: int
    created_at: int
    segments_count: int
    current_offset: int
    size_bytes: int
    messages_count: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Topic:
    """The TopicHeader of §5.4 (era C) / §9.2 (eras A/B)."""

    id: int
    created_at: int
    partitions_count: int
    message_expiry: int
    compression_algorithm: int
    max_topic_size: int
    size_bytes: int
    messages_count: int
    name: str
    replication_factor: int = 0  # eras A/B
    options: tuple[Header, ...] = ()  # era C: explicit options
    derived_options: tuple[Header, ...] = ()  # era C


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamDetails:
    """Stream followed by its topics: exactly ``stream.topics_count`` of them in era C."""

    stream: Stream
    topics: tuple[Topic, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicDetails:
    """Topic followed by exactly ``topic.partitions_count`` partitions in era C."""

    topic: Topic
    partitions: tuple[Partition, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Streams:
    streams: tuple[Stream, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Topics:
    topics: tuple[Topic, ...]
