"""Iggy status codes (iggy.md §8) -> canonical ``GatewayError``s: the inverse of
``gateway.translate.iggy.requests.status_of``, for the Iggy backend's answers."""

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
    TopicExists,
    Unauthorized,
    UnknownGroup,
    UnknownMember,
    UnknownPartition,
    UnknownStream,
    UnknownTopic,
    Unsupported,
    UserExists,
    UserInactive,
)
from protocols.iggy.status import Status

RESOURCE_NOT_FOUND: Final = 20  # iggy_common IggyError::ResourceNotFound (users, tokens)

_ERRORS: Final[dict[int, type[GatewayError]]] = {
    Status.STREAM_ID_NOT_FOUND: UnknownStream,
    Status.STREAM_NAME_NOT_FOUND: UnknownStream,
    Status.TOPIC_ID_NOT_FOUND: UnknownTopic,
    Status.TOPIC_NAME_NOT_FOUND: UnknownTopic,
    Status.PARTITION_NOT_FOUND: UnknownPartition,
    Status.CONSUMER_GROUP_ID_NOT_FOUND: UnknownGroup,
    Status.CONSUMER_GROUP_NAME_NOT_FOUND: UnknownGroup,
    Status.CONSUMER_GROUP_MEMBER_NOT_FOUND: UnknownMember,
    Status.CONSUMER_GROUP_PARTITION_NOT_OWNED: GroupError,
    Status.CONSUMER_OFFSET_NOT_FOUND: NotFound,
    RESOURCE_NOT_FOUND: NotFound,
    Status.STREAM_NAME_ALREADY_EXISTS: StreamExists,
    Status.TOPIC_NAME_ALREADY_EXISTS: TopicExists,
    Status.CONSUMER_GROUP_NAME_ALREADY_EXISTS: GroupExists,
    Status.USER_ALREADY_EXISTS: UserExists,
    Status.INVALID_CREDENTIALS: InvalidCredentials,
    Status.INVALID_USERNAME: InvalidCredentials,
    Status.INVALID_PASSWORD: InvalidCredentials,
    Status.INVALID_PERSONAL_ACCESS_TOKEN: InvalidToken,
    Status.USER_INACTIVE: UserInactive,
    Status.UNAUTHORIZED: Forbidden,
    Status.UNAUTHENTICATED: Unauthorized,
    Status.INVALID_PARTITIONS_COUNT: InvalidPartitions,
    Status.TOO_MANY_PARTITIONS: InvalidPartitions,
    Status.NO_PARTITIONS: InvalidPartitions,
    Status.TOO_BIG_MESSAGE_PAYLOAD: MessageTooLarge,
    Status.INVALID_MESSAGE_CHECKSUM: CorruptMessage,
    Status.INVALID_BATCH_CHECKSUM: CorruptMessage,
    Status.INVALID_OFFSET: OffsetOutOfRange,
    Status.FEATURE_UNAVAILABLE: Unsupported,
    Status.INCOMPATIBLE_PROTOCOL_VERSION: Unsupported,
    # The server could not take it now: the caller may retry (the SDK does, §8).
    Status.TRANSIENT_NOT_COMMITTED: BackendUnavailable,
    Status.TRANSIENT_NOT_ACCEPTED: BackendUnavailable,
    Status.STALE_CLIENT: BackendUnavailable,
    Status.INVALID_SESSION: BackendUnavailable,
    Status.CLIENT_NOT_FOUND: BackendUnavailable,
    Status.ERROR: GatewayError,
}


def error_of(status: int, what: str = "") -> GatewayError:
    """The canonical failure for an Iggy status. Codes without a canonical meaning (invalid
    names, formats, option values, ...) are invalid requests."""
    cls = _ERRORS.get(status, InvalidRequest)
    try:
        name = Status(status).name.lower()
    except ValueError:
        name = "resource_not_found" if status == RESOURCE_NOT_FOUND else "unknown"
    message = f"iggy status {status} ({name})" + (f": {what}" if what else "")
    return cls(message)


__all__ = ["error_of"]
