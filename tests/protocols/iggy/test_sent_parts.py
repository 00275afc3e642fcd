"""A big SendMessages taken in two parts by the server codec (``SentParts``): read as a listener
reads after a big frame (what the codec asks for each time, gateway/gathered.py ``ExactReads``),
the batch stored is the very bytes object read, not a copy cut out of the body; however the
bytes arrive, the request decodes as the contiguous one does, and a bad one is refused as it
was before."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocols._wire import NEED_DATA, RemoteProtocolError
from protocols.iggy import IggyRequest, IggyServerCodec
from protocols.iggy.body_messages import SPLIT_SEND_FROM
from protocols.iggy.frames_messages import Message, SendMessages
from protocols.iggy.frames_system import Ping, UnknownCommand
from protocols.iggy.identifiers import PartitionId
from protocols.iggy.status import Status
from protocols.iggy.vsr import HEADER_SIZE
from tests.helpers.feeding import CodecFeed, feed_in_cuts

from .support import client, server

BATCH_HEADER = 256
FRAME_HEADER = 48


def _send(count: int, size: int, stream: int | str = "orders") -> SendMessages:
    messages = tuple(
        Message(id=i + 1, payload=bytes([i % 251]) * size, origin_timestamp=1_000 + i)
        for i in range(count)
    )
    return SendMessages(stream_id=stream, topic_id=7, partitioning=PartitionId(id=3),
                        messages=messages)  # fmt: skip


def _feed_as_asked(codec: IggyServerCodec, frame: bytes) -> tuple[object, list[bytes]]:
    """``frame`` after a Ping (the framing decided, the codec knows what a frame starts
    with), each read exactly what the codec asks for next."""
    codec.receive_data(client().send(Ping()))
    assert isinstance(codec.next_request(), IggyRequest)
    reads: list[bytes] = []
    at = 0
    while True:
        got = codec.next_request()
        if got is not NEED_DATA:
            return got, reads
        want = codec.wants if not codec.buffered else codec.missing
        assert 0 < want <= len(frame) - at
        reads.append(frame[at : at + want])
        codec.receive_data(reads[-1])
        at += want


def _whole(frame: bytes) -> SendMessages:
    codec = server()
    codec.receive_data(frame)
    got = codec.next_request()
    assert isinstance(got, IggyRequest) and isinstance(got.command, SendMessages)
    return got.command


@pytest.mark.parametrize("stream", ["orders", 12])
def test_read_as_asked_the_batch_is_the_read_itself(stream: int | str) -> None:
    sent = _send(200, 1000, stream)
    frame = client().send(sent)
    assert len(frame) - HEADER_SIZE >= SPLIT_SEND_FROM
    got, reads = _feed_as_asked(server(), frame)
    assert isinstance(got, IggyRequest) and isinstance(got.command, SendMessages)
    command = got.command
    # The header, the metadata length, the metadata, the batch: one read each.
    assert [len(r) for r in reads][:2] == [HEADER_SIZE, 4] and len(reads) == 4
    assert reads[-1] is command.batch  # kept as read: no copy
    assert command.batch == frame[-len(command.batch) :]
    assert len(command.batch) == BATCH_HEADER + 200 * (FRAME_HEADER + 1000)
    assert command.stream_id == stream and command.topic_id == 7
    assert command.partitioning == PartitionId(id=3)
    assert list(command.messages) == list(sent.messages)
    whole = _whole(frame)
    assert whole == command and whole.batch == command.batch


def test_small_sends_are_taken_whole() -> None:
    frame = client().send(_send(10, 100))
    got, reads = _feed_as_asked(server(), frame)
    assert isinstance(got, IggyRequest) and isinstance(got.command, SendMessages)
    assert [len(r) for r in reads] == [HEADER_SIZE, len(frame) - HEADER_SIZE]


@settings(max_examples=40, deadline=None)
@given(cuts=st.lists(st.integers(1, 70_000), max_size=8), after=st.booleans())
def test_in_any_pieces_a_big_send_decodes_as_the_whole_one(cuts: list[int], after: bool) -> None:
    """However a big send's bytes are cut (and with a small request after it), the codec gives
    the send the contiguous frame decodes to, then the small one."""
    producer = client()
    sent = _send(90, 1000)
    big = producer.send(sent)
    data = big + (producer.send(_send(2, 5)) if after else b"")
    codec = server()
    got = feed_in_cuts(CodecFeed(codec, codec.next_request), data, cuts)
    assert len(got) == 1 + after
    first = got[0]
    assert isinstance(first, IggyRequest) and isinstance(first.command, SendMessages)
    assert list(first.command.messages) == list(sent.messages)
    assert len(first.command.batch) == BATCH_HEADER + 90 * (FRAME_HEADER + 1000)
    assert first.command.batch == big[-len(first.command.batch) :]
    if after:
        second = got[1]
        assert isinstance(second, IggyRequest) and isinstance(second.command, SendMessages)
        assert [m.payload for m in second.command.messages] == [b"\x00" * 5, b"\x01" * 5]
    assert not codec.buffered


def _refused(frame: bytes) -> tuple[RemoteProtocolError, IggyRequest | None]:
    codec = server()
    codec.receive_data(frame)
    with pytest.raises(RemoteProtocolError) as refused:
        codec.next_request()
    return refused.value, codec.rejected


@pytest.mark.parametrize(
    ("where", "status"),
    [
        ("checksum", Status.INVALID_MESSAGE_CHECKSUM),
        ("count", Status.INVALID_MESSAGES_COUNT),
        ("metadata", None),
    ],
)
def test_a_bad_big_send_is_refused_as_a_whole_one_is(where: str, status: Status | None) -> None:
    frame = bytearray(client().send(_send(100, 1000)))
    body = HEADER_SIZE
    if where == "checksum":
        frame[-1] ^= 0xFF  # the last message's payload: its checksum no longer matches
    elif where == "count":
        metadata = int.from_bytes(frame[body : body + 4], "little")
        frame[body + metadata] += 1  # messages_count (the metadata's last u32)
    else:
        frame[body : body + 4] = (10**6).to_bytes(4, "little")  # past any batch
    error, rejected = _refused(bytes(frame))
    if status is not None:
        assert error.hint == status
    assert rejected is not None and isinstance(rejected.command, UnknownCommand)
    assert rejected.command.payload == bytes(frame[HEADER_SIZE:])  # the whole body, as before
