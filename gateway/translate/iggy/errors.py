"""Iggy status codes (iggy.md §8) <-> canonical ``GatewayError``s, both directions from one table:
``status_of`` for the listener (server role: the code a client is answered with), ``error_of``
for the Iggy backend (client role: what a real server's code means)."""

from __future__ import annotations

from collections.abc import Mapping
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
    StorageError,
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
)
from protocols.iggy.status import EvictionReason, Status


class IggyStatus(GatewayError):
    """A failure with no canonical meaning, answered with this Iggy status code."""

    error_type = "invalid_request"

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


# The one table. A failure is answered with the status of the nearest class in its MRO, so a
# class without a row (GroupNotEmpty, ProducerFenced...) takes its parent's.
_STATUSES: Final[Mapping[type[GatewayError], Status]] = {
    UnknownStream: Status.STREAM_ID_NOT_FOUND,
    UnknownTopic: Status.TOPIC_ID_NOT_FOUND,
    UnknownPartition: Status.PARTITION_NOT_FOUND,
    UnknownGroup: Status.CONSUMER_GROUP_ID_NOT_FOUND,
    UnknownMember: Status.CONSUMER_GROUP_MEMBER_NOT_FOUND,
    UnknownUser: Status.RESOURCE_NOT_FOUND,
    NotFound: Status.RESOURCE_NOT_FOUND,
    StreamExists: Status.STREAM_NAME_ALREADY_EXISTS,
    TopicExists: Status.TOPIC_NAME_ALREADY_EXISTS,
    GroupExists: Status.CONSUMER_GROUP_NAME_ALREADY_EXISTS,
    UserExists: Status.USER_ALREADY_EXISTS,
    InvalidCredentials: Status.INVALID_CREDENTIALS,
    InvalidToken: Status.INVALID_PERSONAL_ACCESS_TOKEN,
    UserInactive: Status.USER_INACTIVE,
    Forbidden: Status.UNAUTHORIZED,
    Unauthorized: Status.UNAUTHENTICATED,  # the client logs in again (§1.1)
    InvalidPartitions: Status.INVALID_PARTITIONS_COUNT,
    MessageTooLarge: Status.TOO_BIG_MESSAGE_PAYLOAD,
    CorruptMessage: Status.INVALID_MESSAGE_CHECKSUM,
    OffsetOutOfRange: Status.INVALID_OFFSET,
    Unsupported: Status.FEATURE_UNAVAILABLE,
    InvalidRequest: Status.INVALID_COMMAND,
    BackendUnavailable: Status.TRANSIENT_NOT_ACCEPTED,  # the SDK retries (§8)
    Timeout: Status.TRANSIENT_NOT_ACCEPTED,
    # §8 has no storage status; the generic error, not a transient one the SDK would retry
    # in silence while the disk stays full.
    StorageError: Status.ERROR,
    GatewayError: Status.ERROR,  # group errors but UnknownMember, sequence errors...
}

# A request that named its stream/topic/group by a string is answered *NameNotFound (§8).
_BY_NAME: Final[Mapping[int, Status]] = {
    Status.STREAM_ID_NOT_FOUND: Status.STREAM_NAME_NOT_FOUND,
    Status.TOPIC_ID_NOT_FOUND: Status.TOPIC_NAME_NOT_FOUND,
    Status.CONSUMER_GROUP_ID_NOT_FOUND: Status.CONSUMER_GROUP_NAME_NOT_FOUND,
}

# The other direction is the inverse of the table where it is 1:1. Where several failures share
# a status, this says which one a server's status means:
_SHARED: Final[Mapping[int, type[GatewayError]]] = {
    # UnknownUser and any other NotFound: a server says it of users and tokens alike.
    Status.RESOURCE_NOT_FOUND: NotFound,
    Status.TRANSIENT_NOT_ACCEPTED: BackendUnavailable,  # or a Timeout: both retriable
    Status.ERROR: GatewayError,  # whatever has no status of its own
}

# Statuses only a server sends (our listener answers those failures with the table's status).
_SERVER_ONLY: Final[Mapping[int, type[GatewayError]]] = {
    Status.CONSUMER_GROUP_PARTITION_NOT_OWNED: GroupError,
    Status.CONSUMER_OFFSET_NOT_FOUND: NotFound,
    Status.INVALID_USERNAME: InvalidCredentials,
    Status.INVALID_PASSWORD: InvalidCredentials,
    Status.TOO_MANY_PARTITIONS: InvalidPartitions,
    Status.NO_PARTITIONS: InvalidPartitions,
    Status.INVALID_BATCH_CHECKSUM: CorruptMessage,
    Status.INCOMPATIBLE_PROTOCOL_VERSION: Unsupported,
    # The server could not take it now: the caller may retry (the SDK does, §8).
    Status.TRANSIENT_NOT_COMMITTED: BackendUnavailable,
    Status.STALE_CLIENT: BackendUnavailable,
    Status.INVALID_SESSION: BackendUnavailable,
    Status.CLIENT_NOT_FOUND: BackendUnavailable,
}

_ERRORS: Final[Mapping[int, type[GatewayError]]] = {
    **{status: cls for cls, status in _STATUSES.items()},
    **{_BY_NAME[status]: cls for cls, status in _STATUSES.items() if status in _BY_NAME},
    **_SHARED,
    **_SERVER_ONLY,
}


def status_of(exc: GatewayError, *, by_name: bool = False) -> int:
    """The IggyError code (§8) for a canonical failure. ``by_name``: the request named the
    stream/topic/group by a string identifier (the *NameNotFound codes)."""
    if isinstance(exc, IggyStatus):
        return exc.status
    status = next(_STATUSES[c] for c in type(exc).__mro__ if c in _STATUSES)
    return _BY_NAME.get(status, status) if by_name else status


def error_of(status: int, what: str = "") -> GatewayError:
    """The canonical failure for an Iggy status. Codes without a canonical meaning (invalid
    names, formats, option values, ...) are invalid requests."""
    cls = _ERRORS.get(status, InvalidRequest)
    try:
        name = Status(status).name.lower()
    except ValueError:
        name = "unknown"
    message = f"iggy status {status} ({name})" + (f": {what}" if what else "")
    return cls(message)


# A refused login on the current framing is answered with an eviction (iggy.md §3.4): its reason
# for the status the listener would have answered.
_EVICTIONS: Final[Mapping[int, EvictionReason]] = {
    Status.INVALID_CREDENTIALS: EvictionReason.INVALID_CREDENTIALS,
    Status.INVALID_PERSONAL_ACCESS_TOKEN: EvictionReason.INVALID_TOKEN,
    Status.USER_INACTIVE: EvictionReason.USER_INACTIVE,
}


def eviction_of(status: int) -> EvictionReason:
    return _EVICTIONS.get(status, EvictionReason.INVALID_CREDENTIALS)


__all__ = ["IggyStatus", "error_of", "eviction_of", "status_of"]
