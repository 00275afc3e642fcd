"""The one-pass decoding of Publish v1 frames of simple entries (``SimpleEntries``) and the
length-only entry count of chunk bodies: what the gateway's hot paths store and deliver without
building an object per message."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocols._wire import LocalProtocolError, RemoteProtocolError
from protocols.rabbitmq_stream import (
    Publish,
    PublishedMessage,
    PublishedSubBatch,
    ResponseCode,
    SimpleEntries,
    publish_frames,
    readdressed,
    sent_entries,
)
from protocols.rabbitmq_stream.chunk import (
    Compression,
    Entry,
    SimpleEntry,
    SubEntryBatch,
    chunk_header,
    count_entries,
    decode_chunk,
    encode_chunk,
    encode_entry,
)
from protocols.rabbitmq_stream.frames_publish import PUBLISH_HEAD_SIZE
from protocols.rabbitmq_stream.publish_columns import MIN_ITEMS, uniform_items
from tests.protocols.rabbitmq_stream.support import client, decode_one

MESSAGES = (
    PublishedMessage(publishing_id=7, data=b"first"),
    PublishedMessage(publishing_id=9, data=b""),
    PublishedMessage(publishing_id=2**64 - 1, data=b"\x80 not a sub-batch flag"),
)


def test_simple_entries_are_scanned_once_and_behave_as_the_tuple() -> None:
    wire = client().send(Publish(publisher_id=3, messages=MESSAGES))
    got = decode_one(wire)
    assert isinstance(got, Publish) and isinstance(got.messages, SimpleEntries)
    entries = got.messages
    assert entries.ids == (7, 9, 2**64 - 1)
    assert entries.stored == b"".join(encode_entry(SimpleEntry(m.data)) for m in MESSAGES)
    assert got == Publish(publisher_id=3, messages=MESSAGES)  # equal to the tuple form
    assert tuple(entries) == MESSAGES and list(entries) == list(MESSAGES)
    assert entries[1] == MESSAGES[1] and entries[-1] == MESSAGES[-1]
    assert entries[1:] == MESSAGES[1:]
    assert hash(got) == hash(Publish(publisher_id=3, messages=MESSAGES))
    assert client().send(got) == wire  # re-encodes byte for byte


@pytest.mark.parametrize("size", [0, 100, 511, 512, 513, 1024, 20_000])
def test_entries_of_every_size_are_scanned_as_sent(size: int) -> None:
    """Entries are cut as slices of the bytes below an average of 512 bytes, as views above:
    the same stored entries either way, whole or in one of a few sizes."""
    messages = tuple(
        PublishedMessage(publishing_id=i, data=bytes([i]) * (size + i % 3)) for i in range(1, 40)
    )
    got = decode_one(client().send(Publish(publisher_id=3, messages=messages)))
    assert isinstance(got, Publish) and isinstance(got.messages, SimpleEntries)
    assert type(got.messages.stored) is bytes
    assert got.messages.stored == b"".join(encode_entry(SimpleEntry(m.data)) for m in messages)
    assert tuple(got.messages) == messages


def test_a_sub_batch_falls_back_to_entry_objects() -> None:
    sub = PublishedSubBatch(publishing_id=8, compression=0, record_count=1,
                            uncompressed_length=5, data=b"\0\0\0\x01x")  # fmt: skip
    frame = Publish(publisher_id=1, messages=(MESSAGES[0], sub))
    got = decode_one(client().send(frame))
    assert isinstance(got, Publish) and not isinstance(got.messages, SimpleEntries)
    assert got == frame


def test_an_empty_publish_is_an_empty_sequence() -> None:
    got = decode_one(client().send(Publish(publisher_id=1)))
    assert isinstance(got, Publish) and len(got.messages) == 0


@pytest.mark.parametrize("cut", [1, 5, 12])
def test_a_truncated_entry_is_refused(cut: int) -> None:
    body = bytes([0]) + struct.pack(">i", 1) + struct.pack(">QI", 1, 10) + b"0123456789"
    body = body[:-cut]
    frame = struct.pack(">IHH", 4 + len(body), 2, 1) + body
    with pytest.raises(RemoteProtocolError) as caught:
        decode_one(frame)
    assert caught.value.hint == ResponseCode.UNKNOWN_FRAME


def test_count_entries_reads_lengths_only() -> None:
    sub = SubEntryBatch.build([b"a", b"b", b"c"], Compression.GZIP)
    body = b"".join(encode_entry(e) for e in (SimpleEntry(b"x"), sub, SimpleEntry(b"")))
    assert count_entries(body) == (3, 5)
    assert count_entries(b"") == (0, 0)
    for bad in (body[:-1], body + b"\0", b"\x80\0"):
        with pytest.raises(RemoteProtocolError):
            count_entries(bad)


def test_a_chunk_of_encoded_entries_is_the_chunk_of_the_entries() -> None:
    entries: list[Entry] = [SimpleEntry(b"x"), SubEntryBatch.build([b"a", b"b"], Compression.NONE)]
    body = b"".join(encode_entry(e) for e in entries)
    pieces = (body[:3], body[3:])  # a header over the pieces of a body, not joined
    built = chunk_header(pieces, entries=2, records=3, chunk_id=40, timestamp_ms=123) + body
    assert built == encode_chunk(entries, chunk_id=40, timestamp_ms=123)
    chunk = decode_chunk(built)
    assert (chunk.chunk_id, chunk.num_records, chunk.entries) == (40, 3, tuple(entries))


def test_publish_frames_of_stored_entries_are_the_codecs_frames() -> None:
    """The client's hot path: entries as stored, ids from ``first_id``, cut at the frame max."""
    sub = SubEntryBatch.build([b"a", b"b"], Compression.GZIP)
    entries: list[Entry] = [SimpleEntry(b"x" * 10), sub, SimpleEntry(b""), SimpleEntry(b"y")]
    stored = b"".join(encode_entry(e) for e in entries)
    items = [publish_item(100 + i, e) for i, e in enumerate(entries)]
    frames, count, largest = publish_frames(5, 100, stored, 1 << 20)
    assert frames == [client().send(Publish(publisher_id=5, messages=tuple(items)))]
    assert (count, largest) == (4, len(encode_entry(sub)))
    # A frame max that holds two items at most (the first and the sub-batch are 22 and 44+).
    small, _, _ = publish_frames(5, 100, stored, 13 + 8 + len(encode_entry(sub)) + 8 + 4)
    decoded = [decode_one(frame) for frame in small]
    assert all(isinstance(f, Publish) and f.publisher_id == 5 for f in decoded)
    assert [m for f in decoded if isinstance(f, Publish) for m in f.messages] == items
    assert all(len(frame) - 4 <= 13 + 8 + len(encode_entry(sub)) + 12 for frame in small)
    assert publish_frames(5, 1, b"", 1 << 20) == ([], 0, 0)
    alone, _, _ = publish_frames(5, 1, stored, 16)  # nothing fits: one entry per frame
    assert len(alone) == 4
    for bad in (stored[:-1], b"\x80\0", b"\0\0"):
        with pytest.raises(LocalProtocolError):
            publish_frames(5, 1, bad, 1 << 20)


def publish_item(publishing_id: int, entry: Entry) -> PublishedMessage | PublishedSubBatch:
    if isinstance(entry, SimpleEntry):
        return PublishedMessage(publishing_id=publishing_id, data=entry.data)
    return PublishedSubBatch(publishing_id=publishing_id, compression=entry.compression,
                             record_count=entry.record_count,
                             uncompressed_length=entry.uncompressed_length,
                             data=entry.data)  # fmt: skip


def test_publish_frames_with_given_ids_across_frames() -> None:
    """A deduplicating publisher's own ids go with their entries, whatever frame each lands in;
    ids and entries must pair up one to one."""
    entries = [SimpleEntry(b"e%d" % i) for i in range(7)]
    stored = b"".join(encode_entry(e) for e in entries)
    ids = [3, 9, 10, 11, 40, 41, 1000]
    frames, count, largest = publish_frames(2, 1, stored, 13 + 3 * (8 + 4 + 2), ids)
    decoded = [decode_one(frame) for frame in frames]
    assert len(frames) == 3 and (count, largest) == (7, 6)
    items = [m for f in decoded if isinstance(f, Publish) for m in f.messages]
    assert items == [publish_item(i, e) for i, e in zip(ids, entries, strict=True)]
    for wrong in (ids[:-1], [*ids, 1001], [-1, *ids[1:]]):
        with pytest.raises(LocalProtocolError):
            publish_frames(2, 1, stored, 1 << 20, wrong)


def test_a_frame_of_simple_entries_is_kept_as_sent_and_readdressed() -> None:
    wire = client().send(Publish(publisher_id=3, messages=MESSAGES))
    got = decode_one(wire)
    assert isinstance(got, Publish) and isinstance(got.messages, SimpleEntries)
    frame = got.messages.as_sent()
    assert frame == wire[4:]  # the frame after its size prefix, not a copy of its items
    assert sent_entries(frame) == got.messages
    head, rest = readdressed(200, frame, 3)
    assert decode_one(head + bytes(rest)) == Publish(publisher_id=200, messages=MESSAGES)
    for bad in (frame[:-1], frame + b"\0", b"\0\x03\0\x01" + frame[4:], frame[:5]):
        with pytest.raises(RemoteProtocolError):
            sent_entries(bad)
    for bad, count in ((b"\0\x03\0\x01" + frame[4:], 3), (frame, 2), (frame[:8], 3)):
        with pytest.raises(LocalProtocolError):
            readdressed(1, bad, count)  # not a Publish v1 frame, another count, too short


def test_stored_ranges_of_scanned_entries() -> None:
    messages = tuple(PublishedMessage(publishing_id=i, data=b"%d" % i * i) for i in range(9))
    got = decode_one(client().send(Publish(publisher_id=1, messages=messages)))
    assert isinstance(got, Publish) and isinstance(got.messages, SimpleEntries)
    entries = [encode_entry(SimpleEntry(m.data)) for m in messages]
    for a, b in ((0, 9), (0, 4), (4, 9), (3, 3), (8, 9), (2, 20)):
        assert got.messages.stored_range(a, b) == b"".join(entries[a:b])


@pytest.mark.parametrize("overrun", [1, 7, 1000])
def test_an_entry_running_past_the_frame_is_refused(overrun: int) -> None:
    """The last entry's length says more than the frame holds (the scan checks where the
    entries end once, at the end)."""
    items = struct.pack(">QI", 1, 3) + b"abc" + struct.pack(">QI", 2, 4 + overrun) + b"defg"
    body = bytes([0]) + struct.pack(">i", 2) + items
    frame = struct.pack(">IHH", 4 + len(body), 2, 1) + body
    with pytest.raises(RemoteProtocolError):
        decode_one(frame)


def _publish_body(items: list[tuple[int, bytes]]) -> bytes:
    """A Publish v1 frame after its size prefix, items as given (no codec involved)."""
    head = struct.pack(">HHBi", 2, 1, 4, len(items))
    return head + b"".join(struct.pack(">QI", i, len(d)) + d for i, d in items)


@settings(max_examples=300, deadline=None)
@given(
    ids=st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=40),
    size=st.integers(0, 300),
    spread=st.lists(st.integers(-2, 2), min_size=40, max_size=40),
    uniform=st.booleans(),
)
def test_entries_of_one_size_read_as_columns_equal_the_entry_scan(
    ids: list[int], size: int, spread: list[int], uniform: bool
) -> None:
    """Items of one size are read column-wise (ids unpacked in one call); items of several
    sizes by the entry-by-entry scan. Either way the frame decodes to the items sent."""
    sizes = [size if uniform else max(0, size + d) for d in spread[: len(ids)]]
    items = [(i, bytes([n % 251]) * n) for i, n in zip(ids, sizes, strict=True)]
    body = _publish_body(items)
    table = uniform_items(body, PUBLISH_HEAD_SIZE, len(body), len(items))
    one_size = len(set(sizes)) == 1
    assert (table is not None) == (one_size and len(items) >= MIN_ITEMS)
    if table is not None:
        assert table[0] == tuple(ids)
        assert list(table[1]) == [PUBLISH_HEAD_SIZE + k * (12 + size) for k in range(len(ids))]
    got = decode_one(struct.pack(">I", len(body)) + body)
    assert isinstance(got, Publish) and isinstance(got.messages, SimpleEntries)
    messages = tuple(PublishedMessage(publishing_id=i, data=d) for i, d in items)
    assert got.messages.ids == tuple(ids) and tuple(got.messages) == messages
    assert got.messages.stored == b"".join(encode_entry(SimpleEntry(d)) for _, d in items)
    assert got.messages.as_sent() == body
    assert (
        got.messages.stored_range(1, 3)
        == got.messages.stored[(4 + sizes[0]) : sum(4 + n for n in sizes[:3])]
    )


def test_sizes_that_differ_but_fill_a_table_are_scanned_entry_by_entry() -> None:
    """Lengths 3, 5, 4, 4 ... take as many bytes as eight of 4: the column check still sees that
    they differ, and the entries come out as sent."""
    sizes = [3, 5] + [4] * 8
    items = [(k, b"x" * n) for k, n in enumerate(sizes)]
    body = _publish_body(items)
    assert uniform_items(body, PUBLISH_HEAD_SIZE, len(body), len(items)) is None
    got = decode_one(struct.pack(">I", len(body)) + body)
    assert isinstance(got, Publish)
    assert [m.data for m in got.messages] == [d for _, d in items]


@pytest.mark.parametrize("tail", [b"\0", b"", b"\0" * 16])
def test_a_table_of_items_that_does_not_end_with_the_frame_is_not_a_table(tail: bytes) -> None:
    items = [(k, b"abcd") for k in range(10)]
    body = _publish_body(items) + tail
    table = uniform_items(body, PUBLISH_HEAD_SIZE, len(body), len(items))
    assert (table is None) == bool(tail)
    if tail:  # the entry scan words the error: bytes after the entries
        with pytest.raises(RemoteProtocolError):
            decode_one(struct.pack(">I", len(body)) + body)
    # One more item announced than there are: the last runs past the frame.
    body = _publish_body(items)
    short = body[:5] + struct.pack(">i", 11) + body[9:]
    assert uniform_items(short, PUBLISH_HEAD_SIZE, len(short), 11) is None
    with pytest.raises(RemoteProtocolError):
        decode_one(struct.pack(">I", len(short)) + short)


def test_sub_batches_of_one_size_are_not_a_table() -> None:
    """A length with its top bit set is a sub-batch (its flag byte), not a simple entry."""
    items = [(k, b"") for k in range(10)]
    body = bytearray(_publish_body(items))
    for k in range(10):
        body[PUBLISH_HEAD_SIZE + k * 12 + 8] = 0x80
    assert uniform_items(bytes(body), PUBLISH_HEAD_SIZE, len(body), 10) is None
