"""Batches of one frame size are checked and restamped column by column (``columns``): the
result is the frame-by-frame one, every error is still refused with the frame-by-frame words,
and a poll answer sends the stored frames as views (``send_polled``) with the bytes of
``send_ok``."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st
from xxhash import xxh3_64_intdigest

from protocols._wire import LocalProtocolError, RemoteProtocolError
from protocols.iggy import (
    Era,
    IggyServerCodec,
    Message,
    Ping,
    PolledMessages,
    PollingStrategy,
    PollMessages,
)
from protocols.iggy.batch import (
    BATCH_HEADER_SIZE,
    FRAME_HEADER_SIZE,
    _kept_frames,
    decode_batch,
    encode_batch,
    restamp_batch,
    restamp_pieces,
)
from protocols.iggy.columns import uniform_frames
from protocols.iggy.headers import Header, HeaderKind, HeaderValue
from protocols.iggy.identifiers import Consumer, ConsumerKind, PollingKind
from protocols.iggy.sent_batch import _Scan, scan_sent_batch
from protocols.iggy.status import Status
from protocols.iggy.wire import Reader
from tests.protocols.iggy.support import answer, client, decode_one

HEADER = (Header(key=HeaderValue.string("k"), value=HeaderValue.string("v1")),)


def _uniform(
    n: int, size: int = 10, *, headers: bool = False, deltas: list[int] | None = None
) -> bytes:
    messages = [
        Message(
            id=1000 + i,
            payload=bytes([i % 251]) * size,
            headers=HEADER if headers else (),
            origin_timestamp=1_700_000_000_000_000 + 3 * i - (i % 4),
        )
        for i in range(n)
    ]
    return encode_batch(messages, partition_id=0, base_offset=0, base_timestamp=0,
                        offset_deltas=deltas if deltas is not None else range(n))  # fmt: skip


def _scans(data: bytes, count: int) -> tuple[_Scan | None, _Scan]:
    end = len(data)
    table = _Scan.of_table(data, BATCH_HEADER_SIZE, end, count)
    return table, _Scan.of_frames(data, BATCH_HEADER_SIZE, end, count)


@given(
    n=st.integers(1, 40),
    size=st.integers(0, 300),
    headers=st.booleans(),
    shuffled=st.booleans(),
)
def test_the_column_scan_finds_what_the_frame_scan_finds(
    n: int, size: int, headers: bool, shuffled: bool
) -> None:
    deltas = [i + 1 for i in range(n)] if shuffled else None
    data = _uniform(n, size, headers=headers, deltas=deltas)
    table, frames = _scans(data, n)
    assert table is not None
    assert table.__slots__ == frames.__slots__
    got = [getattr(table, name) for name in table.__slots__]
    assert got == [getattr(frames, name) for name in frames.__slots__]
    sent, in_order = scan_sent_batch(Reader(data))
    assert in_order is not shuffled and sent.batch == data
    assert list(sent) == [
        Message(id=m.id, payload=m.payload, headers=m.headers, origin_timestamp=m.origin_timestamp)
        for m in decode_batch(Reader(data), verify=True)
    ]


def test_frames_of_different_sizes_are_not_a_table() -> None:
    messages = [Message(id=i + 1, payload=b"x" * (i + 1), origin_timestamp=5) for i in range(3)]
    data = encode_batch(messages, partition_id=0, base_offset=0, base_timestamp=0,
                        offset_deltas=range(3))  # fmt: skip
    assert uniform_frames(data, BATCH_HEADER_SIZE, len(data), 3) is None
    # Same total size, lengths traded between payload and user headers: not a table either.
    swapped = bytearray(_uniform(2, 20, headers=True))
    second = BATCH_HEADER_SIZE + len(swapped[BATCH_HEADER_SIZE:]) // 2
    swapped[second + 32 : second + 40] = (0).to_bytes(4, "little") + (20 + 13).to_bytes(4, "little")
    assert uniform_frames(bytes(swapped), BATCH_HEADER_SIZE, len(swapped), 2) is None


def _frame_at(i: int, size: int, headers: bool) -> int:
    stride = FRAME_HEADER_SIZE + size + (13 if headers else 0)
    return BATCH_HEADER_SIZE + i * stride


@pytest.mark.parametrize(
    ("at", "match", "status"),
    [
        (8, "message 938 has a wrong checksum", Status.INVALID_MESSAGE_CHECKSUM),  # its id
        (
            FRAME_HEADER_SIZE + 3,
            "message 1002 has a wrong checksum",
            Status.INVALID_MESSAGE_CHECKSUM,
        ),
        (44, "reserved field is not zero", Status.INVALID_FORMAT),
        (0, "message 1002 has a wrong checksum", Status.INVALID_MESSAGE_CHECKSUM),
    ],
)
def test_a_bad_frame_in_a_table_is_refused_as_frame_by_frame(
    at: int, match: str, status: Status
) -> None:
    data = bytearray(_uniform(5, 30))
    data[_frame_at(2, 30, False) + at] ^= 0x40
    with pytest.raises(RemoteProtocolError, match=match) as info:
        scan_sent_batch(Reader(bytes(data)))
    assert info.value.hint == status


@pytest.mark.parametrize(("count", "size"), [(1, 30), (2, 30), (40, 100), (3, 600), (3, 2000)])
def test_every_frame_is_hashed_however_it_is_cut_out(count: int, size: int) -> None:
    """Small frames are hashed from copies, big ones from views of the batch, a lone frame on
    its own: a good batch passes as a table, and the last byte of the last frame changed is
    the wrong checksum of that message."""
    good = _uniform(count, size)
    frames = uniform_frames(good, BATCH_HEADER_SIZE, len(good), count)
    assert frames is not None and frames.verified_checksums() == frames.checksums()
    assert _Scan.of_table(good, BATCH_HEADER_SIZE, len(good), count) is not None
    data = bytearray(good)
    data[_frame_at(count, size, False) - 1] ^= 1
    broken = uniform_frames(bytes(data), BATCH_HEADER_SIZE, len(data), count)
    assert broken is not None and broken.verified_checksums() is None
    with pytest.raises(RemoteProtocolError, match=f"message {999 + count} has a wrong checksum"):
        scan_sent_batch(Reader(bytes(data)))


def test_the_first_bad_frame_is_named() -> None:
    data = bytearray(_uniform(6, 8))
    data[_frame_at(4, 8, False) + 44] = 1  # reserved, later frame
    data[_frame_at(1, 8, False) + 50] ^= 1  # payload, earlier frame: its checksum is wrong
    with pytest.raises(RemoteProtocolError, match="message 1001 has a wrong checksum"):
        scan_sent_batch(Reader(bytes(data)))


def test_bad_user_headers_in_a_table_are_refused() -> None:
    data = bytearray(_uniform(3, 4, headers=True))
    data[_frame_at(1, 4, True) + FRAME_HEADER_SIZE + 4] = 0  # the key's kind: 0 is no kind
    with pytest.raises(RemoteProtocolError, match="header key kind 0"):
        scan_sent_batch(Reader(bytes(data)))


def test_a_wrong_batch_checksum_is_refused_after_a_column_scan() -> None:
    data = bytearray(_uniform(4, 16))
    data[40] ^= 1
    with pytest.raises(RemoteProtocolError) as info:
        scan_sent_batch(Reader(bytes(data)))
    assert info.value.hint == Status.INVALID_BATCH_CHECKSUM


def _reference(data: bytes, skip: int, limit: int | None) -> bytes:
    """The frame-by-frame restamp, as ``restamp_pieces`` did it before columns."""
    total = int.from_bytes(data[48:52], "little")
    end = total if limit is None else min(total, skip + limit)
    first, last, checksums, count = _kept_frames(data, skip, end)
    if not count:
        return b""
    fields = struct.pack("<QQQQQ", 9, 700, 42, int.from_bytes(data[24:32], "little"),
                         BATCH_HEADER_SIZE + last - first)  # fmt: skip
    count_raw = struct.pack("<I", count)
    checksum = xxh3_64_intdigest(fields + count_raw + checksums)
    return b"".join((fields, struct.pack("<Q", checksum), count_raw, bytes(204), data[first:last]))


@pytest.mark.parametrize("headers", [False, True])
@pytest.mark.parametrize(
    ("skip", "limit"), [(0, None), (0, 7), (3, None), (2, 3), (6, 4), (7, 1), (9, None), (0, 0)]
)
def test_a_table_is_restamped_as_frame_by_frame(
    skip: int, limit: int | None, headers: bool
) -> None:
    data = _uniform(7, 25, headers=headers)
    assert uniform_frames(data, BATCH_HEADER_SIZE, len(data), 7) is not None
    pieces, count = restamp_pieces(
        data, partition_id=9, base_offset=700, base_timestamp=42, skip=skip, limit=limit
    )
    joined = b"".join(pieces)
    assert joined == _reference(data, skip, limit)
    assert count == len(decode_batch(Reader(joined), verify=True)) if joined else count == 0
    assert pieces == () or isinstance(pieces[1], memoryview)  # the frames are not copied
    assert restamp_batch(
        data, partition_id=9, base_offset=700, base_timestamp=42, skip=skip, limit=limit
    ) == (joined, count)


POLL = PollMessages(
    consumer=Consumer(kind=ConsumerKind.CONSUMER, id=1),
    stream_id=1,
    topic_id=1,
    partition_id=0,
    strategy=PollingStrategy(kind=PollingKind.OFFSET, value=0),
    count=10,
    auto_commit=False,
)


def test_a_poll_answer_in_pieces_is_the_answer_in_one_piece() -> None:
    data = _uniform(5, 40)
    pieces, count = restamp_pieces(data, partition_id=0, base_offset=10, base_timestamp=3)
    extra = Message(id=77, payload=b"translated", offset=15, timestamp=4, origin_timestamp=4)
    body = PolledMessages(partition_id=0, current_offset=15, messages=(extra,), batches=pieces,
                          batches_count=count)  # fmt: skip
    server_request = decode_one(client().send(POLL), Era.C)
    assert server_request.command == POLL
    server = IggyServerCodec()
    gathered = server.send_polled(server_request, body)
    joined = b"".join(gathered.pieces)
    assert gathered.nbytes == len(joined)
    assert joined == server.send_ok(server_request, body)
    reply = answer(POLL, joined)
    assert isinstance(reply.body, PolledMessages)
    assert [m.offset for m in reply.body.messages] == [15, 10, 11, 12, 13, 14]


def test_send_polled_answers_a_poll_only() -> None:
    request = decode_one(client().send(Ping()), Era.C)
    with pytest.raises(LocalProtocolError):
        IggyServerCodec().send_polled(request, PolledMessages(partition_id=0, current_offset=0))


def test_a_legacy_poll_answer_is_one_piece() -> None:
    request = decode_one(client(Era.B).send(POLL), Era.B)
    message = Message(id=5, payload=b"p", offset=1, timestamp=2, origin_timestamp=2)
    body = PolledMessages(partition_id=0, current_offset=1, messages=(message,))
    server = IggyServerCodec()
    gathered = server.send_polled(request, body)
    assert len(gathered.pieces) == 1
    assert gathered.pieces[0] == server.send_ok(request, body)


def test_header_kinds_are_kept_in_a_table() -> None:
    value = HeaderValue(kind=HeaderKind.UINT32, value=b"\x01\0\0\0")
    header = (Header(key=HeaderValue.string("n"), value=value),)
    messages = [
        Message(id=i + 1, payload=b"abc", headers=header, origin_timestamp=9) for i in range(4)
    ]
    data = encode_batch(messages, partition_id=0, base_offset=0, base_timestamp=0,
                        offset_deltas=range(4))  # fmt: skip
    sent, _ = scan_sent_batch(Reader(data))
    assert [m.headers for m in sent] == [header] * 4


def test_a_batch_larger_than_the_cached_shapes_is_scanned_the_same() -> None:
    n = 10_050  # over columns._CACHED_COUNT: slices and indexes built for this batch only
    data = _uniform(n, 1)
    table, frames = _scans(data, n)
    assert table is not None
    assert [getattr(table, name) for name in table.__slots__] == [
        getattr(frames, name) for name in frames.__slots__
    ]
    assert table.in_order
