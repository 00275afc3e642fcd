"""Kafka error codes <-> GatewayError (gateway/translate/kafka/errors.py): one table, both ways."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from gateway.model import (
    BackendUnavailable,
    InvalidPartitions,
    TopicExists,
    UnknownTopic,
)
from gateway.translate.kafka.errors import error_code, gateway_error


def test_broker_errors_map_back() -> None:
    assert isinstance(gateway_error(ErrorCode.topic_already_exists), TopicExists)
    assert isinstance(gateway_error(ErrorCode.unknown_topic_or_partition), UnknownTopic)
    assert isinstance(gateway_error(ErrorCode.not_leader_or_follower), BackendUnavailable)
    assert gateway_error(ErrorCode.unknown_server_error).error_type == "internal"
    for code in (ErrorCode.topic_already_exists, ErrorCode.invalid_partitions):
        assert error_code(gateway_error(code)) is code  # the translator's way back
    assert isinstance(gateway_error(ErrorCode.invalid_partitions, "why"), InvalidPartitions)
