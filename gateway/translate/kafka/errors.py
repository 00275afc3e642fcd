"""Kafka error codes <-> the canonical ``GatewayError`` hierarchy, both directions in one table
(kafka.md §6): ``error_code`` is what the Kafka listener answers for a failed command,
``gateway_error`` what the Kafka backend raises for an error code a broker answered."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from gateway.model import (
    BackendUnavailable,
    ClusterForbidden,
    CorruptMessage,
    Forbidden,
    GatewayError,
    GroupForbidden,
    GroupNotEmpty,
    IllegalGeneration,
    InconsistentGroupProtocol,
    InvalidPartitions,
    InvalidRequest,
    InvalidSessionTimeout,
    MemberIdRequired,
    MessageTooLarge,
    NotFound,
    OffsetOutOfRange,
    ProducerFenced,
    RebalanceInProgress,
    SequenceError,
    StorageError,
    Timeout,
    TopicExists,
    TopicForbidden,
    TransactionError,
    TransactionTimeoutInvalid,
    Unauthorized,
    UnknownGroup,
    UnknownMember,
    UnknownProducer,
    UnknownTopic,
    Unsupported,
)

_GROUP_ERRORS: tuple[tuple[type[GatewayError], ErrorCode], ...] = (
    (MemberIdRequired, ErrorCode.member_id_required),
    (RebalanceInProgress, ErrorCode.rebalance_in_progress),
    (IllegalGeneration, ErrorCode.illegal_generation),
    (UnknownMember, ErrorCode.unknown_member_id),
    (InconsistentGroupProtocol, ErrorCode.inconsistent_group_protocol),
    (InvalidSessionTimeout, ErrorCode.invalid_session_timeout),
    (GroupNotEmpty, ErrorCode.non_empty_group),
    (UnknownGroup, ErrorCode.group_id_not_found),
)
_ERRORS: tuple[tuple[type[GatewayError], ErrorCode], ...] = (
    *_GROUP_ERRORS,
    (TopicExists, ErrorCode.topic_already_exists),
    (InvalidPartitions, ErrorCode.invalid_partitions),
    (CorruptMessage, ErrorCode.corrupt_message),
    (MessageTooLarge, ErrorCode.message_too_large),
    (OffsetOutOfRange, ErrorCode.offset_out_of_range),
    (ProducerFenced, ErrorCode.invalid_producer_epoch),
    (UnknownProducer, ErrorCode.invalid_producer_id_mapping),
    (TransactionError, ErrorCode.invalid_txn_state),
    (TransactionTimeoutInvalid, ErrorCode.invalid_transaction_timeout),
    (SequenceError, ErrorCode.out_of_order_sequence_number),
    (NotFound, ErrorCode.unknown_topic_or_partition),
    (Timeout, ErrorCode.request_timed_out),
    (StorageError, ErrorCode.kafka_storage_error),  # disk full, I/O error (retriable, 56)
    (Unauthorized, ErrorCode.sasl_authentication_failed),
    (GroupForbidden, ErrorCode.group_authorization_failed),
    (ClusterForbidden, ErrorCode.cluster_authorization_failed),
    (Forbidden, ErrorCode.topic_authorization_failed),  # TopicForbidden, and any other
    (InvalidRequest, ErrorCode.invalid_request),
    (Unsupported, ErrorCode.invalid_request),
)


def error_code(exc: GatewayError, *, group: bool = False) -> ErrorCode:
    """The Kafka error for a failed command; ``group`` = it came from a coordinator API, where an
    unavailable backend means "find the coordinator again" rather than "refresh metadata"."""
    if isinstance(exc, BackendUnavailable):
        return ErrorCode.coordinator_not_available if group else ErrorCode.not_leader_or_follower
    for cls, code in _ERRORS:
        if isinstance(exc, cls):
            return code
    return ErrorCode.unknown_server_error


# The other direction (a broker's answer -> GatewayError): the inverse of _ERRORS, the most
# specific class per code, plus what only a broker says. Retriable broker states (leadership
# moving, coordinator loading, a broker or replica away) are BackendUnavailable.
_FROM_CODE: dict[ErrorCode, type[GatewayError]] = {
    **{code: cls for cls, code in reversed(_ERRORS)},
    ErrorCode.unknown_topic_or_partition: UnknownTopic,
    ErrorCode.unknown_topic_id: UnknownTopic,
    ErrorCode.invalid_request: InvalidRequest,
    ErrorCode.invalid_record: CorruptMessage,
    ErrorCode.record_list_too_large: MessageTooLarge,
    ErrorCode.invalid_topic_exception: InvalidRequest,
    ErrorCode.invalid_config: InvalidRequest,
    ErrorCode.invalid_replication_factor: InvalidRequest,
    ErrorCode.invalid_required_acks: InvalidRequest,
    ErrorCode.invalid_timestamp: InvalidRequest,
    ErrorCode.policy_violation: InvalidRequest,
    ErrorCode.invalid_group_id: InvalidRequest,
    ErrorCode.offset_metadata_too_large: InvalidRequest,
    ErrorCode.unsupported_compression_type: InvalidRequest,
    ErrorCode.duplicate_sequence_number: SequenceError,
    ErrorCode.unknown_producer_id: SequenceError,
    ErrorCode.producer_fenced: ProducerFenced,
    ErrorCode.topic_authorization_failed: TopicForbidden,
    ErrorCode.group_authorization_failed: GroupForbidden,
    ErrorCode.cluster_authorization_failed: ClusterForbidden,
    ErrorCode.transactional_id_authorization_failed: Forbidden,
    ErrorCode.topic_deletion_disabled: Forbidden,
    ErrorCode.unsupported_version: Unsupported,
    ErrorCode.unsupported_for_message_format: Unsupported,
    ErrorCode.group_subscribed_to_topic: GroupNotEmpty,
    **dict.fromkeys(
        (
            ErrorCode.leader_not_available,
            ErrorCode.not_leader_or_follower,
            ErrorCode.broker_not_available,
            ErrorCode.replica_not_available,
            ErrorCode.network_exception,
            ErrorCode.coordinator_load_in_progress,
            ErrorCode.coordinator_not_available,
            ErrorCode.not_coordinator,
            ErrorCode.not_controller,
            ErrorCode.not_enough_replicas,
            ErrorCode.not_enough_replicas_after_append,
            ErrorCode.fenced_leader_epoch,
            ErrorCode.unknown_leader_epoch,
            ErrorCode.throttling_quota_exceeded,
            ErrorCode.preferred_leader_not_available,
            ErrorCode.concurrent_transactions,
        ),
        BackendUnavailable,
    ),
}


def gateway_error(code: ErrorCode, message: str | None = None) -> GatewayError:
    """The canonical error for a Kafka error code a broker answered (never for ``none``)."""
    cls = _FROM_CODE.get(code, GatewayError)
    return cls(f"{code.name} ({code.value})" + (f": {message}" if message else ""))


__all__ = ["error_code", "gateway_error"]
