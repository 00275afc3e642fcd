"""The numbers of RabbitMQ Stream (rabbitmq-stream.md §3, §4): command keys, response codes,
offset-spec types."""

from __future__ import annotations

import enum
from typing import Final

__all__ = ["RESPONSE_BIT", "Key", "OffsetType", "ResponseCode"]

# §2: bit 15 of the key marks a response; bits 0..14 are the command id.
RESPONSE_BIT: Final = 0x8000


class Key(enum.IntEnum):
    DECLARE_PUBLISHER = 0x01
    PUBLISH = 0x02
    PUBLISH_CONFIRM = 0x03
    PUBLISH_ERROR = 0x04
    QUERY_PUBLISHER_SEQUENCE = 0x05
    DELETE_PUBLISHER = 0x06
    SUBSCRIBE = 0x07
    DELIVER = 0x08
    CREDIT = 0x09
    STORE_OFFSET = 0x0A
    QUERY_OFFSET = 0x0B
    UNSUBSCRIBE = 0x0C
    CREATE = 0x0D
    DELETE = 0x0E
    METADATA = 0x0F
    METADATA_UPDATE = 0x10
    PEER_PROPERTIES = 0x11
    SASL_HANDSHAKE = 0x12
    SASL_AUTHENTICATE = 0x13
    TUNE = 0x14
    OPEN = 0x15
    CLOSE = 0x16
    HEARTBEAT = 0x17
    ROUTE = 0x18
    PARTITIONS = 0x19
    CONSUMER_UPDATE = 0x1A
    EXCHANGE_COMMAND_VERSIONS = 0x1B
    STREAM_STATS = 0x1C
    CREATE_SUPER_STREAM = 0x1D
    DELETE_SUPER_STREAM = 0x1E
    RESOLVE_OFFSET_SPEC = 0x1F


class ResponseCode(enum.IntEnum):
    OK = 0x01
    STREAM_DOES_NOT_EXIST = 0x02
    SUBSCRIPTION_ID_ALREADY_EXISTS = 0x03
    SUBSCRIPTION_ID_DOES_NOT_EXIST = 0x04
    STREAM_ALREADY_EXISTS = 0x05
    STREAM_NOT_AVAILABLE = 0x06
    SASL_MECHANISM_NOT_SUPPORTED = 0x07
    AUTHENTICATION_FAILURE = 0x08
    SASL_ERROR = 0x09
    SASL_CHALLENGE = 0x0A
    SASL_AUTHENTICATION_FAILURE_LOOPBACK = 0x0B
    VIRTUAL_HOST_ACCESS_FAILURE = 0x0C
    UNKNOWN_FRAME = 0x0D
    FRAME_TOO_LARGE = 0x0E
    INTERNAL_ERROR = 0x0F
    ACCESS_REFUSED = 0x10
    PRECONDITION_FAILED = 0x11
    PUBLISHER_DOES_NOT_EXIST = 0x12
    NO_OFFSET = 0x13
    SASL_CANNOT_CHANGE_MECHANISM = 0x14
    SASL_CANNOT_CHANGE_USERNAME = 0x15


class OffsetType(enum.IntEnum):
    """§4: how a Subscribe (or ConsumerUpdate response, ResolveOffsetSpec) names its start."""

    NONE = 0  # ConsumerUpdate response only: keep the Subscribe's spec
    FIRST = 1
    LAST = 2
    NEXT = 3
    OFFSET = 4  # + uint64
    TIMESTAMP = 5  # + int64 ms since the epoch
