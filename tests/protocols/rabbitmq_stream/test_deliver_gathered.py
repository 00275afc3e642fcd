"""A Deliver frame gathered from a chunk's pieces (``deliver_frame``, ``chunk_header``) is, byte
for byte, what encoding the Deliver of the joined chunk writes, and decodes back to it."""

from __future__ import annotations

import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocols._wire import LocalProtocolError
from protocols.rabbitmq_stream import (
    Deliver,
    RabbitStreamClientCodec,
    RabbitStreamServerCodec,
    deliver_frame,
)
from protocols.rabbitmq_stream.chunk import (
    HEADER_SIZE,
    chunk_header,
    read_chunk,
)

PIECES = st.lists(st.binary(max_size=300), max_size=6)


@given(
    pieces=PIECES,
    subscription_id=st.integers(0, 255),
    committed=st.none() | st.integers(0, (1 << 64) - 1),
    chunk_id=st.integers(0, (1 << 64) - 1),
    timestamp_ms=st.integers(-(1 << 63), (1 << 63) - 1),
    entries=st.integers(0, 0xFFFF),
    records=st.integers(0, 0xFFFF_FFFF),
)
def test_gathered_deliver_is_the_encoded_one(
    pieces: list[bytes],
    subscription_id: int,
    committed: int | None,
    chunk_id: int,
    timestamp_ms: int,
    entries: int,
    records: int,
) -> None:
    body = b"".join(pieces)
    header = chunk_header(pieces, entries=entries, records=records, chunk_id=chunk_id,
                          timestamp_ms=timestamp_ms, epoch=3, bloom_size=16)  # fmt: skip
    assert len(header) == HEADER_SIZE
    whole = header + body
    gathered = deliver_frame(subscription_id, (header, *pieces), committed)
    encoded = RabbitStreamServerCodec().send(
        Deliver(subscription_id=subscription_id, chunk=whole, committed_chunk_id=committed)
    )
    assert gathered.join() == encoded
    assert gathered.nbytes == len(encoded)
    client = RabbitStreamClientCodec()
    client.receive_data(gathered.join())
    frame = client.next_frame()
    assert isinstance(frame, Deliver)
    assert frame.chunk == whole
    assert frame.committed_chunk_id == committed
    read_header, read_body = read_chunk(frame.chunk)  # the CRC over the pieces checks out
    assert bytes(read_body) == body
    assert (read_header.entries, read_header.records, read_header.chunk_id) == (
        entries, records, chunk_id)  # fmt: skip
    assert (read_header.timestamp_ms, read_header.epoch, read_header.bloom_size) == (
        timestamp_ms, 3, 16)  # fmt: skip
    assert read_header.crc == zlib.crc32(body)  # ISA-L's CRC-32 is zlib's (what clients check)


@pytest.mark.parametrize("subscription_id", [-1, 256])
def test_a_subscription_id_beyond_u8_is_refused(subscription_id: int) -> None:
    with pytest.raises(LocalProtocolError, match="Deliver"):
        deliver_frame(subscription_id, (b"x",))
