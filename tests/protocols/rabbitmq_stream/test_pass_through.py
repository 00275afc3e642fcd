"""The hot encoders and views that pass stored data on without copying it (``deliver_frame``,
``SimpleEntries.items`` / ``items_frame``): byte for byte what the frame classes encode."""

from __future__ import annotations

import pytest

from protocols import rabbitmq_stream as rs
from protocols._wire import Piece
from protocols.rabbitmq_stream.chunk import SimpleEntry, decode_chunk, encode_chunk
from protocols.rabbitmq_stream.commands import SERVER_FRAMES, encode_frame


@pytest.mark.parametrize("committed", [None, 0, 7, (1 << 64) - 1])
def test_deliver_frame_is_the_deliver_encoding(committed: int | None) -> None:
    chunk = encode_chunk([SimpleEntry(b"a"), SimpleEntry(b"bc")], chunk_id=5, timestamp_ms=9)
    pieces: list[Piece] = [chunk[:48], memoryview(chunk)[48:50], chunk[50:]]
    gathered = rs.deliver_frame(3, pieces, committed)
    whole = encode_frame(
        rs.Deliver(subscription_id=3, chunk=chunk, committed_chunk_id=committed), SERVER_FRAMES
    )
    assert gathered.join() == whole
    assert gathered.nbytes == len(whole)


def test_a_decoded_deliver_holds_a_view_of_its_frame() -> None:
    chunk = encode_chunk([SimpleEntry(b"x" * 100)], chunk_id=0, timestamp_ms=1)
    codec = rs.RabbitStreamClientCodec()
    codec.receive_data(encode_frame(rs.Deliver(subscription_id=1, chunk=chunk), SERVER_FRAMES))
    frame = codec.next_frame()
    assert isinstance(frame, rs.Deliver)
    assert frame.chunk == chunk
    assert decode_chunk(frame.chunk).entries == (SimpleEntry(b"x" * 100),)


def _decoded(messages: tuple[rs.PublishedMessage, ...]) -> rs.Publish:
    frame = rs.Publish(publisher_id=4, messages=messages)
    codec = rs.RabbitStreamServerCodec()
    codec.receive_data(rs.RabbitStreamClientCodec().send(frame))
    decoded = codec.next_frame()
    assert isinstance(decoded, rs.Publish) and decoded == frame
    return decoded


@pytest.mark.parametrize("size", [0, 1, 100, 300, 5000])
def test_published_items_go_on_as_they_came(size: int) -> None:
    messages = tuple(
        rs.PublishedMessage(publishing_id=10 + i * 3, data=bytes([i]) * (size + i))
        for i in range(5)
    )
    simple = _decoded(messages).messages
    assert isinstance(simple, rs.SimpleEntries)
    body = simple.frame_body()
    assert body is not None and simple.items is not None
    stored = b"".join(len(m.data).to_bytes(4, "big") + m.data for m in messages)
    # the Publish a backend sends: the client's items behind its own header
    [expected], count, _ = rs.publish_frames(9, 0, stored, 1 << 20, simple.ids)
    assert rs.items_frame(9, simple.items, len(simple)) == expected
    assert bytes(simple.items) == body[rs.PUBLISH_ITEMS_AT :]
    assert rs.items_entries(simple.items) == stored == simple.stored
    assert simple.stored_range(1, 3) == stored[4 + size : 4 + size + 8 + 2 * size + 3]
    assert list(simple) == list(messages) and count == 5


def test_a_frame_of_no_entries() -> None:
    simple = _decoded(()).messages
    assert isinstance(simple, rs.SimpleEntries)
    assert simple.stored == b"" and list(simple) == []
