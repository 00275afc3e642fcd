"""One error hierarchy for every failure a command can have.

``error_type`` is a bounded label (metrics) that every translator maps to its protocol's own error
code; subclasses let a translator be more precise (unknown topic vs unknown partition).
"""

from __future__ import annotations

ERROR_TYPES = (
    "not_found",
    "already_exists",
    "invalid_request",
    "too_large",
    "offset_out_of_range",
    "sequence_error",
    "group_error",
    "transaction_state",
    "unauthorized",
    "forbidden",
    "backend_unavailable",
    "storage",
    "timeout",
    "unsupported",
    "internal",
)


class GatewayError(Exception):
    error_type = "internal"
    retriable = False

    def __init__(self, message: str = "") -> None:
        super().__init__(message or self.__class__.__name__)

    @property
    def message(self) -> str:
        return str(self.args[0])


class NotFound(GatewayError):
    error_type = "not_found"


class UnknownStream(NotFound):
    pass


class UnknownTopic(NotFound):
    pass


class UnknownPartition(NotFound):
    def __init__(self, message: str = "", *, partitions: int = 0) -> None:
        super().__init__(message)
        self.partitions = partitions


class UnknownGroup(NotFound):
    pass


class UnknownUser(NotFound):
    pass


class AlreadyExists(GatewayError):
    error_type = "already_exists"


class StreamExists(AlreadyExists):
    pass


class TopicExists(AlreadyExists):
    pass


class GroupExists(AlreadyExists):
    pass


class UserExists(AlreadyExists):
    pass


class InvalidRequest(GatewayError):
    error_type = "invalid_request"


class InvalidPartitions(InvalidRequest):
    pass


class CorruptMessage(InvalidRequest):
    pass


class MessageTooLarge(GatewayError):
    error_type = "too_large"


class OffsetOutOfRange(GatewayError):
    error_type = "offset_out_of_range"

    def __init__(self, message: str = "", *, log_start: int = 0, log_end: int = 0) -> None:
        super().__init__(message)
        self.log_start = log_start
        self.log_end = log_end


class SequenceError(GatewayError):
    """Idempotent producer: a gap in sequence numbers (a duplicate is not an error)."""

    error_type = "sequence_error"


class ProducerFenced(SequenceError):
    pass


class TransactionError(GatewayError):
    """A Kafka transaction command that the transaction's state does not allow (INVALID_TXN_STATE:
    a transactional batch for a partition not added, EndTxn without an open transaction, a
    commit after an abort)."""

    error_type = "transaction_state"


class UnknownProducer(TransactionError):
    """No transaction with that transactional id and producer id (INVALID_PRODUCER_ID_MAPPING)."""


class TransactionTimeoutInvalid(InvalidRequest):
    """A transaction timeout above the coordinator's maximum (INVALID_TRANSACTION_TIMEOUT)."""


class GroupError(GatewayError):
    error_type = "group_error"


class RebalanceInProgress(GroupError):
    retriable = True


class IllegalGeneration(GroupError):
    pass


class UnknownMember(GroupError):
    pass


class MemberIdRequired(GroupError):
    """Kafka JoinGroup v4+: the member must rejoin with the id the coordinator gave it."""

    retriable = True

    def __init__(self, message: str = "", *, member_id: str = "") -> None:
        super().__init__(message)
        self.member_id = member_id


class InconsistentGroupProtocol(GroupError):
    pass


class InvalidSessionTimeout(GroupError):
    pass


class GroupNotEmpty(GroupError):
    pass


class Unauthorized(GatewayError):
    error_type = "unauthorized"


class InvalidCredentials(Unauthorized):
    """Wrong username or password (Iggy 42)."""


class InvalidToken(Unauthorized):
    """Unknown or expired personal access token (Iggy 53)."""


class UserInactive(Unauthorized):
    """The user exists but its status is inactive (Iggy 47)."""


class Forbidden(GatewayError):
    error_type = "forbidden"


# What a denied command was refused on, so that each protocol can answer its own code (Kafka
# tells a topic, a group and the cluster apart: TOPIC/GROUP/CLUSTER_AUTHORIZATION_FAILED).
class TopicForbidden(Forbidden):
    pass


class GroupForbidden(Forbidden):
    pass


class ClusterForbidden(Forbidden):
    """Refused on no single topic: streams, producer ids, server statistics."""


class BackendUnavailable(GatewayError):
    error_type = "backend_unavailable"
    retriable = True


# Why a store's write failed (``StorageError.kind``, the label of streamgate_storage_errors_total).
STORAGE_ERROR_KINDS = ("no_space", "quota", "io", "read_only")


class StorageError(GatewayError):
    """The backend's own storage refused a write (disk full, quota, I/O error, read-only file
    system): nothing of the failed command was acknowledged. Retriable: the same write may
    succeed once space returns (Kafka's KAFKA_STORAGE_ERROR is retriable too)."""

    error_type = "storage"
    retriable = True

    def __init__(self, message: str = "", *, kind: str = "io") -> None:
        super().__init__(message)
        self.kind = kind


class Timeout(GatewayError):
    error_type = "timeout"
    retriable = True


class Unsupported(GatewayError):
    error_type = "unsupported"


__all__ = [
    "ERROR_TYPES",
    "STORAGE_ERROR_KINDS",
    "AlreadyExists",
    "BackendUnavailable",
    "ClusterForbidden",
    "CorruptMessage",
    "Forbidden",
    "GatewayError",
    "GroupError",
    "GroupExists",
    "GroupForbidden",
    "GroupNotEmpty",
    "IllegalGeneration",
    "InconsistentGroupProtocol",
    "InvalidCredentials",
    "InvalidPartitions",
    "InvalidRequest",
    "InvalidSessionTimeout",
    "InvalidToken",
    "MemberIdRequired",
    "MessageTooLarge",
    "NotFound",
    "OffsetOutOfRange",
    "ProducerFenced",
    "RebalanceInProgress",
    "SequenceError",
    "StorageError",
    "StreamExists",
    "Timeout",
    "TopicExists",
    "TopicForbidden",
    "TransactionError",
    "TransactionTimeoutInvalid",
    "Unauthorized",
    "UnknownGroup",
    "UnknownMember",
    "UnknownPartition",
    "UnknownProducer",
    "UnknownStream",
    "UnknownTopic",
    "UnknownUser",
    "Unsupported",
    "UserExists",
    "UserInactive",
]
