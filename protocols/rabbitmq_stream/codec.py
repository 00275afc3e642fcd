"""Sans-I/O RabbitMQ Stream codecs: ``RabbitStreamServerCodec`` for the gateway's listener and
``RabbitStreamClientCodec`` for talking to a RabbitMQ server (rabbitmq-stream.md §2, §12).

Both parse ``uint32 size`` + frame. The size is checked against ``max_frame_size`` before the
body is waited for; after Tune the caller sets the negotiated value (§7). A frame whose body
cannot be decoded is consumed before RemoteProtocolError is raised, so the caller can answer
``Close(exc.hint)`` and keep reading until the peer's CloseResponse, as the server does (§5).
A frame that is too large (hint 0x0e) or a connection closed inside a frame ends the
connection: the codec cannot go on after those.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from protocols._wire import (
    U32_BE,
    ConnectionClosed,
    LocalProtocolError,
    NeedData,
    Receiver,
)

from .codes import ResponseCode
from .commands import (
    CLIENT_FRAMES,
    HEADER_SIZE,
    SERVER_FRAMES,
    Decoding,
    decode_frame,
    encode_frame,
)
from .frame import Frame

__all__ = ["DEFAULT_MAX_FRAME_SIZE", "RabbitStreamClientCodec", "RabbitStreamServerCodec"]

# The server's default frame_max (§1.2). It counts the bytes after the size prefix: a peer that
# sizes whole frames by frame_max stays within it either way.
DEFAULT_MAX_FRAME_SIZE: Final = 1_048_576


class _Codec(Receiver):
    __slots__ = ()

    _receives: Mapping[int, Decoding]
    _sends: Mapping[int, Decoding]

    @property
    def max_frame_size(self) -> int:
        return self._buffer.max_frame_size

    @max_frame_size.setter
    def max_frame_size(self, value: int) -> None:
        """Tune's frame_max once negotiated; Tune's 0 ("unlimited") is for the caller to map
        onto its own cap."""
        if value < HEADER_SIZE:
            raise LocalProtocolError(f"max frame size {value} leaves no room for a header")
        self._buffer.max_frame_size = value

    def next_frame(self) -> Frame | NeedData | ConnectionClosed:
        buffer = self._buffer
        prefix = buffer.peek(4)
        if prefix is None:
            return self._idle("frame")
        (size,) = U32_BE.unpack(prefix)
        buffer.check_size(size, hint=ResponseCode.FRAME_TOO_LARGE)
        if not buffer.available(4 + size):
            return self._idle("frame")
        buffer.consume_exactly(4)
        data = buffer.consume_exactly(size)
        assert data is not None
        buffer.commit()  # consumed even if it cannot be decoded (see the module docstring)
        return decode_frame(data, self._receives)

    def send(self, frame: Frame) -> bytes:
        return encode_frame(frame, self._sends)


class RabbitStreamServerCodec(_Codec):
    """The server role: decodes what clients send, encodes what servers send."""

    __slots__ = ()

    _receives = CLIENT_FRAMES
    _sends = SERVER_FRAMES

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        super().__init__(max_frame_size)


class RabbitStreamClientCodec(_Codec):
    """The client role (a RabbitMQ backend): decodes what servers send, encodes what clients
    send."""

    __slots__ = ()

    _receives = SERVER_FRAMES
    _sends = CLIENT_FRAMES

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        super().__init__(max_frame_size)
