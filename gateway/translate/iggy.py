"""Iggy frames <-> the canonical model (DESIGN.md §3, iggy.md §4-§6).

Pure functions. Streams are canonical streams and topics canonical topics, both with the
backend's numeric ids (0-based, what a VSR client expects; era A clients choose their own ids,
and their partitions are 1-based, so the listener shifts them). A message's payload is the
value, its user headers the canonical headers (Iggy's typed kinds are the canonical kinds 1..15),
its u128 id the canonical id and its origin timestamp the canonical timestamp. Iggy stores the
LAST consumed offset where the canonical store keeps the NEXT one to read: ``stored = next - 1``.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

from gateway.coordination import permissions as perm
from gateway.coordination.user_records import TokenInfo, User, UserStatus
from gateway.model import (
    BackendUnavailable,
    CorruptMessage,
    Forbidden,
    GatewayError,
    GroupError,
    GroupExists,
    Header,
    HeaderKind,
    InvalidCredentials,
    InvalidPartitions,
    InvalidRequest,
    InvalidToken,
    Message,
    MessageTooLarge,
    NotFound,
    OffsetOutOfRange,
    PartitionInfo,
    StreamExists,
    StreamInfo,
    Timeout,
    TopicConfig,
    TopicExists,
    TopicInfo,
    Unauthorized,
    UnknownGroup,
    UnknownMember,
    UnknownPartition,
    UnknownStream,
    UnknownTopic,
    UnknownUser,
    Unsupported,
    UserExists,
    UserInactive,
    WireBatch,
    register_wire_format,
)
from protocols import iggy as wire
from protocols._wire import LocalProtocolError
from protocols.iggy.batch import decode_batch, restamp_batch
from protocols.iggy.frames_users import (
    GlobalPermissions,
    Permissions,
    PersonalAccessTokenInfo,
    StreamPermissions,
    TopicPermissions,
    UserInfo,
    UserInfoDetails,
)
from protocols.iggy.frames_users import UserStatus as WireStatus
from protocols.iggy.headers import Header as IggyHeader
from protocols.iggy.headers import HeaderKind as IggyKind
from protocols.iggy.headers import HeaderValue
from protocols.iggy.status import Status
from protocols.iggy.wire import Reader

PROTOCOL = "iggy"
WIRE_FORMAT = "iggy"  # a producer's era C batch as sent (256-byte header + frames)
U64_MAX: Final = (1 << 64) - 1
NO_PARTITION: Final = 0xFFFFFFFF  # §5.8: an empty group poll with this id makes the client re-sync
KEY_HEADER: Final = "streamgate.key"  # where a Kafka key goes, Iggy messages have no key field
_MAX_HEADER_BYTES: Final = 255  # Iggy header keys and values are 1..255 bytes (§2)

Lossy = Callable[[str], None]  # called with the name of a field that could not be carried


def _ignore(field: str) -> None:
    pass


# --- errors -------------------------------------------------------------------------------------


class IggyStatus(GatewayError):
    """A failure with no canonical meaning, answered with this Iggy status code."""

    error_type = "invalid_request"

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def status_of(exc: GatewayError, *, by_name: bool = False) -> int:
    """The IggyError code (§8) for a canonical failure. ``by_name``: the request named the
    stream/topic/group by a string identifier (the *NameNotFound codes)."""
    if isinstance(exc, IggyStatus):
        return exc.status
    if isinstance(exc, UnknownStream):
        return Status.STREAM_NAME_NOT_FOUND if by_name else Status.STREAM_ID_NOT_FOUND
    if isinstance(exc, UnknownTopic):
        return Status.TOPIC_NAME_NOT_FOUND if by_name else Status.TOPIC_ID_NOT_FOUND
    if isinstance(exc, UnknownPartition):
        return Status.PARTITION_NOT_FOUND
    if isinstance(exc, UnknownGroup):
        return (
            Status.CONSUMER_GROUP_NAME_NOT_FOUND if by_name else Status.CONSUMER_GROUP_ID_NOT_FOUND
        )
    if isinstance(exc, UnknownMember):
        return Status.CONSUMER_GROUP_MEMBER_NOT_FOUND
    if isinstance(exc, UnknownUser):
        return RESOURCE_NOT_FOUND
    if isinstance(exc, StreamExists):
        return Status.STREAM_NAME_ALREADY_EXISTS
    if isinstance(exc, TopicExists):
        return Status.TOPIC_NAME_ALREADY_EXISTS
    if isinstance(exc, GroupExists):
        return Status.CONSUMER_GROUP_NAME_ALREADY_EXISTS
    if isinstance(exc, UserExists):
        return Status.USER_ALREADY_EXISTS
    if isinstance(exc, InvalidCredentials):
        return Status.INVALID_CREDENTIALS
    if isinstance(exc, InvalidToken):
        return Status.INVALID_PERSONAL_ACCESS_TOKEN
    if isinstance(exc, UserInactive):
        return Status.USER_INACTIVE
    if isinstance(exc, Forbidden):
        return Status.UNAUTHORIZED
    if isinstance(exc, Unauthorized):
        return Status.UNAUTHENTICATED
    if isinstance(exc, InvalidPartitions):
        return Status.INVALID_PARTITIONS_COUNT
    if isinstance(exc, MessageTooLarge):
        return Status.TOO_BIG_MESSAGE_PAYLOAD
    if isinstance(exc, CorruptMessage):
        return Status.INVALID_MESSAGE_CHECKSUM
    if isinstance(exc, OffsetOutOfRange):
        return Status.INVALID_OFFSET
    if isinstance(exc, Unsupported):
        return Status.FEATURE_UNAVAILABLE
    if isinstance(exc, InvalidRequest):
        return Status.INVALID_COMMAND
    if isinstance(exc, NotFound):
        return RESOURCE_NOT_FOUND
    if isinstance(exc, GroupError):
        return Status.ERROR
    if isinstance(exc, BackendUnavailable | Timeout):
        return Status.TRANSIENT_NOT_ACCEPTED
    return Status.ERROR


RESOURCE_NOT_FOUND: Final = 20  # iggy_common IggyError::ResourceNotFound (users, tokens)


# --- messages -------------------------------------------------------------------------------------

# Canonical kinds outside Iggy's 1..15 (AMQP types) and the Iggy kind that carries them.
_AMQP_KINDS: Final = {
    HeaderKind.TIMESTAMP: IggyKind.INT64,
    HeaderKind.UUID: IggyKind.UINT128,
    HeaderKind.SYMBOL: IggyKind.STRING,
}


def _text(value: HeaderValue) -> str:
    if value.kind is IggyKind.STRING:
        return value.value.decode("utf-8", "replace")
    return value.value.decode("latin-1")


def _headers(headers: tuple[IggyHeader, ...]) -> tuple[Header, ...]:
    return tuple(Header(_text(h.key), h.value.value, HeaderKind(h.value.kind)) for h in headers)


def to_canonical(
    messages: Sequence[wire.Message], *, key: bytes | None = None, assign_ids: bool = False
) -> list[Message]:
    """Sent messages -> canonical. ``key``: a MessagesKey partitioning value (server-resolved
    in the classic framing). ``assign_ids``: an id of 0 gets a random one, as the classic
    server did. The origin timestamp (0 = none) is the canonical timestamp."""
    out = []
    for m in messages:
        headers = _headers(m.headers)
        message_id = m.id or (uuid.uuid4().int if assign_ids else 0)
        out.append(Message(m.payload, key, headers, m.origin_timestamp, -1, message_id))
    return out


def wire_batch(cmd: wire.SendMessages) -> WireBatch | None:
    """The sent batch to store as is (nothing decoded again on an Iggy poll), when the codec
    kept it (era C, deltas 0..n-1) and every message carries its origin timestamp."""
    messages = cmd.messages
    if not cmd.batch or not messages or min(m.origin_timestamp for m in messages) <= 0:
        return None
    return WireBatch(
        format=WIRE_FORMAT,
        data=cmd.batch,
        count=len(messages),
        first_timestamp_us=min(m.origin_timestamp for m in messages),
        max_timestamp_us=max(m.origin_timestamp for m in messages),
    )


def decode_wire(stored: WireBatch) -> list[Message]:
    """A stored Iggy batch as canonical messages (for readers of other protocols)."""
    sent = decode_batch(Reader(stored.data), verify=False)
    base = stored.base_offset
    return [
        Message(m.payload, None, _headers(m.headers), m.origin_timestamp, base + m.offset, m.id)
        for m in sent
    ]


register_wire_format(WIRE_FORMAT, decode_wire)


def serve_batch(
    stored: WireBatch, *, partition_id: int, skip: int, limit: int
) -> tuple[bytes, int, int]:
    """A stored Iggy batch stamped for a poll: (bytes, messages, offset of the last one)."""
    data, count = restamp_batch(
        stored.data,
        partition_id=partition_id,
        base_offset=stored.base_offset,
        base_timestamp=stored.first_timestamp_us,
        skip=skip,
        limit=limit,
    )
    return data, count, stored.base_offset + skip + count - 1


def _iggy_header(h: Header, lossy: Lossy) -> IggyHeader | None:
    name = h.name.encode()
    if not 1 <= len(name) <= _MAX_HEADER_BYTES or not 1 <= len(h.value) <= _MAX_HEADER_BYTES:
        lossy("headers")
        return None
    kind = _AMQP_KINDS.get(h.kind, h.kind)
    try:
        value_kind = IggyKind(kind)
    except ValueError:
        lossy("headers")
        return None
    return IggyHeader(
        key=HeaderValue(kind=IggyKind.STRING, value=name),
        value=HeaderValue(kind=value_kind, value=h.value),
    )


def to_iggy(
    messages: Iterable[Message], lossy: Lossy = _ignore, *, append_timestamp: int | None = None
) -> list[wire.Message]:
    """Canonical -> polled messages. The canonical timestamp is the origin timestamp; the append
    timestamp, shared by one stored batch in Iggy, is ``append_timestamp`` (default: the
    message's own). A key (Kafka) travels as the ``streamgate.key`` header when it fits."""
    out = []
    for m in messages:
        headers = tuple(h for h in (_iggy_header(x, lossy) for x in m.headers) if h is not None)
        if m.key is not None:
            if 1 <= len(m.key) <= _MAX_HEADER_BYTES:
                headers += (
                    IggyHeader(key=HeaderValue.string(KEY_HEADER), value=HeaderValue.raw(m.key)),
                )
            else:
                lossy("key")
        out.append(
            wire.Message(
                id=m.id,
                payload=m.value,
                headers=headers,
                offset=m.offset,
                timestamp=m.timestamp_us if append_timestamp is None else append_timestamp,
                origin_timestamp=m.timestamp_us,
            )
        )
    return out


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
        key = _text(option.key)
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


def current_offset(next_offset: int) -> int:
    """§6.3: the partition's highest offset, 0 when empty."""
    return max(0, next_offset - 1)


# --- consumer offsets -----------------------------------------------------------------------------


def consumer_group_name(consumer_id: int | str) -> str:
    """The canonical group of an Iggy single consumer. Consumer groups use their own name, so
    a Kafka group and an Iggy consumer group of the same name share committed offsets."""
    return f"iggy-consumer-{consumer_id}"


def stored_offset(next_offset: int | None) -> int | None:
    """Canonical NEXT offset -> Iggy's last consumed one (None: nothing stored)."""
    return None if next_offset is None or next_offset <= 0 else next_offset - 1


# --- users ----------------------------------------------------------------------------------------


def user_info(user: User) -> UserInfo:
    status = wire_user_status(user.status)
    return UserInfo(
        id=user.id, created_at=user.created_at_us, status=status, username=user.username
    )


def wire_user_status(status: UserStatus) -> int:
    return WireStatus.ACTIVE if status is UserStatus.ACTIVE else WireStatus.INACTIVE


def user_status(status: int) -> UserStatus:
    return UserStatus.INACTIVE if status == WireStatus.INACTIVE else UserStatus.ACTIVE


def user_details(user: User) -> UserInfoDetails:
    """A user with no permission at all is "no permissions" (None) on the wire, as created."""
    granted = user.permissions != perm.Permissions()
    return UserInfoDetails(
        user=user_info(user), permissions=wire_permissions(user.permissions) if granted else None
    )


def _flags(obj: Any) -> dict[str, bool]:
    """The boolean flags of a permissions record (every field but ids and nested lists)."""
    return {
        f.name: getattr(obj, f.name)
        for f in dataclasses.fields(obj)
        if f.name not in ("stream_id", "topic_id", "topics", "streams")
    }


def wire_permissions(p: perm.Permissions) -> Permissions:
    """The gateway's permissions (keyed by id) -> Iggy's (lists carrying their ids)."""
    return Permissions(
        global_permissions=GlobalPermissions(**_flags(p.global_permissions)),
        streams=tuple(
            StreamPermissions(
                stream_id=sid,
                topics=tuple(
                    TopicPermissions(topic_id=tid, **_flags(tp))
                    for tid, tp in sorted(sp.topics.items())
                ),
                **_flags(sp),
            )
            for sid, sp in sorted(p.streams.items())
        ),
    )


def gateway_permissions(p: Permissions | None) -> perm.Permissions:
    if p is None:
        return perm.Permissions()
    return perm.Permissions(
        global_permissions=perm.GlobalPermissions(**_flags(p.global_permissions)),
        streams={
            sp.stream_id: perm.StreamPermissions(
                topics={tp.topic_id: perm.TopicPermissions(**_flags(tp)) for tp in sp.topics},
                **_flags(sp),
            )
            for sp in p.streams
        },
    )


def token_info(info: TokenInfo) -> PersonalAccessTokenInfo:
    return PersonalAccessTokenInfo(name=info.name, expiry_at=info.expiry_at_us or 0)


def token_expiry(expiry: int) -> int | None:
    """CreatePersonalAccessToken's expiry (µs): 0 = server default and u64::MAX = never, both
    "never" here."""
    return None if expiry in (0, U64_MAX) else expiry


__all__ = [
    "KEY_HEADER",
    "NO_PARTITION",
    "PROTOCOL",
    "U64_MAX",
    "WIRE_FORMAT",
    "IggyStatus",
    "consumer_group_name",
    "current_offset",
    "decode_wire",
    "gateway_permissions",
    "legacy_topic_options",
    "options_of",
    "partition_frame",
    "serve_batch",
    "status_of",
    "stored_offset",
    "stream_details",
    "stream_frame",
    "to_canonical",
    "to_iggy",
    "token_expiry",
    "token_info",
    "topic_config",
    "topic_details",
    "topic_frame",
    "user_details",
    "user_info",
    "user_status",
    "wire_batch",
    "wire_permissions",
]
