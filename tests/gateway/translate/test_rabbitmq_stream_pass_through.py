"""The wire forms that carry RabbitMQ Stream data through the gateway unchanged: a chunk as the
RabbitMQ backend read it (``CHUNK_FORMAT``, delivered as it came) and a Publish body on its way
to the broker (``PUBLISHED_FORMAT``); both still read as the same messages elsewhere."""

from __future__ import annotations

from gateway.model import MessageBatch, WireBatch
from gateway.translate.rabbitmq_stream import chunks as trm
from protocols import rabbitmq_stream as rs
from protocols.rabbitmq_stream.chunk import SimpleEntry, decode_chunk, encode_chunk, encode_entry

ENTRIES = [SimpleEntry(b"m%d" % i) for i in range(4)]


def _chunk_batch(chunk_id: int) -> MessageBatch:
    chunk = encode_chunk(ENTRIES, chunk_id=chunk_id, timestamp_ms=1234, epoch=3,
                         trailer_length=21)  # fmt: skip
    return MessageBatch(wire=WireBatch(format=trm.CHUNK_FORMAT, data=chunk, count=4,
                                       base_offset=chunk_id, first_timestamp_us=1_234_000,
                                       max_timestamp_us=1_234_000))  # fmt: skip


def test_a_read_chunk_is_delivered_as_it_came() -> None:
    batch = _chunk_batch(8)
    out = trm.chunk_for([batch], 8)
    assert out is not None and (out.chunk_id, out.records) == (8, 4)
    assert batch.wire is not None and out.data == batch.wire.data  # epoch, trailer length, CRC


def test_a_read_chunk_starting_below_the_offset_is_cut() -> None:
    out = trm.chunk_for([_chunk_batch(8)], 10)
    assert out is not None and (out.chunk_id, out.records) == (10, 2)
    assert decode_chunk(out.data).entries == tuple(ENTRIES[2:])


def test_a_read_chunk_decodes_as_its_entries() -> None:
    batch = _chunk_batch(0)
    assert batch.wire is not None
    entries = trm.chunk_entries(batch.wire)
    assert entries.format == trm.WIRE_FORMAT
    assert entries.data == b"".join(map(encode_entry, ENTRIES))
    assert batch.messages == MessageBatch(wire=entries).messages


def test_a_publish_body_decodes_as_its_entries() -> None:
    messages = tuple(rs.PublishedMessage(publishing_id=5 + i, data=e.data)
                     for i, e in enumerate(ENTRIES))  # fmt: skip
    codec = rs.RabbitStreamServerCodec()
    sent = rs.Publish(publisher_id=1, messages=messages)
    codec.receive_data(rs.RabbitStreamClientCodec().send(sent))
    frame = codec.next_frame()
    assert isinstance(frame, rs.Publish) and isinstance(frame.messages, rs.SimpleEntries)
    body = frame.messages.frame_body()
    assert body is not None
    published = trm.published_batch(body, 4, timestamp_us=7)
    stored = trm.stored_batch(frame.messages.stored, 4, timestamp_us=7)
    assert trm.published_entries(published) == stored.data
    assert MessageBatch(wire=published).messages == MessageBatch(wire=stored).messages
