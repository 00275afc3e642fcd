"""``Receiver.missing``: what a codec stopped short inside a frame still waits for. A listener
sets its socket's receive low-water mark from it (gateway/gathered.py ``WakeWhole``), so it must
never be more than the frame's bytes still to come (the reader would wait for bytes that are not
coming), and is exact once the frame's size is known."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocols._wire import NEED_DATA, ReceiveBuffer, Receiver, RemoteProtocolError
from protocols.iggy import Era, UnknownCommand
from protocols.kafka.framing import KafkaServerCodec
from protocols.rabbitmq_stream import RabbitStreamClientCodec, RabbitStreamServerCodec
from protocols.rog import Publish, RogClientCodec, RogServerCodec
from tests.protocols.iggy.support import client as iggy_client
from tests.protocols.iggy.support import server as iggy_server

MAX = 4 << 20
BIG = 300_000


def _kafka() -> tuple[Receiver, bytes]:
    return KafkaServerCodec({}, max_frame_size=MAX), struct.pack(">i", BIG) + bytes(BIG)


def _rabbitmq(server: bool) -> tuple[Receiver, bytes]:
    codec = RabbitStreamServerCodec(MAX) if server else RabbitStreamClientCodec(MAX)
    return codec, struct.pack(">I", BIG) + bytes(BIG)


def _iggy(era: Era) -> tuple[Receiver, bytes]:
    frame = iggy_client(era).send(UnknownCommand(code=999, payload=bytes(BIG)))
    server = iggy_server(Era.B)
    server.max_frame_size = MAX
    return server, frame


def _rog() -> tuple[Receiver, bytes]:
    frame = RogClientCodec().send(Publish(name="orders", partition=0, data=bytes(BIG)))
    return RogServerCodec(max_frame_size=MAX), frame


CODECS = {
    "kafka": _kafka,
    "rabbitmq_stream server": lambda: _rabbitmq(True),
    "rabbitmq_stream client": lambda: _rabbitmq(False),
    "iggy current": lambda: _iggy(Era.C),
    "iggy classic": lambda: _iggy(Era.B),
    "rog": _rog,
}


def _parse(codec: Receiver) -> object:
    for name in ("next_request", "next_frame"):
        if hasattr(codec, name):
            return getattr(codec, name)()
    raise AssertionError(f"{type(codec).__name__} has no parse method")


@pytest.mark.parametrize("name", list(CODECS))
@settings(max_examples=40, deadline=None)
@given(cuts=st.lists(st.integers(1, 20_000), min_size=1, max_size=6), head_only=st.booleans())
def test_missing_is_what_the_frame_still_needs(name: str, cuts: list[int], head_only: bool) -> None:
    codec, frame = CODECS[name]()
    size_known = 300  # past every one of these frames' headers and size fields
    fed = 0
    for cut in cuts if not head_only else [min(cuts[0], 8)]:
        chunk = frame[fed : fed + cut]
        codec.receive_data(chunk)
        fed += len(chunk)
        assert _parse(codec) is NEED_DATA
        still = len(frame) - fed
        assert 0 <= codec.missing <= still  # never more than is coming (0: not known)
        if fed >= size_known:
            assert codec.missing == still
    codec.receive_data(frame[fed:])
    # Once it is all there: the frame, or its refusal (the Kafka and RabbitMQ ones are zeros).
    with contextlib.suppress(RemoteProtocolError):
        assert _parse(codec) is not NEED_DATA
    assert codec.missing == 0


def test_the_buffer_keeps_what_a_short_read_waited_for() -> None:
    buffer = ReceiveBuffer(max_frame_size=100)
    assert buffer.missing == 0
    buffer.feed(b"abc")
    assert buffer.peek(5) is None and buffer.missing == 2
    assert not buffer.available(10) and buffer.missing == 7
    assert buffer.available(3)
    assert buffer.consume_exactly(1) == b"a"
    assert buffer.consume_exactly(12) is None and buffer.missing == 10
    buffer.feed(b"defg")  # what came counts off it
    assert buffer.missing == 6
    buffer.feed(b"h" * 10)
    assert buffer.missing == 0
    assert buffer.consume_exactly(12) is not None
    buffer.commit()
    assert buffer.missing == 0


def test_between_frames_nothing_is_missing() -> None:
    codec = RabbitStreamServerCodec(MAX)
    codec.receive_data(struct.pack(">I", 10))
    assert codec.next_frame() is NEED_DATA and codec.missing == 10
    codec.receive_data(bytes(10) + struct.pack(">I", 5))  # the frame, and the next's size
    with pytest.raises(RemoteProtocolError):  # ten zeros are no frame it knows (taken anyway)
        codec.next_frame()
    assert codec.next_frame() is NEED_DATA and codec.missing == 5


@pytest.mark.parametrize("name", [name for name in CODECS if name != "rog"])
def test_reading_what_a_codec_wants_ends_at_the_frame_end(name: str) -> None:
    """Between frames ``wants`` is the head a frame starts with; reading exactly it, then
    exactly ``missing``, never takes a byte of the frame after and takes the frame in a few
    reads (what a listener does after a big frame: gateway/listeners/connection.py). (Rog
    takes one request a connection: there is no frame after a big one.)"""
    codec, frame = CODECS[name]()
    codec.receive_data(frame)
    with contextlib.suppress(RemoteProtocolError):  # the first frame sets the framing
        _parse(codec)
    reads: list[int] = []
    while True:
        with contextlib.suppress(RemoteProtocolError):
            if _parse(codec) is not NEED_DATA:
                break
        if sum(reads) == len(frame):  # taken (refused: Kafka's and RabbitMQ's are zeros)
            break
        want = codec.wants if not codec.buffered else codec.missing
        assert 0 < want <= len(frame) - sum(reads), reads
        codec.receive_data(frame[sum(reads) : sum(reads) + want])
        reads.append(want)
    assert sum(reads) == len(frame) and len(reads) <= 3, reads
    assert reads[-1] >= BIG - 300  # the body: one read
