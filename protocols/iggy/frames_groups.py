"""Consumer offsets and consumer groups (iggy.md §5.7, §5.8; era B §9.2)."""

from __future__ import annotations

from dataclasses import dataclass

from .identifiers import Consumer, Identifier

__all__ = [
    "ConsumerGroup",
    "ConsumerGroupAssignment",
    "ConsumerGroupDetails",
    "ConsumerGroupMember",
    "ConsumerGroups",
    "ConsumerOffsetInfo",
    "CreateConsumerGroup",
    "DeleteConsumerGroup",
    "DeleteConsumerOffset",
    "GetConsumerGroup",
    "GetConsumerGroups",
    "GetConsumerOffset",
    "JoinConsumerGroup",
    "LeaveConsumerGroup",
    "StoreConsumerOffset",
    "SyncConsumerGroup",
]

# --- offsets ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class GetConsumerOffset:
    consumer: Consumer
    stream_id: Identifier
    topic_id: Identifier
    partition_id: int | None  # None: flag 0, partition 0 for a single consumer (§4)


@dataclass(frozen=True, slots=True, kw_only=True)
class StoreConsumerOffset:
    consumer: Consumer
    stream_id: Identifier
    topic_id: Identifier
    partition_id: int | None
    offset: int  # the LAST consumed offset (§5.7)
    ack: int = 1  # era C only: 0 NoAck, 1 Quorum (what 0.9.0 sends)


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteConsumerOffset:
    consumer: Consumer
    stream_id: Identifier
    topic_id: Identifier
    partition_id: int | None
    ack: int = 1  # era C only


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerOffsetInfo:
    partition_id: int
    current_offset: int
    stored_offset: int


# --- groups -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateConsumerGroup:
    stream_id: Identifier
    topic_id: Identifier
    name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class GetConsumerGroup:
    stream_id: Identifier
    topic_id: Identifier
    group_id: Identifier


@dataclass(frozen=True, slots=True, kw_only=True)
class GetConsumerGroups:
    stream_id: Identifier
    topic_id: Identifier


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteConsumerGroup:
    stream_id: Identifier
    topic_id: Identifier
    group_id: Identifier


@dataclass(frozen=True, slots=True, kw_only=True)
class JoinConsumerGroup:
    stream_id: Identifier
    topic_id: Identifier
    group_id: Identifier


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaveConsumerGroup:
    stream_id: Identifier
    topic_id: Identifier
    group_id: Identifier


@dataclass(frozen=True, slots=True, kw_only=True)
class SyncConsumerGroup:
    """Code 606, era C only: ask for this member's partitions (§5.8)."""

    stream_id: Identifier
    topic_id: Identifier
    group_id: Identifier


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroup:
    id: int
    partitions_count: int
    members_count: int
    name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupMember:
    id: int
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupDetails:
    """ConsumerGroup followed by exactly ``group.members_count`` members in era C."""

    group: ConsumerGroup
    members: tuple[ConsumerGroupMember, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroups:
    groups: tuple[ConsumerGroup, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupAssignment:
    """The SyncConsumerGroup reply; an empty body (None) means "not a member" (§5.8)."""

    generation: int
    partitions: tuple[int, ...]
