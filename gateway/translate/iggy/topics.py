"""Iggy streams, topics and partitions <-> canonical infos and TopicConfig (iggy.md
§5.3-§5.5, classic layouts §9). Pure functions. How options and settings map is shared with the
Iggy backend, in ``gateway.translate.iggy.topic_settings``; it is re-exported here for the listener.
"""

from __future__ import annotations

from gateway.model import PartitionInfo, StreamInfo, TopicInfo
from gateway.translate.iggy import topic_settings as mapped
from gateway.translate.iggy.messages import current_offset
from gateway.translate.iggy.topic_settings import (
    check_no_options,
    check_topic_size,
    check_updatable,
    options_of,
    topic_config,
)
from protocols import iggy as wire

# --- streams and topics -------------------------------------------------------------------------


def legacy_topic_options(
    compression_algorithm: int, message_expiry: int, max_topic_size: int
) -> dict[str, str]:
    """The fixed fields of an era A/B CreateTopic/UpdateTopic, as options."""
    options = {}
    if compression_algorithm == wire.CompressionAlgorithm.GZIP:
        options["compression_algorithm"] = "gzip"
    if message_expiry:
        options["message_expiry"] = str(message_expiry)
    if max_topic_size:
        options["max_topic_size"] = str(max_topic_size)
    return options


def partition_frame(info: PartitionInfo, created_at: int, *, shift: int = 0) -> wire.Partition:
    return wire.Partition(
        id=info.partition + shift,
        created_at=created_at,
        segments_count=1,
        current_offset=current_offset(info.next_offset),
        size_bytes=info.size_bytes,
        messages_count=info.next_offset - info.log_start_offset,
    )


def topic_frame(info: TopicInfo, *, legacy: bool = False) -> wire.Topic:
    config, partitions = info.config, info.partition_count
    # A real server reports what it resolved, never ServerDefault (0): where the topic leaves a
    # setting to the backend, the backend's value (``TopicInfo.defaults``) when it says one.
    expiry = mapped.message_expiry(config) or mapped.message_expiry(info.defaults)
    size = mapped.max_topic_size(config, partitions) or mapped.max_topic_size(
        info.defaults, partitions
    )
    return wire.Topic(
        id=info.id,
        created_at=info.created_at_us,
        partitions_count=partitions,
        message_expiry=expiry,
        compression_algorithm=mapped.compression(config),
        max_topic_size=size,
        size_bytes=info.size_bytes,
        messages_count=info.message_count,
        name=info.topic.name,
        replication_factor=1 if legacy else 0,
        options=() if legacy else mapped.options_tlv(config.extra),
        derived_options=() if legacy else mapped.options_tlv(_derived(info, expiry, size)),
    )


def _derived(info: TopicInfo, expiry: int, size: int) -> dict[str, str]:
    """The derived options block (§5.4): what the topic resolved for the keys the client did
    not send, as a real server reports its admission defaults. Only what the gateway knows of
    the topic: its compression, expiry, size cap and segment size."""
    config = info.config
    segment = config.segment_bytes or info.defaults.segment_bytes
    resolved = {
        "compression_algorithm": config.compression or "none",
        "message_expiry": str(expiry) if expiry else "",
        "max_topic_size": str(size) if size else "",
        "segment_size": str(segment) if segment else "",
    }
    return {k: v for k, v in resolved.items() if v and k not in config.extra}


def topic_details(info: TopicInfo, *, legacy: bool = False, shift: int = 0) -> wire.TopicDetails:
    return wire.TopicDetails(
        topic=topic_frame(info, legacy=legacy),
        partitions=tuple(
            partition_frame(p, info.created_at_us, shift=shift) for p in info.partitions
        ),
    )


def stream_frame(info: StreamInfo) -> wire.Stream:
    return wire.Stream(
        id=info.id,
        created_at=info.created_at_us,
        topics_count=len(info.topics),
        size_bytes=sum(t.size_bytes for t in info.topics),
        messages_count=sum(t.message_count for t in info.topics),
        name=info.name,
    )


def stream_details(info: StreamInfo, *, legacy: bool = False) -> wire.StreamDetails:
    return wire.StreamDetails(
        stream=stream_frame(info), topics=tuple(topic_frame(t, legacy=legacy) for t in info.topics)
    )


__all__ = [
    "check_no_options",
    "check_topic_size",
    "check_updatable",
    "legacy_topic_options",
    "options_of",
    "partition_frame",
    "stream_details",
    "stream_frame",
    "topic_config",
    "topic_details",
    "topic_frame",
]
