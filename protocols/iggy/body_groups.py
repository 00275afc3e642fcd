"""Payload layouts of consumer offsets and groups (iggy.md §5.7, §5.8; eras A/B §9).

Era C added the trailing ``ack`` byte of StoreConsumerOffset and DeleteConsumerOffset; the
partition field is ``OptPartition`` from era B on and a bare u32 in era A (see PARTITION).
"""

from __future__ import annotations

from typing import Any, Final

from .frames_groups import (
    ConsumerGroup,
    ConsumerGroupAssignment,
    ConsumerGroupDetails,
    ConsumerGroupMember,
    ConsumerGroups,
    ConsumerOffsetInfo,
    CreateConsumerGroup,
    DeleteConsumerGroup,
    DeleteConsumerOffset,
    GetConsumerGroup,
    GetConsumerGroups,
    GetConsumerOffset,
    JoinConsumerGroup,
    LeaveConsumerGroup,
    StoreConsumerOffset,
    SyncConsumerGroup,
)
from .layout import (
    CONSUMER,
    IDENT,
    NAME,
    PARTITION,
    U8,
    U32,
    U64,
    VSR,
    Details,
    Field,
    Kind,
    Layout,
    ListOf,
)

__all__ = ["LAYOUTS"]

_OFFSET_KEY = (
    Field("consumer", CONSUMER),
    Field("stream_id", IDENT),
    Field("topic_id", IDENT),
    Field("partition_id", PARTITION),
)
_GROUP_KEY = (Field("stream_id", IDENT), Field("topic_id", IDENT), Field("group_id", IDENT))
_GROUP = Layout(
    ConsumerGroup,
    Field("id", U32),
    Field("partitions_count", U32),
    Field("members_count", U32),
    Field("name", NAME),
)
_MEMBER = Layout(ConsumerGroupMember, Field("id", U32), Field("partitions", ListOf(U32, "u32")))

LAYOUTS: Final[dict[type[Any], Kind]] = {
    # requests
    GetConsumerOffset: Layout(GetConsumerOffset, *_OFFSET_KEY),
    StoreConsumerOffset: Layout(
        StoreConsumerOffset, *_OFFSET_KEY, Field("offset", U64), Field("ack", U8, VSR)
    ),
    DeleteConsumerOffset: Layout(DeleteConsumerOffset, *_OFFSET_KEY, Field("ack", U8, VSR)),
    CreateConsumerGroup: Layout(
        CreateConsumerGroup,
        Field("stream_id", IDENT),
        Field("topic_id", IDENT),
        Field("name", NAME),
    ),
    GetConsumerGroup: Layout(GetConsumerGroup, *_GROUP_KEY),
    GetConsumerGroups: Layout(
        GetConsumerGroups, Field("stream_id", IDENT), Field("topic_id", IDENT)
    ),
    DeleteConsumerGroup: Layout(DeleteConsumerGroup, *_GROUP_KEY),
    JoinConsumerGroup: Layout(JoinConsumerGroup, *_GROUP_KEY),
    LeaveConsumerGroup: Layout(LeaveConsumerGroup, *_GROUP_KEY),
    SyncConsumerGroup: Layout(SyncConsumerGroup, *_GROUP_KEY),
    # replies
    ConsumerOffsetInfo: Layout(
        ConsumerOffsetInfo,
        Field("partition_id", U32),
        Field("current_offset", U64),
        Field("stored_offset", U64),
    ),
    ConsumerGroupDetails: Details(
        ConsumerGroupDetails, _GROUP, _MEMBER, ("group", "members"), "members_count"
    ),
    ConsumerGroups: Layout(ConsumerGroups, Field("groups", ListOf(_GROUP, "rest"))),
    ConsumerGroupAssignment: Layout(
        ConsumerGroupAssignment, Field("generation", U64), Field("partitions", ListOf(U32, "u32"))
    ),
}
