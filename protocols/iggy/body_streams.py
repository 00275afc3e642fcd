"""Payload layouts of streams, topics, partitions and segments (iggy.md §5.3-§5.5, §7, §9).

Era differences: CreateStream takes an explicit id in era A and options in era C; CreateTopic
and UpdateTopic carry fixed settings in eras A/B and options in era C; replies gained options
and lost the replication factor in era C; GetTopics got a count prefix in era C only.
"""

from __future__ import annotations

from typing import Any, Final

from .codes import Era
from .frames_streams import (
    CreatePartitions,
    CreateStream,
    CreateTopic,
    DeletePartitions,
    DeleteSegments,
    DeleteStream,
    DeleteTopic,
    GetStream,
    GetStreams,
    GetTopic,
    GetTopics,
    Partition,
    PurgeStream,
    PurgeTopic,
    Stream,
    StreamDetails,
    Streams,
    Topic,
    TopicDetails,
    Topics,
    UpdateStream,
    UpdateTopic,
)
from .layout import (
    IDENT,
    LEGACY,
    NAME,
    TLV_REST,
    TLV_SIZED,
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

ERA_A: Final = frozenset((Era.A,))

_STREAM = Layout(
    Stream,
    Field("id", U32),
    Field("created_at", U64),
    Field("topics_count", U32),
    Field("size_bytes", U64),
    Field("messages_count", U64),
    Field("name", NAME),
    Field("options", TLV_SIZED, VSR),
)
_TOPIC = Layout(
    Topic,
    Field("id", U32),
    Field("created_at", U64),
    Field("partitions_count", U32),
    Field("message_expiry", U64),
    Field("compression_algorithm", U8),
    Field("max_topic_size", U64),
    Field("replication_factor", U8, LEGACY),
    Field("size_bytes", U64),
    Field("messages_count", U64),
    Field("name", NAME),
    Field("options", TLV_SIZED, VSR),
    Field("derived_options", TLV_SIZED, VSR),
)
_PARTITION = Layout(
    Partition,
    Field("id", U32),
    Field("created_at", U64),
    Field("segments_count", U32),
    Field("current_offset", U64),
    Field("size_bytes", U64),
    Field("messages_count", U64),
)


_TWO_IDS = (Field("stream_id", IDENT), Field("topic_id", IDENT))
_LEGACY_TOPIC_SETTINGS = (
    Field("compression_algorithm", U8, LEGACY),
    Field("message_expiry", U64, LEGACY),
    Field("max_topic_size", U64, LEGACY),
    Field("replication_factor", U8, LEGACY),
)

LAYOUTS: Final[dict[type[Any], Kind]] = {
    # requests
    CreateStream: Layout(
        CreateStream,
        Field("stream_id", U32, ERA_A),
        Field("name", NAME),
        Field("options", TLV_REST, VSR),
    ),
    GetStream: Layout(GetStream, Field("stream_id", IDENT)),
    GetStreams: Layout(GetStreams),
    UpdateStream: Layout(
        UpdateStream,
        Field("stream_id", IDENT),
        Field("name", NAME),
        Field("options", TLV_REST, VSR),
    ),
    DeleteStream: Layout(DeleteStream, Field("stream_id", IDENT)),
    PurgeStream: Layout(PurgeStream, Field("stream_id", IDENT)),
    CreateTopic: Layout(
        CreateTopic,
        Field("stream_id", IDENT),
        Field("topic_id", U32, ERA_A),
        Field("partitions_count", U32),
        *_LEGACY_TOPIC_SETTINGS,
        Field("name", NAME),
        Field("options", TLV_REST, VSR),
    ),
    GetTopic: Layout(GetTopic, *_TWO_IDS),
    GetTopics: Layout(GetTopics, Field("stream_id", IDENT)),
    UpdateTopic: Layout(
        UpdateTopic,
        *_TWO_IDS,
        *_LEGACY_TOPIC_SETTINGS,
        Field("name", NAME),
        Field("options", TLV_REST, VSR),
    ),
    DeleteTopic: Layout(DeleteTopic, *_TWO_IDS),
    PurgeTopic: Layout(PurgeTopic, *_TWO_IDS),
    CreatePartitions: Layout(CreatePartitions, *_TWO_IDS, Field("partitions_count", U32)),
    DeletePartitions: Layout(DeletePartitions, *_TWO_IDS, Field("partitions_count", U32)),
    DeleteSegments: Layout(
        DeleteSegments, *_TWO_IDS, Field("partition_id", U32), Field("segments_count", U32)
    ),
    # replies
    StreamDetails: Details(StreamDetails, _STREAM, _TOPIC, ("stream", "topics"), "topics_count"),
    TopicDetails: Details(
        TopicDetails, _TOPIC, _PARTITION, ("topic", "partitions"), "partitions_count"
    ),
    Streams: Layout(Streams, Field("streams", ListOf(_STREAM, "rest"))),
    # §5.4: "the only list with a count prefix" is era C's; era B has none (§9.2).
    Topics: Layout(
        Topics,
        Field("topics", ListOf(_TOPIC, "u32"), VSR),
        Field("topics", ListOf(_TOPIC, "rest"), LEGACY),
    ),
}
