"""A storage failure (disk full, I/O error) is each protocol's own storage error, never the
"try again elsewhere" answer a client would retry in silence until it times out."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from gateway.model import StorageError
from gateway.translate.iggy.errors import status_of
from gateway.translate.kafka.errors import error_code, gateway_error
from gateway.translate.rabbitmq_stream.errors import response_code
from gateway.translate.rog import error_response
from protocols.iggy.status import Status
from protocols.rabbitmq_stream import ResponseCode
from protocols.rog import Publish

FULL = StorageError("storage error (no_space): writing x.log failed", kind="no_space")


def test_kafka_storage_error_both_ways() -> None:
    assert error_code(FULL) == ErrorCode.kafka_storage_error  # 56
    assert error_code(FULL, group=True) == ErrorCode.kafka_storage_error
    back = gateway_error(ErrorCode.kafka_storage_error)
    assert isinstance(back, StorageError) and back.retriable


def test_rabbitmq_stream_internal_error() -> None:
    assert response_code(FULL) == ResponseCode.INTERNAL_ERROR
    assert int(ResponseCode.INTERNAL_ERROR) == 0x0F  # rabbitmq-stream.md §4


def test_iggy_generic_error_not_transient() -> None:
    assert status_of(FULL) == Status.ERROR


def test_rog_says_what_happened() -> None:
    reply = error_response(Publish(name="log", partition=0, data=b"x"), FULL)
    assert reply.text == FULL.message
