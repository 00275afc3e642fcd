"""The one receive buffer every codec uses (wsproto's Buffer shape).

Bytes are appended with ``feed``; a parser takes them with ``consume_exactly`` and friends, then
either ``commit``s (the frame is complete) or ``rollback``s (need more data) so that a frame that
arrives in pieces is parsed again from its first byte once more bytes have come.
"""

from __future__ import annotations

from .errors import FrameTooLarge

__all__ = ["ReceiveBuffer"]


class ReceiveBuffer:
    __slots__ = ("_data", "_head", "_mark", "max_frame_size")

    def __init__(self, max_frame_size: int) -> None:
        self._data = bytearray()
        self._head = 0  # read position of the parse in progress
        self._mark = 0  # start of the frame being parsed (last commit)
        self.max_frame_size = max_frame_size

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        self._data += data

    def __len__(self) -> int:
        """Bytes not yet consumed by the parse in progress."""
        return len(self._data) - self._head

    @property
    def pending(self) -> int:
        """Bytes received and not committed (the frame in progress plus what follows)."""
        return len(self._data) - self._mark

    def check_size(self, declared: int, *, hint: object = None) -> None:
        """Refuse a declared size above the maximum BEFORE waiting for or allocating it."""
        if declared < 0 or declared > self.max_frame_size:
            raise FrameTooLarge(declared, self.max_frame_size, hint=hint)

    def consume_exactly(self, n: int) -> bytes | None:
        """Take ``n`` bytes, or ``None`` (and take nothing) if fewer have arrived."""
        end = self._head + n
        if end > len(self._data):
            return None
        out = bytes(memoryview(self._data)[self._head : end])  # one copy, not two
        self._head = end
        return out

    def consume_view(self, n: int) -> memoryview | None:
        """``consume_exactly`` without a copy; valid until the next ``feed`` or ``commit``."""
        end = self._head + n
        if end > len(self._data):
            return None
        out = memoryview(self._data)[self._head : end]
        self._head = end
        return out

    def peek(self, n: int) -> bytes | None:
        end = self._head + n
        if end > len(self._data):
            return None
        return bytes(memoryview(self._data)[self._head : end])

    def unparsed(self) -> bytes:
        """What no frame has taken yet (codecs commit or roll back before returning, so the
        parse position is the start of it): a codec's ``trailing_data``."""
        return bytes(self._data[self._head :])

    def commit(self) -> None:
        """The frame is complete: drop its bytes."""
        # Compact lazily: deleting a prefix is O(remaining), so only do it once it pays.
        self._mark = self._head
        if self._mark > 65536 or self._mark == len(self._data):
            del self._data[: self._mark]
            self._head = self._mark = 0

    def rollback(self) -> None:
        """The frame is incomplete: the next parse starts again at its first byte."""
        self._head = self._mark

    def take_all(self) -> bytes:
        """Everything not yet committed (used to hand trailing bytes on, or in tests)."""
        out = bytes(self._data[self._mark :])
        del self._data[:]
        self._head = self._mark = 0
        return out
