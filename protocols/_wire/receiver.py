"""The receiving half every codec shares: bytes in, EOF, what is left unparsed."""

from __future__ import annotations

from .buffer import ReceiveBuffer
from .errors import LocalProtocolError, RemoteProtocolError
from .sentinel import CONNECTION_CLOSED, NEED_DATA, ConnectionClosed, NeedData


class Receiver:
    """Base of the codecs: one ``ReceiveBuffer`` (its max frame size checked before a frame is
    waited for) and the EOF flag. Subclasses parse from ``_buffer``."""

    __slots__ = ("_buffer", "_eof")

    def __init__(self, max_frame_size: int) -> None:
        self._buffer = ReceiveBuffer(max_frame_size)
        self._eof = False

    @property
    def trailing_data(self) -> bytes:
        return self._buffer.unparsed()

    @property
    def buffered(self) -> int:
        """How many bytes ``trailing_data`` holds, without copying them: between two frames 0,
        else the part of a frame received so far."""
        return len(self._buffer)

    @property
    def missing(self) -> int:
        """When the last parse stopped short (NEED_DATA) inside a frame: how many more bytes it
        waits for; nothing can be parsed before they have come (a listener need not wake
        sooner). 0 when not known."""
        return self._buffer.missing if len(self._buffer) else 0

    @property
    def wants(self) -> int:
        """Like ``missing``, and also between frames: how many bytes the last parse that
        stopped short asked for beyond those it had (with none buffered, the head a frame
        starts with: its size prefix or header). 0 when not known."""
        return self._buffer.missing

    @property
    def max_frame_size(self) -> int:
        return self._buffer.max_frame_size

    @max_frame_size.setter
    def max_frame_size(self, value: int) -> None:
        """A new limit, checked from the next frame parsed on (a listener lowers it until the
        client has logged in)."""
        self._buffer.max_frame_size = value

    def receive_data(self, data: bytes) -> None:
        if self._eof:
            raise LocalProtocolError("receive_data() after receive_eof()")
        self._buffer.feed(data)

    def receive_eof(self) -> None:
        self._eof = True

    def _idle(self, what: str) -> NeedData | ConnectionClosed:
        """No whole frame is buffered (the parse committed nothing): wait, or the peer closed
        cleanly between frames, or it closed inside one."""
        if not self._eof:
            return NEED_DATA
        if len(self._buffer):
            raise RemoteProtocolError(
                f"connection closed inside a {what} ({len(self._buffer)} bytes of it)"
            )
        return CONNECTION_CLOSED


__all__ = ["Receiver"]
