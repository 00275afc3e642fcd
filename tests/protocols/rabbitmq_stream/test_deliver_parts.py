"""A big Deliver taken in parts by the client codec (``RabbitStreamClientCodec``): read as a
listener of the RabbitMQ backend reads it (what the codec asks for each time, gateway/gathered.py
``ExactReads``), its chunk's data section is the very bytes object read, not a copy cut out of
the frame; however it arrives, the chunk reads back as the contiguous one does."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocols._wire import NEED_DATA, RemoteProtocolError
from protocols.rabbitmq_stream import Deliver, RabbitStreamClientCodec, RabbitStreamServerCodec
from protocols.rabbitmq_stream.chunk import (
    ChunkParts,
    SimpleEntry,
    decode_chunk,
    encode_chunk,
    read_chunk,
)
from protocols.rabbitmq_stream.codec import SPLIT_DELIVER_FROM
from tests.helpers.feeding import feed_in_cuts

MAX = 4 << 20


def _chunk(entries: int, size: int, trailer: bytes | None) -> bytes:
    return encode_chunk([SimpleEntry(bytes([i % 251]) * size) for i in range(entries)],
                        chunk_id=1000, timestamp_ms=5, trailer=trailer)  # fmt: skip


def _frame(chunk: bytes, committed: int | None) -> bytes:
    deliver = Deliver(subscription_id=3, chunk=chunk, committed_chunk_id=committed)
    return RabbitStreamServerCodec(MAX).send(deliver)


@pytest.mark.parametrize("committed", [None, 77])
@pytest.mark.parametrize("trailer", [None, b"T" * 20])
def test_read_as_asked_the_data_section_is_the_read_itself(
    committed: int | None, trailer: bytes | None
) -> None:
    chunk = _chunk(200, 1000, trailer)
    frame = _frame(chunk, committed)
    codec = RabbitStreamClientCodec(MAX)
    reads: list[bytes] = []
    while True:
        got = codec.next_frame()
        if got is not NEED_DATA:
            break
        want = codec.wants if not codec.buffered else codec.missing
        assert 0 < want <= len(frame) - sum(map(len, reads))
        piece = frame[sum(map(len, reads)) : sum(map(len, reads)) + want]
        reads.append(piece)
        codec.receive_data(piece)
    assert isinstance(got, Deliver) and isinstance(got.chunk, ChunkParts)
    assert (got.subscription_id, got.committed_chunk_id) == (3, committed)
    assert len(reads) <= 5 + (committed is not None)
    assert any(read is got.chunk.data for read in reads)  # kept as read: no copy
    header, body = read_chunk(got.chunk)
    whole_header, whole_body = read_chunk(chunk)
    assert header == whole_header and bytes(body) == bytes(whole_body)
    assert decode_chunk(got.chunk) == decode_chunk(chunk)
    assert (
        got.chunk.joined() == chunk
        and got.encode_body()[1 + 8 * (committed is not None) :] == chunk
    )
    assert not codec.buffered


@settings(max_examples=40, deadline=None)
@given(cuts=st.lists(st.integers(1, 70_000), max_size=8), committed=st.none() | st.just(9),
       trailer=st.none() | st.just(b"xy" * 10), after=st.booleans())  # fmt: skip
def test_in_any_pieces_a_big_deliver_reads_as_the_whole_one(
    cuts: list[int], committed: int | None, trailer: bytes | None, after: bool
) -> None:
    """However a big Deliver's bytes are cut (and with a small frame after it), the codec
    gives the Deliver whose chunk reads as the contiguous one, then the small frame."""
    chunk = _chunk(80, 1000, trailer)
    small = RabbitStreamServerCodec(MAX).send(Deliver(subscription_id=1, chunk=_chunk(1, 5, None)))
    data = _frame(chunk, committed) + (small if after else b"")
    codec = RabbitStreamClientCodec(MAX)
    frames = feed_in_cuts(codec, data, cuts)
    assert len(frames) == 1 + after
    first = frames[0]
    assert isinstance(first, Deliver) and first.committed_chunk_id == committed
    assert decode_chunk(first.chunk) == decode_chunk(chunk)
    if after:
        assert isinstance(frames[1], Deliver) and not isinstance(frames[1].chunk, ChunkParts)


def test_a_big_deliver_whose_sizes_do_not_add_up_is_refused_whole() -> None:
    """A chunk header whose data length leaves bytes that are no trailer: not taken in parts;
    the frame is decoded whole, and its chunk refused where it is read, as before."""
    chunk = bytearray(_chunk(100, 1000, None))
    chunk[36:40] = (len(chunk) - 48 - 3).to_bytes(4, "big")  # 3 bytes left over, no trailer
    codec = RabbitStreamClientCodec(MAX)
    codec.receive_data(_frame(bytes(chunk), None))
    got = codec.next_frame()
    assert isinstance(got, Deliver) and not isinstance(got.chunk, ChunkParts)
    with pytest.raises(RemoteProtocolError, match="bytes after the chunk data"):
        read_chunk(got.chunk)


def test_small_delivers_and_other_big_frames_are_taken_whole() -> None:
    small = _frame(_chunk(3, 100, None), None)
    assert len(small) < SPLIT_DELIVER_FROM
    codec = RabbitStreamClientCodec(MAX)
    codec.receive_data(small)
    got = codec.next_frame()
    assert isinstance(got, Deliver) and isinstance(got.chunk, memoryview)
    big_unknown = (SPLIT_DELIVER_FROM + 10).to_bytes(4, "big") + b"\x7f\x00\x00\x01"
    codec.receive_data(big_unknown + bytes(SPLIT_DELIVER_FROM + 6))
    with pytest.raises(RemoteProtocolError, match="unknown frame key"):
        codec.next_frame()
