"""Iggy frames <-> the canonical model (DESIGN.md §3, iggy.md §4-§6).

Pure functions. Streams are canonical streams and topics canonical topics, both with the
backend's numeric ids (0-based, what a VSR client expects; era A clients choose their own ids,
and their partitions are 1-based, so the listener shifts them). How messages, headers, keys and
consumer offsets map is shared with the Iggy backend, in ``messages``; it is re-exported here
for the listener.
"""

from __future__ import annotations

from typing import Final

from gateway.model import (
    BackendUnavailable,
    CorruptMessage,
    Forbidden,
    GatewayError,
    GroupError,
    GroupExists,
    InvalidCredentials,
    InvalidPartitions,
    InvalidRequest,
    InvalidToken,
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
)
from gateway.translate.iggy.messages import (
    KEY_HEADER,
    U64_MAX,
    WIRE_FORMAT,
    Lossy,
    consumer_group_name,
    current_offset,
    decode_wire,
    header_text,
    stored_offset,
    to_canonical,
    to_iggy,
)
from protocols import iggy as wire
from protocols.iggy.batch import restamp_batch
from protocols.iggy.status import Status

PROTOCOL = "iggy"
NO_PARTITION: Final = 0xFFFFFFFF  # §5.8: an empty group poll with this id makes the client re-sync


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


__all__ = [
    "KEY_HEADER",
    "NO_PARTITION",
    "PROTOCOL",
    "U64_MAX",
    "WIRE_FORMAT",
    "IggyStatus",
    "Lossy",
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
