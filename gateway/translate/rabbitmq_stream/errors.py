"""RabbitMQ Stream response codes (rabbitmq-stream.md §4) <-> canonical ``GatewayError``s, both
directions from one table: ``response_code`` for the listener (server role: the code a client is
answered with), ``error_of`` for the RabbitMQ backend (client role: what a broker's code means)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from gateway.model import (
    AlreadyExists,
    BackendUnavailable,
    Forbidden,
    GatewayError,
    GroupError,
    GroupExists,
    InvalidCredentials,
    InvalidRequest,
    MessageTooLarge,
    NotFound,
    OffsetOutOfRange,
    SequenceError,
    StorageError,
    Timeout,
    TopicExists,
    Unauthorized,
    UnknownGroup,
    UnknownTopic,
    Unsupported,
    UserExists,
)
from protocols.rabbitmq_stream import ResponseCode


class RabbitCode(GatewayError):
    """A failure with no canonical meaning (an unknown publisher id...), answered with this code."""

    error_type = "invalid_request"

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


# The one table. A failure is answered with the code of the nearest class in its MRO, so a class
# without a row (UnknownPartition, ProducerFenced...) takes its parent's.
_CODES: Final[Mapping[type[GatewayError], ResponseCode]] = {
    UnknownGroup: ResponseCode.NO_OFFSET,  # QueryOffset of a reference nothing was stored for
    OffsetOutOfRange: ResponseCode.NO_OFFSET,
    # A missing namespace too: the listener checks the virtual host itself at Open (0x0c).
    NotFound: ResponseCode.STREAM_DOES_NOT_EXIST,
    GroupExists: ResponseCode.PRECONDITION_FAILED,
    UserExists: ResponseCode.PRECONDITION_FAILED,
    AlreadyExists: ResponseCode.STREAM_ALREADY_EXISTS,
    Unauthorized: ResponseCode.AUTHENTICATION_FAILURE,
    Forbidden: ResponseCode.ACCESS_REFUSED,
    MessageTooLarge: ResponseCode.FRAME_TOO_LARGE,
    BackendUnavailable: ResponseCode.STREAM_NOT_AVAILABLE,
    Timeout: ResponseCode.STREAM_NOT_AVAILABLE,
    # No storage code in the protocol (§4): internal error, which a publisher sees in its
    # PublishError and does not mistake for a leader move.
    StorageError: ResponseCode.INTERNAL_ERROR,
    InvalidRequest: ResponseCode.PRECONDITION_FAILED,
    SequenceError: ResponseCode.PRECONDITION_FAILED,
    GroupError: ResponseCode.PRECONDITION_FAILED,
    Unsupported: ResponseCode.PRECONDITION_FAILED,
    GatewayError: ResponseCode.INTERNAL_ERROR,
}

# The other direction is the inverse of the table where it is 1:1, made as specific as a broker's
# code is: "does not exist" and "already exists" are said of streams (canonical topics), an
# authentication failure of the credentials.
_SPECIFIC: Final[Mapping[int, type[GatewayError]]] = {
    ResponseCode.STREAM_DOES_NOT_EXIST: UnknownTopic,
    ResponseCode.STREAM_ALREADY_EXISTS: TopicExists,
    ResponseCode.AUTHENTICATION_FAILURE: InvalidCredentials,
}

# Codes several kinds of failure share: which one a broker's code means.
_SHARED: Final[Mapping[int, type[GatewayError]]] = {
    # GroupExists, UserExists, SequenceError, GroupError and Unsupported answer it too.
    ResponseCode.PRECONDITION_FAILED: InvalidRequest,
    ResponseCode.STREAM_NOT_AVAILABLE: BackendUnavailable,  # or a Timeout: both retriable
    # UnknownGroup or OffsetOutOfRange: no one meaning. The backend's QueryOffset takes it as
    # "nothing stored" and never raises it.
    ResponseCode.NO_OFFSET: GatewayError,
    # A StorageError too (ours), but a broker's internal error says nothing about its disk.
    ResponseCode.INTERNAL_ERROR: GatewayError,
}

# Codes only a broker sends (our listener answers those failures with the table's code).
_SERVER_ONLY: Final[Mapping[int, type[GatewayError]]] = {
    ResponseCode.PUBLISHER_DOES_NOT_EXIST: BackendUnavailable,  # ours went with its stream
    ResponseCode.VIRTUAL_HOST_ACCESS_FAILURE: Forbidden,
    ResponseCode.SASL_AUTHENTICATION_FAILURE_LOOPBACK: InvalidCredentials,
    ResponseCode.SASL_MECHANISM_NOT_SUPPORTED: InvalidCredentials,
    ResponseCode.SASL_ERROR: InvalidCredentials,
}

_ERRORS: Final[Mapping[int, type[GatewayError]]] = {
    **{code: cls for cls, code in _CODES.items()},
    **_SPECIFIC,
    **_SHARED,
    **_SERVER_ONLY,
}


def response_code(exc: GatewayError) -> int:
    """The §4 response code the listener answers a canonical failure with."""
    if isinstance(exc, RabbitCode):
        return exc.code
    return next(_CODES[c] for c in type(exc).__mro__ if c in _CODES)


def code_name(code: int) -> str:
    try:
        return ResponseCode(code).name
    except ValueError:
        return f"code 0x{code:02x}"


def error_of(code: int, what: str) -> GatewayError:
    """The canonical failure for a §4 response code a broker answered ``what`` with."""
    return _ERRORS.get(code, GatewayError)(f"RabbitMQ {what}: {code_name(code)}")


__all__ = ["RabbitCode", "code_name", "error_of", "response_code"]
