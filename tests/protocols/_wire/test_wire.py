"""The shared wire layer: ReceiveBuffer's commit/rollback contract and the varint primitives."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocols._wire import (
    FrameTooLarge,
    ReceiveBuffer,
    RemoteProtocolError,
    column,
    decode_uvarint,
    decode_uvarlong,
    decode_varint,
    decode_varlong,
    encode_uvarint,
    encode_varint,
    same_in_every,
)

FAST = settings(max_examples=150, deadline=None)
Decode = Callable[[bytes, int], tuple[int, int]]

# --- ReceiveBuffer ----------------------------------------------------------------------------


def test_consume_takes_nothing_when_short() -> None:
    buffer = ReceiveBuffer(max_frame_size=100)
    buffer.feed(b"abc")
    assert buffer.consume_exactly(4) is None
    assert len(buffer) == 3
    assert buffer.consume_exactly(3) == b"abc"
    assert len(buffer) == 0


def test_rollback_restarts_the_frame_and_commit_drops_it() -> None:
    buffer = ReceiveBuffer(max_frame_size=100)
    buffer.feed(b"\x03ab")
    assert buffer.consume_exactly(1) == b"\x03"
    assert buffer.consume_exactly(3) is None  # body incomplete
    buffer.rollback()
    assert len(buffer) == 3 and buffer.pending == 3

    buffer.feed(b"cXY")
    assert buffer.consume_exactly(1) == b"\x03"
    assert buffer.consume_exactly(3) == b"abc"
    buffer.commit()
    assert buffer.pending == 2
    assert buffer.peek(2) == b"XY"
    buffer.rollback()  # a rollback after a commit goes back to the commit, not further
    assert buffer.consume_exactly(2) == b"XY"


def test_peek_does_not_consume() -> None:
    buffer = ReceiveBuffer(max_frame_size=100)
    buffer.feed(b"hello")
    assert buffer.peek(6) is None
    assert buffer.peek(2) == b"he"
    assert buffer.consume_exactly(4) == b"hell"
    assert buffer.consume_exactly(2) is None
    assert len(buffer) == 1


def test_commit_compacts_large_prefixes_without_losing_bytes() -> None:
    buffer = ReceiveBuffer(max_frame_size=1 << 20)
    frame = bytes(70_000)
    buffer.feed(frame + b"next")
    assert buffer.consume_exactly(len(frame)) == frame
    buffer.commit()
    assert buffer.pending == 4
    buffer.feed(b"!")
    assert buffer.consume_exactly(5) == b"next!"


def test_take_all_returns_everything_uncommitted_and_empties() -> None:
    buffer = ReceiveBuffer(max_frame_size=100)
    buffer.feed(b"AAtail")
    buffer.consume_exactly(2)
    buffer.commit()
    buffer.consume_exactly(1)  # a parse in progress does not hide its bytes from take_all
    assert buffer.take_all() == b"tail"
    assert len(buffer) == 0 and buffer.pending == 0
    assert buffer.take_all() == b""


@pytest.mark.parametrize("declared", [101, 2**62, 2**64 - 1, -1])
def test_check_size_refuses_before_allocating(declared: int) -> None:
    buffer = ReceiveBuffer(max_frame_size=100)
    buffer.feed(b"header")
    tracemalloc.start()
    try:
        with pytest.raises(FrameTooLarge) as info:
            buffer.check_size(declared, hint="refusal")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024
    assert (info.value.declared, info.value.maximum, info.value.hint) == (declared, 100, "refusal")
    assert isinstance(info.value, RemoteProtocolError)
    assert len(buffer) == 6  # nothing consumed


def test_check_size_accepts_the_maximum() -> None:
    buffer = ReceiveBuffer(max_frame_size=100)
    buffer.check_size(100)
    buffer.check_size(0)


def _parse_frames(buffer: ReceiveBuffer, pieces: int = 1) -> list[bytes]:
    """A codec's loop over ``uint32 size`` + body frames: peek, consume, commit or roll back.
    The body is read in ``pieces`` consumes (as codecs read fields one after the other)."""
    frames: list[bytes] = []
    while True:
        prefix = buffer.peek(4)
        if prefix is None:
            return frames
        size = int.from_bytes(prefix, "big")
        assert buffer.consume_exactly(4) == prefix
        step = max(1, size // pieces)
        taken = [buffer.consume_exactly(min(step, size - at)) for at in range(0, size, step)]
        if any(piece is None for piece in taken):
            buffer.rollback()
            return frames
        frames.append(b"".join(p for p in taken if p is not None))
        buffer.commit()


@settings(max_examples=300, deadline=None)
@given(
    sizes=st.lists(st.sampled_from([0, 1, 5, 4095, 4096, 5000, 70_000]), max_size=8),
    cuts=st.lists(st.integers(min_value=1, max_value=90_000), max_size=30),
    pieces=st.sampled_from([1, 2, 7]),
)
def test_frames_come_out_whole_however_the_bytes_are_cut(
    sizes: list[int], cuts: list[int], pieces: int
) -> None:
    """Chunks big and small, fed mid-frame (kept aside as they came) or between frames, a body
    read at once or in pieces: every frame comes out byte for byte, and what is left is the
    unfinished frame."""
    frames = [bytes([i % 251]) * size + bytes([i]) for i, size in enumerate(sizes)]
    stream = b"".join(len(f).to_bytes(4, "big") + f for f in frames)
    buffer = ReceiveBuffer(max_frame_size=1 << 20)
    got: list[bytes] = []
    pos = 0
    for cut in [*cuts, len(stream)]:
        chunk, pos = stream[pos : pos + cut], pos + cut
        if chunk:
            buffer.feed(chunk)
            got += _parse_frames(buffer, pieces)
    assert got == frames
    assert len(buffer) == 0 and buffer.pending == 0 and buffer.unparsed() == b""


def test_a_frame_fed_in_pieces_keeps_what_follows_it() -> None:
    buffer = ReceiveBuffer(max_frame_size=1 << 20)
    body = bytes(range(256)) * 40  # 10,240 bytes
    buffer.feed(len(body).to_bytes(4, "big") + body[:100])
    assert _parse_frames(buffer) == []
    buffer.feed(body[100:6000])  # mid-frame and big: kept aside
    buffer.feed(body[6000:] + b"\0\0\0\x05hel")  # the frame's end and the next frame's start
    assert buffer.pending == 4 + len(body) + 7
    assert _parse_frames(buffer) == [body]
    assert (len(buffer), buffer.unparsed()) == (7, b"\0\0\0\x05hel")
    buffer.feed(b"lo")
    assert _parse_frames(buffer) == [b"hello"]


# --- varints ----------------------------------------------------------------------------------

GOLDEN_UVARINT = [(0, "00"), (1, "01"), (127, "7f"), (128, "8001"), (300, "ac02")]
GOLDEN_ZIGZAG = [
    (0, "00"),
    (-1, "01"),
    (1, "02"),
    (-2, "03"),
    (2**31 - 1, "feffffff0f"),
    (-(2**31), "ffffffff0f"),
    (2**63 - 1, "feffffffffffffffff01"),
    (-(2**63), "ffffffffffffffffff01"),
]


@pytest.mark.parametrize(("value", "wire"), GOLDEN_UVARINT)
def test_uvarint_golden(value: int, wire: str) -> None:
    assert encode_uvarint(value) == bytes.fromhex(wire)
    assert decode_uvarint(bytes.fromhex(wire)) == (value, len(wire) // 2)


@pytest.mark.parametrize(("value", "wire"), GOLDEN_ZIGZAG)
def test_zigzag_golden(value: int, wire: str) -> None:
    assert encode_varint(value) == bytes.fromhex(wire)
    assert decode_varlong(bytes.fromhex(wire)) == (value, len(wire) // 2)


def _round_trip(decode: Decode, wire: bytes, prefix: bytes, suffix: bytes) -> int:
    value, end = decode(prefix + wire + suffix, len(prefix))
    assert end == len(prefix) + len(wire)  # stops at the last byte, whatever follows
    return value


@FAST
@given(st.integers(0, 2**32 - 1), st.binary(max_size=3), st.binary(max_size=3))
def test_uvarint_round_trip(value: int, prefix: bytes, suffix: bytes) -> None:
    assert _round_trip(decode_uvarint, encode_uvarint(value), prefix, suffix) == value


@FAST
@given(st.integers(0, 2**64 - 1), st.binary(max_size=3), st.binary(max_size=3))
def test_uvarlong_round_trip(value: int, prefix: bytes, suffix: bytes) -> None:
    assert _round_trip(decode_uvarlong, encode_uvarint(value), prefix, suffix) == value


@FAST
@given(st.integers(-(2**31), 2**31 - 1), st.binary(max_size=3), st.binary(max_size=3))
def test_varint_round_trip(value: int, prefix: bytes, suffix: bytes) -> None:
    assert _round_trip(decode_varint, encode_varint(value), prefix, suffix) == value


@FAST
@given(st.integers(-(2**63), 2**63 - 1), st.binary(max_size=3), st.binary(max_size=3))
def test_varlong_round_trip(value: int, prefix: bytes, suffix: bytes) -> None:
    assert _round_trip(decode_varlong, encode_varint(value), prefix, suffix) == value


@FAST
@given(st.integers(0, 2**64 - 1), st.data())
def test_truncated_varint_raises(value: int, data: st.DataObject) -> None:
    wire = encode_uvarint(value)
    cut = data.draw(st.integers(0, len(wire) - 1))
    with pytest.raises(RemoteProtocolError, match="truncated"):
        decode_uvarlong(wire[:cut])


@pytest.mark.parametrize(
    ("decode", "limit"),
    [(decode_uvarint, 5), (decode_varint, 5), (decode_uvarlong, 10), (decode_varlong, 10)],
)
def test_overlong_varint_raises(decode: Decode, limit: int) -> None:
    ok = b"\x80" * (limit - 1) + b"\x00"  # redundant zero groups are legal up to the limit
    assert decode(ok, 0) == (0, limit)
    with pytest.raises(RemoteProtocolError, match="longer than"):
        decode(b"\x80" * limit + b"\x00", 0)


def test_negative_uvarint_is_refused() -> None:
    with pytest.raises(ValueError):
        encode_uvarint(-1)


# --- columns ----------------------------------------------------------------------------------


@FAST
@given(
    stride=st.sampled_from([1, 2, 3, 4, 6, 8, 12, 16, 24]),
    data=st.data(),
    prefix=st.binary(max_size=9),
)
def test_a_column_is_the_field_of_every_record(
    stride: int, data: st.DataObject, prefix: bytes
) -> None:
    """Records of ``stride`` bytes after a prefix (any alignment), alike but for a few bytes
    changed: the field at ``at`` of each, one after the other, against a Python loop;
    same_in_every against a set. Strides and widths of 2, 4 and 8 take the wider units."""
    at = data.draw(st.integers(0, stride - 1))
    width = data.draw(
        st.sampled_from(sorted({1, 2, 4, 8, stride - at} & set(range(1, stride - at + 1))))
    )
    one = data.draw(st.binary(min_size=stride, max_size=stride))
    records = [bytearray(one) for _ in range(data.draw(st.integers(1, 30)))]
    # A few bytes changed here and there: inside the field or not, in one record or several.
    changes = st.tuples(st.integers(0, len(records) - 1), st.integers(0, stride - 1),
                        st.integers(0, 255))  # fmt: skip
    for record, pos, value in data.draw(st.lists(changes, max_size=3)):
        records[record][pos] = value
    raw = prefix + b"".join(records)
    begin, stop = len(prefix) + at, len(raw)
    fields = [bytes(r[at : at + width]) for r in records]
    assert column(raw, begin, stop, stride, width) == b"".join(fields)
    assert same_in_every(raw, begin, stop, stride, width) == (len(set(fields)) == 1)
