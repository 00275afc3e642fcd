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

import struct
from collections.abc import Mapping
from typing import Final

from protocols._wire import (
    U32_BE,
    ConnectionClosed,
    LocalProtocolError,
    NeedData,
    Receiver,
)

from .chunk import HEADER_SIZE as CHUNK_HEADER_SIZE
from .chunk import ChunkParts
from .codes import Key, ResponseCode
from .commands import (
    CLIENT_FRAMES,
    HEADER_SIZE,
    SERVER_FRAMES,
    Decoding,
    decode_frame,
    encode_frame,
)
from .frame import Frame
from .frames_consume import Deliver

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
    send. A big Deliver (``SPLIT_DELIVER_FROM`` bytes or more) is taken in parts: its head
    (key to chunk header), the chunk's data section, its trailer; a reader that reads what the
    codec asks for (gateway/gathered.py ``ExactReads``) then gets the data section as one read,
    kept as it is (``ChunkParts``), not cut out of the frame as a copy."""

    __slots__ = ()

    _receives = SERVER_FRAMES
    _sends = CLIENT_FRAMES

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        super().__init__(max_frame_size)

    def next_frame(self) -> Frame | NeedData | ConnectionClosed:
        prefix = self._buffer.peek(4)
        if prefix is not None:
            (size,) = U32_BE.unpack(prefix)
            if size >= SPLIT_DELIVER_FROM:
                self._buffer.check_size(size, hint=ResponseCode.FRAME_TOO_LARGE)
                deliver = self._big_deliver(size)
                if deliver is not None:
                    return deliver
        return super().next_frame()

    def _big_deliver(self, size: int) -> Frame | NeedData | ConnectionClosed | None:
        """The Deliver of ``size`` bytes at the buffer's start in parts, NEED_DATA (nothing
        taken), or None when it is no Deliver or its sizes do not add up (the whole frame is
        then decoded as any other, which says what is wrong)."""
        buffer = self._buffer
        head = buffer.peek(_DELIVER_V1.size + CHUNK_HEADER_SIZE)  # v1's head, the chunk header
        if head is None:
            return self._idle("frame")
        _, key, version, subscription_id = _DELIVER_V1.unpack_from(head)
        if key != Key.DELIVER or version not in (1, 2):
            return None
        start = (_DELIVER_V1 if version == 1 else _DELIVER_V2).size  # the chunk's, in the frame
        if size + 4 < start + CHUNK_HEADER_SIZE:
            return None
        raw = head if version == 1 else buffer.peek(start + CHUNK_HEADER_SIZE)
        if raw is None:
            return self._idle("frame")
        data_length, trailer_length = _CHUNK_SIZES.unpack_from(raw, start + _CHUNK_SIZES_AT)
        rest = size + 4 - start - CHUNK_HEADER_SIZE - data_length
        if rest not in (0, trailer_length):
            return None
        committed = _U64_BE.unpack_from(raw, _DELIVER_V1.size)[0] if version == 2 else None
        buffer.consume_exactly(start)
        # Each part only once the one before it is there: what a short read waited for
        # (``missing``) is then the part being read, the data section as a whole.
        header = buffer.consume_exactly(CHUNK_HEADER_SIZE)
        data = None if header is None else buffer.consume_exactly(data_length)
        trailer = None if data is None else buffer.consume_exactly(rest) if rest else b""
        if header is None or data is None or trailer is None:
            buffer.rollback()
            return self._idle("frame")
        buffer.commit()
        return Deliver(subscription_id=subscription_id, chunk=ChunkParts(header, data, trailer),
                       committed_chunk_id=committed)  # fmt: skip


# A Deliver this big (with its chunk, 64 KiB or more) is taken in parts (ExactReads' threshold).
SPLIT_DELIVER_FROM: Final = 65536
_DELIVER_V1 = struct.Struct(">IHHB")  # size, key, version, subscription id
_DELIVER_V2 = struct.Struct(">IHHBQ")  # ... and the committed chunk id
_CHUNK_SIZES = struct.Struct(">II")  # a chunk header's data and trailer lengths
_CHUNK_SIZES_AT = 36
_U64_BE = struct.Struct(">Q")
