"""Results of the canonical commands (``<Command>Result``) and the info records they carry."""

from __future__ import annotations

from dataclasses import dataclass, field

from .messages import MessageBatch
from .names import Topic
from .options import TopicConfig


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionInfo:
    partition: int
    log_start_offset: int
    next_offset: int  # high watermark: the offset the next message will get
    size_bytes: int = 0
    max_timestamp_us: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicInfo:
    topic: Topic
    id: int
    partitions: tuple[PartitionInfo, ...]
    config: TopicConfig = field(default_factory=TopicConfig)
    created_at_us: int = 0
    # What the backend applies where ``config`` leaves a setting to it (None: it does not say),
    # so a listener reports the store's real values, not another broker's defaults.
    defaults: TopicConfig = field(default_factory=TopicConfig)

    @property
    def partition_count(self) -> int:
        return len(self.partitions)

    @property
    def message_count(self) -> int:
        return sum(p.next_offset - p.log_start_offset for p in self.partitions)

    @property
    def size_bytes(self) -> int:
        return sum(p.size_bytes for p in self.partitions)


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamInfo:
    name: str
    id: int
    created_at_us: int = 0
    topics: tuple[TopicInfo, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateStreamResult:
    info: StreamInfo


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteStreamResult:
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateStreamResult:
    info: StreamInfo


@dataclass(frozen=True, slots=True, kw_only=True)
class PurgeStreamResult:
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class ListStreamsResult:
    streams: tuple[StreamInfo, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateTopicResult:
    info: TopicInfo


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteTopicResult:
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class ListTopicsResult:
    topics: tuple[TopicInfo, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeTopicResult:
    info: TopicInfo


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateTopicResult:
    info: TopicInfo


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatePartitionsResult:
    info: TopicInfo


@dataclass(frozen=True, slots=True, kw_only=True)
class DeletePartitionsResult:
    info: TopicInfo


@dataclass(frozen=True, slots=True, kw_only=True)
class PurgeTopicResult:
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class AppendResult:
    base_offset: int  # -1: not known (an ``Append`` with ``offset_needed=False``)
    count: int
    log_append_time_us: int
    log_start_offset: int = 0
    duplicate: bool = False  # an idempotent retry: nothing new stored, original offsets

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.count - 1


@dataclass(frozen=True, slots=True, kw_only=True)
class ReadResult:
    batches: tuple[MessageBatch, ...]
    high_watermark: int
    log_start_offset: int
    waited_s: float = 0.0  # time spent long-polling (kept out of the work latency metric)
    # The first offset of the oldest open transaction, or the high watermark (-1: the same);
    # reads that are not UNCOMMITTED stop there.
    last_stable_offset: int = -1
    # Isolation.COMMITTED: the aborted transactions the returned range overlaps, as
    # (producer id, first offset), oldest first (Kafka's Fetch aborted_transactions).
    aborted: tuple[tuple[int, int], ...] = ()

    @property
    def count(self) -> int:
        return sum(len(b) for b in self.batches)


@dataclass(frozen=True, slots=True, kw_only=True)
class AwaitDataResult:
    waited_s: float = 0.0  # time spent long-polling (kept out of the work latency metric)


@dataclass(frozen=True, slots=True, kw_only=True)
class ListOffsetsResult:
    offset: int | None  # None: no message at or after the timestamp
    timestamp_us: int = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class CommitOffsetResult:
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchOffsetResult:
    offset: int | None  # None: nothing committed
    metadata: str = ""
    leader_epoch: int = -1  # as committed (CommitOffset.leader_epoch)


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteOffsetResult:
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberInfo:
    member_id: str
    client_id: str = ""
    client_host: str = ""
    group_instance_id: str | None = None
    metadata: bytes = b""
    assignment: bytes = b""
    partitions: tuple[tuple[Topic, int], ...] = ()  # server-side assignment (Iggy)


@dataclass(frozen=True, slots=True, kw_only=True)
class JoinGroupResult:
    generation: int
    protocol_name: str
    leader: str
    member_id: str
    members: tuple[MemberInfo, ...] = ()  # filled for the leader only


@dataclass(frozen=True, slots=True, kw_only=True)
class SyncGroupResult:
    assignment: bytes = b""
    partitions: tuple[tuple[Topic, int], ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatResult:
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaveGroupResult:
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupInfo:
    group: str
    state: str  # Empty, PreparingRebalance, CompletingRebalance, Stable, Dead
    protocol_type: str = "consumer"
    protocol: str = ""
    members: tuple[MemberInfo, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeGroupResult:
    info: GroupInfo


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteGroupResult:
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteRecordsResult:
    log_start_offset: int  # Kafka's low watermark after the deletion


@dataclass(frozen=True, slots=True, kw_only=True)
class ListGroupsResult:
    groups: tuple[GroupInfo, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class InitProducerResult:
    producer_id: int
    producer_epoch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class AddToTransactionResult:
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class CommitTransactionOffsetsResult:
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class EndTransactionResult:
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class PublisherSequenceResult:
    sequence: int


@dataclass(frozen=True, slots=True, kw_only=True)
class AuthenticateResult:
    user_id: int
    username: str


@dataclass(frozen=True, slots=True, kw_only=True)
class StatsResult:
    streams: int
    topics: int
    partitions: int
    messages: int
    size_bytes: int
    consumer_groups: int = 0


__all__ = [
    "AddToTransactionResult",
    "AppendResult",
    "AuthenticateResult",
    "AwaitDataResult",
    "CommitOffsetResult",
    "CommitTransactionOffsetsResult",
    "CreatePartitionsResult",
    "CreateStreamResult",
    "CreateTopicResult",
    "DeleteGroupResult",
    "DeleteOffsetResult",
    "DeletePartitionsResult",
    "DeleteRecordsResult",
    "DeleteStreamResult",
    "DeleteTopicResult",
    "DescribeGroupResult",
    "DescribeTopicResult",
    "EndTransactionResult",
    "FetchOffsetResult",
    "GroupInfo",
    "HeartbeatResult",
    "InitProducerResult",
    "JoinGroupResult",
    "LeaveGroupResult",
    "ListGroupsResult",
    "ListOffsetsResult",
    "ListStreamsResult",
    "ListTopicsResult",
    "MemberInfo",
    "PartitionInfo",
    "PublisherSequenceResult",
    "PurgeStreamResult",
    "PurgeTopicResult",
    "ReadResult",
    "StatsResult",
    "StreamInfo",
    "SyncGroupResult",
    "TopicInfo",
    "UpdateStreamResult",
    "UpdateTopicResult",
]
