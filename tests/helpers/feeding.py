"""Feed any sans-I/O decoder three ways and check that they agree (STYLE.md, "Tests").

The three ways are: the whole buffer at once, one byte at a time, and the whole buffer followed
by junk bytes that must be left untouched. A decoder only needs ``receive_data``,
``receive_eof`` and ``next_frame`` returning frames or ``NEED_DATA``; anything more (a terminal
sentinel such as Rog's CONNECTION_CLOSED, how to read unparsed bytes) is passed in.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Collection
from typing import Any, Protocol, TypeVar

from protocols._wire import NEED_DATA

__all__ = ["DEFAULT_JUNK", "CodecFeed", "Decoder", "drain", "feed_in_cuts", "feed_three_ways"]

# Three bytes: shorter than any length-prefixed header we speak (Kafka, RabbitMQ Stream and
# Iggy all start with a 4-byte size), so a multi-frame decoder must wait rather than parse them.
DEFAULT_JUNK = b"\xde\xad\xbe"

# A decoder that keeps returning frames without consuming bytes would loop for ever.
_MAX_FRAMES = 100_000


class Decoder(Protocol):
    def receive_data(self, data: bytes, /) -> None: ...

    def receive_eof(self) -> None: ...

    def next_frame(self) -> object: ...


C = TypeVar("C", bound=Decoder)


class CodecFeed:
    """A protocol codec in the ``Decoder`` shape: bytes and EOF passed to ``codec``, frames from
    its own next-event method (``next_request``, ``next_reply``, ...), and what it left unread."""

    def __init__(self, codec: Any, next_frame: Callable[[], object]) -> None:
        self.codec = codec
        self._next = next_frame

    def receive_data(self, data: bytes, /) -> None:
        self.codec.receive_data(data)

    def receive_eof(self) -> None:
        self.codec.receive_eof()

    def next_frame(self) -> object:
        return self._next()

    @property
    def trailing_data(self) -> bytes:
        return bytes(self.codec.trailing_data)


def drain(codec: Decoder, *, stop_at: Collection[object] = ()) -> list[object]:
    """Every frame ``next_frame()`` gives before ``NEED_DATA`` or a sentinel in ``stop_at``."""
    frames: list[object] = []
    for _ in range(_MAX_FRAMES):
        frame = codec.next_frame()
        if frame is NEED_DATA or any(frame is sentinel for sentinel in stop_at):
            return frames
        frames.append(frame)
    raise AssertionError(f"next_frame() returned {_MAX_FRAMES} frames without stopping")


def feed_in_cuts(codec: Decoder, data: bytes, cuts: Collection[int]) -> list[object]:
    """Every frame of ``data`` fed in pieces of the sizes ``cuts`` (then the rest), drained
    after each piece."""
    frames: list[object] = []
    at = 0
    for cut in [*cuts, len(data)]:
        codec.receive_data(data[at : at + cut])
        at += cut
        frames += drain(codec)
        if at >= len(data):
            break
    return frames


def feed_three_ways(
    make_codec: Callable[[], C],
    data: bytes,
    *,
    eof: bool = False,
    junk: bytes = DEFAULT_JUNK,
    stop_at: Collection[object] = (),
    read_trailing: Callable[[C], bytes] = operator.attrgetter("trailing_data"),
    check_idle: bool = True,
) -> list[object]:
    """Decode ``data`` three ways, assert they agree, and return the frames.

    ``eof`` sends EOF after the data in the first two ways; the junk way never sends it, as a
    decoder may rightly reject junk as a truncated frame at EOF. ``check_idle`` asserts that
    after the frames the junk makes ``next_frame()`` return ``NEED_DATA``; turn it off for a
    decoder that rejects any byte after the last frame it expects (test that rejection apart).
    ``read_trailing`` returns the bytes a codec has not consumed.
    """
    whole = make_codec()
    whole.receive_data(data)
    if eof:
        whole.receive_eof()
    frames = drain(whole, stop_at=stop_at)

    by_byte = make_codec()
    byte_frames: list[object] = []
    for i in range(len(data)):
        by_byte.receive_data(data[i : i + 1])
        byte_frames += drain(by_byte, stop_at=stop_at)
    if eof:
        by_byte.receive_eof()
    byte_frames += drain(by_byte, stop_at=stop_at)
    assert byte_frames == frames, "one byte at a time gave other frames than the whole buffer"

    with_junk = make_codec()
    with_junk.receive_data(data + junk)
    junk_frames = []
    for _ in frames:
        frame = with_junk.next_frame()
        assert frame is not NEED_DATA, "trailing junk hid a frame that the whole buffer gave"
        junk_frames.append(frame)
    assert junk_frames == frames, "trailing junk changed the frames"
    if check_idle:
        assert with_junk.next_frame() is NEED_DATA, "trailing junk was parsed into a frame"
    assert read_trailing(with_junk) == read_trailing(whole) + junk, "trailing junk was consumed"
    return frames
