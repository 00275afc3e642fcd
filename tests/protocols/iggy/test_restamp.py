"""Serving a stored producer batch: ``restamp_batch`` keeps the frames byte for byte, stamps the
header, trims from either end and recomputes the batch checksum (iggy.md §6.1, §6.3); the
SendMessages decoder keeps the sent batch only when a store can serve it as it is."""

from __future__ import annotations

import pytest

from protocols._wire import RemoteProtocolError
from protocols.iggy import Era, Message, PartitionId, SendMessages
from protocols.iggy.batch import BATCH_HEADER_SIZE, decode_batch, encode_batch, restamp_batch
from protocols.iggy.commands import decode_request_body, encode_request_body
from protocols.iggy.headers import Header, HeaderValue
from protocols.iggy.wire import Reader

SENT = [
    Message(
        id=100 + i,
        payload=b"payload %d" % i,
        headers=(Header(key=HeaderValue.string("k"), value=HeaderValue.string(f"v{i}")),)
        if i % 2
        else (),
        origin_timestamp=1_700_000_000_000_000 + i * 7,
    )
    for i in range(6)
]
PRODUCED = encode_batch(SENT, partition_id=0, base_offset=0, base_timestamp=0,
                        offset_deltas=range(len(SENT)))  # fmt: skip


def served(skip: int, limit: int | None) -> tuple[list[Message], int]:
    data, count = restamp_batch(
        PRODUCED, partition_id=4, base_offset=1000, base_timestamp=55, skip=skip, limit=limit
    )
    return decode_batch(Reader(data), verify=True), count


@pytest.mark.parametrize(("skip", "limit"), [(0, None), (0, 6), (2, None), (1, 3), (5, 10)])
def test_kept_frames_decode_with_their_offsets_and_checksums(skip: int, limit: int | None) -> None:
    messages, count = served(skip, limit)
    expected = SENT[skip : None if limit is None else skip + limit]
    assert count == len(expected) == len(messages)
    for got, sent, offset in zip(messages, expected, range(1000 + skip, 2000), strict=False):
        assert (got.id, got.payload, got.headers) == (sent.id, sent.payload, sent.headers)
        assert got.offset == offset
        assert got.timestamp == 55
        assert got.origin_timestamp == sent.origin_timestamp


def test_untrimmed_batch_keeps_every_frame_byte() -> None:
    data, count = restamp_batch(PRODUCED, partition_id=0, base_offset=7, base_timestamp=9)
    assert count == len(SENT)
    assert data[BATCH_HEADER_SIZE:] == PRODUCED[BATCH_HEADER_SIZE:]
    assert int.from_bytes(data[8:16], "little") == 7


def test_nothing_left_after_skip() -> None:
    assert restamp_batch(PRODUCED, partition_id=0, base_offset=0, base_timestamp=0, skip=6) == (
        b"",
        0,
    )


def test_a_cut_stored_batch_is_refused() -> None:
    with pytest.raises(RemoteProtocolError):
        restamp_batch(PRODUCED[:-3], partition_id=0, base_offset=0, base_timestamp=0)
    with pytest.raises(RemoteProtocolError):
        restamp_batch(PRODUCED[:100], partition_id=0, base_offset=0, base_timestamp=0)


def _send_body(batch: bytes, count: int) -> bytes:
    head = encode_request_body(
        SendMessages(stream_id="s", topic_id="t", partitioning=PartitionId(id=0),
                     messages=tuple(SENT)),
        Era.C,
    )  # fmt: skip
    meta_end = 4 + int.from_bytes(head[:4], "little")
    return head[: meta_end - 4] + count.to_bytes(4, "little") + batch


def test_send_decoder_keeps_the_batch_as_sent() -> None:
    cmd = decode_request_body(101, _send_body(PRODUCED, len(SENT)), Era.C)
    assert isinstance(cmd, SendMessages)
    assert cmd.batch == PRODUCED
    assert [m.payload for m in cmd.messages] == [m.payload for m in SENT]


def test_send_decoder_drops_the_batch_when_deltas_are_not_0_to_n() -> None:
    shuffled = encode_batch(SENT, partition_id=0, base_offset=0, base_timestamp=0,
                            offset_deltas=[0, 1, 2, 4, 5, 6])  # fmt: skip
    cmd = decode_request_body(101, _send_body(shuffled, len(SENT)), Era.C)
    assert isinstance(cmd, SendMessages) and cmd.batch == b""
