"""The client's ConsumerUpdate answer as rstream sends it: a uint64 after every offset type, also
after those that carry no value (RabbitMQ ignores it; so does the decoder, keeping the bytes)."""

from __future__ import annotations

import struct

import pytest

from protocols.rabbitmq_stream import ConsumerUpdateResponse, OffsetSpec, OffsetType
from tests.protocols.rabbitmq_stream.support import client, decode_one


def answer(kind: int, value: bytes) -> bytes:
    body = struct.pack(">HHIHH", 0x801A, 1, 5, 1, kind) + value
    return struct.pack(">I", len(body)) + body


@pytest.mark.parametrize("kind", [OffsetType.NONE, OffsetType.FIRST, OffsetType.LAST,
                                  OffsetType.NEXT])  # fmt: skip
def test_a_value_after_a_type_without_one_is_kept_aside(kind: OffsetType) -> None:
    wire = answer(kind, struct.pack(">Q", 0))
    got = decode_one(wire)
    assert got == ConsumerUpdateResponse(
        correlation_id=5, code=1, offset=OffsetSpec(type=kind), unused_value=0
    )
    assert client().send(got) == wire  # re-encoded as it came


def test_the_short_form_and_offsets_still_decode() -> None:
    assert decode_one(answer(OffsetType.NEXT, b"")) == ConsumerUpdateResponse(
        correlation_id=5, code=1, offset=OffsetSpec(type=OffsetType.NEXT)
    )
    assert decode_one(answer(OffsetType.OFFSET, struct.pack(">Q", 42))) == ConsumerUpdateResponse(
        correlation_id=5, code=1, offset=OffsetSpec.offset(42)
    )
