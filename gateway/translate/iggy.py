"""Iggy frames <-> the canonical model (DESIGN.md §3, iggy.md §4-§6).

Pure functions. Streams are canonical streams and topics canonical topics, both with the
backend's numeric ids (0-based, what a VSR client expects; era A clients choose their own ids,
and their partitions are 1-based, so the listener shifts them). A message's payload is the
value, its user headers the canonical headers (Iggy's typed kinds are the canonical kinds 1..15),
its u128 id the canonical id and its origin timestamp the canonical timestamp. Iggy stores the
LAST consumed offset where the canonical store keeps the NEXT one to read: ``stored = next - 1``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Final

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
    StreamExists,
    Timeout,
    TopicExists,
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
from protocols.iggy.batch import decode_batch, restamp_batch
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


def header_text(value: HeaderValue) -> str:
    if value.kind is IggyKind.STRING:
        return value.value.decode("utf-8", "replace")
    return value.value.decode("latin-1")


def _headers(headers: tuple[IggyHeader, ...]) -> tuple[Header, ...]:
    return tuple(
        Header(header_text(h.key), h.value.value, HeaderKind(h.value.kind)) for h in headers
    )


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
    "header_text",
    "serve_batch",
    "status_of",
    "stored_offset",
    "to_canonical",
    "to_iggy",
    "wire_batch",
]
