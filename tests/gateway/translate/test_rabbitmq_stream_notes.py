"""A stored RabbitMQ batch's chunk notes (writer references, filter values): their stored form,
RabbitMQ's chunk filter, the Deliver header they set, and that readers of other protocols never
see them."""

from __future__ import annotations

import dataclasses

from hypothesis import example, given
from hypothesis import strategies as st

from gateway.model import MessageBatch
from gateway.translate.rabbitmq_stream.chunks import chunk_for, decode_wire, wire_entries
from gateway.translate.rabbitmq_stream.messages import stored_batch, wire_batch
from gateway.translate.rabbitmq_stream.notes import (
    BLOOM_SIZE,
    PLAIN,
    ChunkNotes,
    Filter,
    annotate,
    filter_of,
    notes_for,
    split,
)
from protocols import rabbitmq_stream as rs
from protocols.rabbitmq_stream.chunk import SimpleEntry, decode_chunk, encode_entry

_text = st.text(max_size=20)


@example(writers=[], filters=frozenset(), unfiltered=True, body=b"\xff\x00\x00\x00\x01")
@given(
    writers=st.lists(_text, max_size=3, unique=True),
    filters=st.frozensets(_text, max_size=5),
    unfiltered=st.booleans(),
    body=st.binary(max_size=40),
)
def test_notes_round_trip(
    writers: list[str], filters: frozenset[str], unfiltered: bool, body: bytes
) -> None:
    notes = ChunkNotes(tuple(writers), filters, unfiltered)
    assert split(annotate(notes, body)) == (notes, body)


def test_plain_entries_are_stored_as_they_are() -> None:
    entries = encode_entry(SimpleEntry(b"a"))
    assert annotate(PLAIN, entries) == entries
    assert split(entries) == (PLAIN, entries)
    assert notes_for("") == PLAIN


def test_the_trailer_rabbitmq_writes() -> None:
    # one publisher-sequence record per reference: type, id length, id, uint64 (rstream's
    # test_deliver: "test-reference" -> 24)
    assert notes_for("test-reference").trailer_length == 24
    assert ChunkNotes(("rs-pub", "rb-pub2")).trailer_length == 16 + 17
    assert PLAIN.trailer_length == 0 and PLAIN.bloom_size == 0
    assert notes_for("", ["a"]).bloom_size == BLOOM_SIZE


def test_the_chunk_filter_is_rabbitmqs() -> None:
    only_us = filter_of([("filter.0", "us"), ("name", "x")])
    assert only_us == Filter(frozenset({"us"}), match_unfiltered=False)
    also_plain = filter_of([("filter.1", "us"), ("match-unfiltered", "true")])
    assert also_plain == Filter(frozenset({"us"}), match_unfiltered=True)
    assert filter_of([("match-unfiltered", "true")]) is None  # no value: everything
    us, mixed, plain = notes_for("", ["us"]), notes_for("", ["eu", None]), notes_for("")
    assert only_us.accepts(us) and not only_us.accepts(mixed) and not only_us.accepts(plain)
    assert also_plain.accepts(us) and also_plain.accepts(mixed) and also_plain.accepts(plain)


def _stored(base: int, bodies: list[bytes], notes: ChunkNotes) -> MessageBatch:
    wire = wire_batch([SimpleEntry(b) for b in bodies], timestamp_us=1_000_000, notes=notes)
    return MessageBatch(wire=dataclasses.replace(wire, base_offset=base))


def test_chunks_skip_what_the_filter_rejects_and_state_the_trailer() -> None:
    batches = [
        _stored(0, [b"a", b"b"], notes_for("pub", ["eu", "eu"])),
        _stored(2, [b"c"], notes_for("pub", ["us"])),
        _stored(3, [b"d"], notes_for("pub", [None])),
    ]
    whole = chunk_for(batches, 0)
    assert whole is not None
    chunk = decode_chunk(whole.data)
    assert [e.data for e in chunk.entries] == [b"a", b"b", b"c", b"d"]
    assert (chunk.trailer_length, chunk.bloom_size) == (1 + 1 + 3 + 8, BLOOM_SIZE)
    us = chunk_for(batches, 0, only=Filter(frozenset({"us"})))
    assert us is not None and (us.chunk_id, us.records) == (2, 1)
    plain = chunk_for(batches, 0, only=Filter(frozenset({"xx"}), match_unfiltered=True))
    assert plain is not None and (plain.chunk_id, plain.records) == (3, 1)
    assert chunk_for(batches, 0, only=Filter(frozenset({"xx"}))) is None


def test_other_protocols_never_see_the_notes() -> None:
    body = encode_entry(SimpleEntry(b"x")) + encode_entry(SimpleEntry(b"y"))
    wire = stored_batch(body, 2, timestamp_us=5, notes=notes_for("ref", ["eu", None]))
    assert wire.data != body
    assert [e.data for e in wire_entries(wire)] == [b"x", b"y"]
    assert [(m.value, m.headers) for m in decode_wire(wire)] == [(b"x", ()), (b"y", ())]


def test_simple_entries_cut_at_entry_boundaries() -> None:
    frame = rs.Publish(publisher_id=1, messages=tuple(
        rs.PublishedMessage(publishing_id=i, data=bytes([i]) * i) for i in range(1, 5)
    ))  # fmt: skip
    codec = rs.RabbitStreamServerCodec(1 << 20)
    client = rs.RabbitStreamClientCodec()
    codec.receive_data(client.send(frame))
    got = codec.next_frame()
    assert isinstance(got, rs.Publish) and isinstance(got.messages, rs.SimpleEntries)
    entries = got.messages
    assert entries.stored_range(0, 4) == entries.stored
    assert entries.stored_range(1, 3) == encode_entry(SimpleEntry(b"\2\2")) + encode_entry(
        SimpleEntry(b"\3\3\3")
    )
    assert entries.stored_range(4, 4) == b""
