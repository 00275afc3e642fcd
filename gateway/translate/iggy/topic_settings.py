"""Iggy topic settings and partitions <-> canonical TopicConfig and infos (iggy.md §5.3-§5.5).

Pure functions used by both roles: the listener turns a client's options into a TopicConfig
(``topic_config``) and answers with the fixed fields (``message_expiry``, ``max_topic_size``);
the Iggy backend does the reverse (``topic_options`` for its requests, ``topic_info`` and
``stream_info`` for the server's answers).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Final

from gateway.model import (
    InvalidRequest,
    PartitionInfo,
    StreamInfo,
    Topic,
    TopicConfig,
    TopicInfo,
)
from gateway.translate.iggy.errors import IggyStatus
from gateway.translate.iggy.messages import U64_MAX, header_text, next_offset
from gateway.translate.iggy.sizes import parse_expiry_us, parse_max_size, parse_size
from protocols import iggy as wire
from protocols._wire import LocalProtocolError
from protocols.iggy.headers import Header as IggyHeader
from protocols.iggy.headers import HeaderKind as IggyKind
from protocols.iggy.headers import HeaderValue
from protocols.iggy.status import Status

# Option keys of iggy.md §5.4 and how their values travel; anything else is a String.
OPTION_KINDS: Final = {
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


def _option_text(value: HeaderValue) -> str:
    python = value.to_python()
    if isinstance(python, bool):
        return "true" if python else "false"
    if isinstance(python, bytes):
        return python.hex()
    return str(python)


def _option_value(key: str, text: str) -> HeaderValue:
    kind = OPTION_KINDS.get(key, IggyKind.STRING)
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


def options_tlv(options: Mapping[str, str]) -> tuple[IggyHeader, ...]:
    """Options as the TLV of §5.4: string keys, sorted, each value in its key's kind."""
    return tuple(
        IggyHeader(key=HeaderValue.string(k), value=_option_value(k, v))
        for k, v in sorted(options.items())
        if k
    )


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
    # Values come as numbers (the SDK's typed options) or as Iggy's text forms (an ``options=``
    # string: "128 MiB", "1h"); either way ``extra`` keeps the number, as a server reports it.
    try:
        if "message_expiry" in options:
            expiry = parse_expiry_us(options["message_expiry"])
            extra["message_expiry"] = str(expiry)
            retention_ms = _retention_ms(expiry)
        if "max_topic_size" in options:
            size = parse_max_size(options["max_topic_size"])
            extra["max_topic_size"] = str(size)
            retention_bytes = (
                None if size == 0 else -1 if size == U64_MAX else -(-size // max(1, partitions))
            )
        if "segment_size" in options:
            segment_bytes = parse_size(options["segment_size"]) or None
            extra["segment_size"] = str(segment_bytes or 0)
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


def _retention_ms(expiry_us: int) -> int | None:
    return None if expiry_us == 0 else -1 if expiry_us == U64_MAX else max(1, expiry_us // 1000)


def message_expiry(config: TopicConfig) -> int:
    """§5.4: µs; 0 = the server's default, u64::MAX = never. Canonical retention is in ms: the
    µs an Iggy client gave are kept (in ``extra``) and answered while they still say what the
    retention is, so 1 µs comes back as 1 µs, not 1 ms."""
    explicit = config.extra.get("message_expiry", "")
    if explicit.isdigit() and _retention_ms(int(explicit)) == config.retention_ms:
        return int(explicit)
    if config.retention_ms is None:
        return 0
    return U64_MAX if config.retention_ms < 0 else config.retention_ms * 1000


def max_topic_size(config: TopicConfig, partitions: int) -> int:
    """§5.4: bytes for the whole topic (canonical retention is per partition); 0 = the server's
    default, u64::MAX = unlimited. A size an Iggy client gave is kept as it was."""
    explicit = config.extra.get("max_topic_size")
    if explicit is not None and explicit.isdigit():
        return int(explicit)
    if config.retention_bytes is None:
        return 0
    return U64_MAX if config.retention_bytes < 0 else config.retention_bytes * partitions


def check_topic_size(config: TopicConfig, default_segment: int | None = None) -> None:
    """A real server refuses a max topic size below the segment size with InvalidTopicSize
    (1019): the segment size the topic was given, else the one it gets (the server's default,
    1 GiB; here the backend's, ``default_segment``, when the backend says it)."""
    size = config.extra.get("max_topic_size", "")
    segment = config.segment_bytes or default_segment
    if size.isdigit() and int(size) not in (0, U64_MAX) and segment and int(size) < segment:
        raise IggyStatus(
            Status.INVALID_TOPIC_SIZE,
            f"max topic size {size} is below the segment size {segment}",
        )


# What UpdateTopic may change (a real server's UPDATABLE_TOPIC_OPTION_KEYS): the storage knobs
# (segment size, durability, flush thresholds, preallocation) are given at creation only.
UPDATABLE: Final = frozenset({"compression_algorithm", "message_expiry", "max_topic_size"})


def check_updatable(options: Mapping[str, str]) -> None:
    """UpdateTopic options: a create-only or unknown key is UnsupportedOptionKey (4041)."""
    for key in sorted(options):
        if key not in UPDATABLE:
            raise IggyStatus(
                Status.UNSUPPORTED_OPTION_KEY, f"topic option {key!r} cannot be updated"
            )


def check_no_options(options: Sequence[IggyHeader], what: str) -> None:
    """Streams and users have no option keys yet: a real server refuses any key with
    UnsupportedOptionKey (4041), as the SDK's docs say of update_stream and update_user."""
    if options:
        key = header_text(options[0].key)
        raise IggyStatus(Status.UNSUPPORTED_OPTION_KEY, f"unsupported {what} option {key!r}")


def compression(config: TopicConfig) -> wire.CompressionAlgorithm:
    if config.compression == "gzip":
        return wire.CompressionAlgorithm.GZIP
    return wire.CompressionAlgorithm.NONE


# --- the client role: requests and answers --------------------------------------------------------


def topic_options(
    config: TopicConfig, partitions: int, *, create: bool = True
) -> tuple[IggyHeader, ...]:
    """A canonical config as the options of CreateTopic/UpdateTopic (§5.4). Both are patches
    (None = the default, or unchanged), so only what is set is sent, and only keys an Iggy
    server knows (it refuses others with 4041). A server refuses a max topic size below the
    segment size (1019, against its 1 GiB default when none is given): a topic created with a
    size cap and no segment size gets segments of a quarter of the cap (at least 1 MiB, at
    most 1 GiB, a multiple of 512 bytes), so retention deletes a part of it at a time."""
    options = {k: v for k, v in config.extra.items() if k in OPTION_KINDS}
    expiry, size = message_expiry(config), max_topic_size(config, partitions)
    if expiry:
        options["message_expiry"] = str(expiry)
    if size:
        options["max_topic_size"] = str(size)
    if config.compression is not None:
        options["compression_algorithm"] = config.compression
    if config.segment_bytes:
        options["segment_size"] = str(config.segment_bytes)
    elif create and size not in (0, U64_MAX) and "segment_size" not in options:
        options["segment_size"] = str(min(max(size // 4 // 512 * 512, 1 << 20), 1 << 30))
    return options_tlv(options)


def partition_info(partition: wire.Partition) -> PartitionInfo:
    end = next_offset(partition.current_offset, partition.messages_count)
    return PartitionInfo(
        partition=partition.id,
        log_start_offset=max(0, end - partition.messages_count),
        next_offset=end,
        size_bytes=partition.size_bytes,
    )


def topic_info(stream: str, details: wire.TopicDetails) -> TopicInfo:
    """A GetTopic/CreateTopic answer as canonical. The fixed fields are the settings; the
    explicit options are kept verbatim in ``extra``."""
    topic = details.topic
    explicit = options_of(topic.options)
    fixed = {
        "message_expiry": str(topic.message_expiry),
        "max_topic_size": str(topic.max_topic_size),
        "compression_algorithm": (
            "gzip" if topic.compression_algorithm == wire.CompressionAlgorithm.GZIP else "none"
        ),
    }
    config = topic_config({**explicit, **fixed}, partitions=topic.partitions_count)
    return TopicInfo(
        topic=Topic(stream, topic.name),
        id=topic.id,
        partitions=tuple(partition_info(p) for p in sorted(details.partitions, key=_id)),
        config=replace(config, extra=explicit),
        created_at_us=topic.created_at,
    )


def _id(partition: wire.Partition) -> int:
    return partition.id


def stream_info(stream: wire.Stream, topics: Sequence[TopicInfo] = ()) -> StreamInfo:
    return StreamInfo(
        name=stream.name, id=stream.id, created_at_us=stream.created_at, topics=tuple(topics)
    )


__all__ = [
    "OPTION_KINDS",
    "UPDATABLE",
    "check_no_options",
    "check_topic_size",
    "check_updatable",
    "compression",
    "max_topic_size",
    "message_expiry",
    "options_of",
    "options_tlv",
    "partition_info",
    "stream_info",
    "topic_config",
    "topic_info",
    "topic_options",
]
