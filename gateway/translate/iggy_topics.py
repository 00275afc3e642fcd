"""Iggy streams, topics, partitions and their options <-> canonical infos and TopicConfig
(iggy.md §5.3-§5.5, classic layouts §9). Pure functions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from gateway.model import (
    InvalidRequest,
    PartitionInfo,
    StreamInfo,
    TopicConfig,
    TopicInfo,
)
from gateway.translate.iggy import U64_MAX, current_offset, header_text
from protocols import iggy as wire
from protocols._wire import LocalProtocolError
from protocols.iggy.headers import Header as IggyHeader
from protocols.iggy.headers import HeaderKind as IggyKind
from protocols.iggy.headers import HeaderValue

# --- streams and topics -------------------------------------------------------------------------

# Option keys of iggy.md §5.4 and how their values travel; anything else is a String.
_OPTION_KINDS: Final = {
    "durability": IggyKind.STRING,
    "consumer_offset_durability": IggyKind.STRING,
    "compression_algorithm": IggyKind.STRING,
    "message_expiry": IggyKind.UINT64,
    "max_topic_size": IggyKind.UINT64,
    "segment_size": IggyKind.UINT64,
    "messages_required_to_save": IggyKind.UINT32,
    "size_of_messages_required_to_save": IggyKind.UINT64,
    "preallocate_segments": IggyKind.BOOL,
}
_COMPRESSIONS: Final = {
    wire.CompressionAlgorithm.NONE: None,
    wire.CompressionAlgorithm.GZIP: "gzip",
}


def _option_text(value: HeaderValue) -> str:
    python = value.to_python()
    if isinstance(python, bool):
        return "true" if python else "false"
    if isinstance(python, bytes):
        return python.hex()
    return str(python)


def _option_value(key: str, text: str) -> HeaderValue:
    kind = _OPTION_KINDS.get(key, IggyKind.STRING)
    try:
        if kind is IggyKind.BOOL:
            return HeaderValue.boolean(text == "true")
        if kind is not IggyKind.STRING:
            return HeaderValue.integer(kind, int(text))
    except (ValueError, LocalProtocolError):
        pass
    return HeaderValue.string(text or "-")


def options_of(options: Sequence[IggyHeader]) -> dict[str, str]:
    """An options TLV (string keys) as text; InvalidRequest when a value is unreadable."""
    out = {}
    for option in options:
        key = header_text(option.key)
        try:
            out[key] = _option_text(option.value)
        except ValueError as exc:
            raise InvalidRequest(f"option {key!r}: {exc}") from None
    return out


def topic_config(
    options: Mapping[str, str], *, partitions: int, base: TopicConfig | None = None
) -> TopicConfig:
    """Iggy topic settings -> canonical config. ``base``: the current config (UpdateTopic sends a
    patch). Expiry becomes retention time; the topic-wide max size is split over the
    partitions (canonical retention is per partition); everything is also kept verbatim."""
    base = base or TopicConfig()
    extra = dict(base.extra)
    extra.update(options)
    retention_ms, retention_bytes = base.retention_ms, base.retention_bytes
    segment_bytes, compression = base.segment_bytes, base.compression
    try:
        if "message_expiry" in options:
            expiry = int(options["message_expiry"])
            retention_ms = (
                None if expiry == 0 else -1 if expiry == U64_MAX else max(1, expiry // 1000)
            )
        if "max_topic_size" in options:
            size = int(options["max_topic_size"])
            retention_bytes = (
                None if size == 0 else -1 if size == U64_MAX else -(-size // max(1, partitions))
            )
        if "segment_size" in options:
            segment_bytes = int(options["segment_size"]) or None
    except ValueError as exc:
        raise InvalidRequest(f"bad topic option: {exc}") from None
    if "compression_algorithm" in options:
        algorithm = options["compression_algorithm"].lower()
        if algorithm not in ("none", "gzip"):
            raise InvalidRequest(f"unknown compression algorithm {algorithm!r}")
        compression = None if algorithm == "none" else algorithm
    return TopicConfig(
        retention_ms=retention_ms,
        retention_bytes=retention_bytes,
        segment_bytes=segment_bytes,
        max_message_bytes=base.max_message_bytes,
        compression=compression,
        extra=extra,
    )


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


def _expiry(config: TopicConfig) -> int:
    if config.retention_ms is None:
        return 0
    return U64_MAX if config.retention_ms < 0 else config.retention_ms * 1000


def _max_size(config: TopicConfig, partitions: int) -> int:
    explicit = config.extra.get("max_topic_size")
    if explicit is not None and explicit.isdigit():
        return int(explicit)
    if config.retention_bytes is None:
        return 0
    return U64_MAX if config.retention_bytes < 0 else config.retention_bytes * partitions


def _options(extra: Mapping[str, str]) -> tuple[IggyHeader, ...]:
    return tuple(
        IggyHeader(key=HeaderValue.string(k), value=_option_value(k, v))
        for k, v in sorted(extra.items())
        if k
    )


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
    config = info.config
    compression = (
        wire.CompressionAlgorithm.GZIP
        if config.compression == "gzip"
        else wire.CompressionAlgorithm.NONE
    )
    return wire.Topic(
        id=info.id,
        created_at=info.created_at_us,
        partitions_count=info.partition_count,
        message_expiry=_expiry(config),
        compression_algorithm=compression,
        max_topic_size=_max_size(config, info.partition_count),
        size_bytes=info.size_bytes,
        messages_count=info.message_count,
        name=info.topic.name,
        replication_factor=1 if legacy else 0,
        options=() if legacy else _options(config.extra),
    )


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
    "legacy_topic_options",
    "options_of",
    "partition_frame",
    "stream_details",
    "stream_frame",
    "topic_config",
    "topic_details",
    "topic_frame",
]
