"""Iggy status codes (IggyError numbers, iggy.md §8) and VSR eviction reasons (§3.4)."""

from __future__ import annotations

from enum import IntEnum

__all__ = ["EvictionReason", "Status", "eviction_status"]


class Status(IntEnum):
    """The u32 at reply offset 216 (VSR), the legacy reply's ``status`` word, and the code of a
    VSR result-section rejection (§3.7): the same numbers everywhere."""

    OK = 0
    ERROR = 1
    INVALID_CONFIGURATION = 2
    INVALID_COMMAND = 3
    INVALID_FORMAT = 4
    FEATURE_UNAVAILABLE = 5  # §8: a good catch-all for unknown command codes
    INVALID_IDENTIFIER = 6
    RESOURCE_NOT_FOUND = 20  # users, tokens (iggy_common IggyError::ResourceNotFound)
    STALE_CLIENT = 30
    UNAUTHENTICATED = 40  # the client reconnects and logs in again (§1.1)
    UNAUTHORIZED = 41
    INVALID_CREDENTIALS = 42
    INVALID_USERNAME = 43
    INVALID_PASSWORD = 44
    USER_ALREADY_EXISTS = 46
    USER_INACTIVE = 47
    INVALID_PERSONAL_ACCESS_TOKEN = 53
    TRANSIENT_NOT_COMMITTED = 57  # the client replays the same request
    TRANSIENT_NOT_ACCEPTED = 58  # the client retries
    CLIENT_NOT_FOUND = 100
    STREAM_ID_NOT_FOUND = 1009
    STREAM_NAME_NOT_FOUND = 1010
    STREAM_NAME_ALREADY_EXISTS = 1012
    INVALID_STREAM_NAME = 1013
    INVALID_STREAM_ID = 1014
    INVALID_TOPIC_SIZE = 1019  # a max topic size below the segment size
    TOO_MANY_STREAMS = 1020
    TOPIC_ID_NOT_FOUND = 2010
    TOPIC_NAME_NOT_FOUND = 2011
    TOPIC_NAME_ALREADY_EXISTS = 2013
    INVALID_TOPIC_NAME = 2014
    TOO_MANY_PARTITIONS = 2015
    INVALID_REPLICATION_FACTOR = 2018  # legacy only
    INVALID_PARTITIONS_COUNT = 2019
    PARTITION_NOT_FOUND = 3007
    NO_PARTITIONS = 3008
    CONSUMER_OFFSET_NOT_FOUND = 3021
    INVALID_MESSAGES_COUNT = 4009
    TOO_BIG_MESSAGE_PAYLOAD = 4022
    EMPTY_MESSAGE_PAYLOAD = 4024
    INVALID_MESSAGE_PAYLOAD_LENGTH = 4025
    INVALID_MESSAGE_CHECKSUM = 4027
    INVALID_MESSAGE_TIMESTAMP_DELTA = 4038
    INVALID_BATCH_CHECKSUM = 4039
    UNSUPPORTED_OPTION_KEY = 4041
    INVALID_OPTION_VALUE = 4042
    INVALID_OFFSET = 4100
    CONSUMER_GROUP_ID_NOT_FOUND = 5000
    CONSUMER_GROUP_NAME_NOT_FOUND = 5003
    CONSUMER_GROUP_NAME_ALREADY_EXISTS = 5004
    CONSUMER_GROUP_MEMBER_NOT_FOUND = 5006
    CONSUMER_GROUP_PARTITION_NOT_OWNED = 5009  # the client re-syncs its assignment
    ALREADY_AUTHENTICATED = 14000
    INVALID_SESSION = 14001
    INCOMPATIBLE_PROTOCOL_VERSION = 14003


class EvictionReason(IntEnum):
    """The u8 at offset 255 of a VSR Eviction frame (§3.4)."""

    NO_SESSION = 1
    INVALID_CREDENTIALS = 9
    INVALID_TOKEN = 10
    USER_INACTIVE = 11
    SESSION_ERROR = 12
    STALE_CLIENT = 13
    INCOMPATIBLE_PROTOCOL = 14
    MALFORMED_LOGIN = 15


_EVICTION_STATUS = {
    EvictionReason.NO_SESSION: Status.UNAUTHENTICATED,
    EvictionReason.INVALID_CREDENTIALS: Status.INVALID_CREDENTIALS,
    EvictionReason.INVALID_TOKEN: Status.INVALID_PERSONAL_ACCESS_TOKEN,
    EvictionReason.USER_INACTIVE: Status.UNAUTHENTICATED,
    EvictionReason.SESSION_ERROR: Status.UNAUTHENTICATED,
    EvictionReason.STALE_CLIENT: Status.STALE_CLIENT,
    EvictionReason.INCOMPATIBLE_PROTOCOL: Status.INCOMPATIBLE_PROTOCOL_VERSION,
    EvictionReason.MALFORMED_LOGIN: Status.INVALID_FORMAT,
}


def eviction_status(reason: int) -> int:
    """The error the SDK raises for an eviction reason (§3.4); generic ``ERROR`` otherwise."""
    try:
        return _EVICTION_STATUS[EvictionReason(reason)]
    except ValueError:
        return Status.ERROR
