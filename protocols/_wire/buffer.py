"""The one receive buffer every codec uses (wsproto's Buffer shape).

Bytes are appended with ``feed``; a parser takes them with ``consume_exactly`` and friends, then
either ``commit``s (the frame is complete) or ``rollback``s (need more data) so that a frame that
arrives in pieces is parsed again from its first byte once more bytes have come.
"""

from __future__ import annotations

from .errors import FrameTooLarge

__all__ = ["ReceiveBuffer"]


class ReceiveBuffer:
    """Positions (``_head``, ``_mark``) count from the start of ``_data`` on through ``_more``:
    the chunks fed while a frame was in progress, kept as they came. A big frame arrives in
    many reads; joining them once when the frame is taken is one copy of its bytes, where
    appending each to ``_data`` first was two (and a realloc at every growth)."""

    __slots__ = ("_data", "_head", "_mark", "_more", "_more_size", "max_frame_size", "missing")

    def __init__(self, max_frame_size: int) -> None:
        self._data = bytearray()
        self._more: list[bytes] = []
        self._more_size = 0
        self._head = 0  # read position of the parse in progress
        self._mark = 0  # start of the frame being parsed (last commit)
        self.max_frame_size = max_frame_size
        # How many more bytes the last read that came up short waited for (0: none did since
        # the last commit): what the frame in progress still needs before it can be parsed.
        self.missing = 0

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        self.missing = max(0, self.missing - len(data))
        if self._more or (len(self._data) > self._mark and len(data) >= _DEFER_FROM):
            self._more.append(bytes(data))  # a no-op on bytes
            self._more_size += len(data)
        else:
            self._data += data

    def _size(self) -> int:
        return len(self._data) + self._more_size

    def _merge(self) -> None:
        """Everything into ``_data`` (positions unchanged): for the reads that want it there."""
        if self._more:
            for chunk in self._more:  # one copy each (a join first would be a second)
                self._data += chunk
            self._more.clear()
            self._more_size = 0

    def __len__(self) -> int:
        """Bytes not yet consumed by the parse in progress."""
        return self._size() - self._head

    @property
    def pending(self) -> int:
        """Bytes received and not committed (the frame in progress plus what follows)."""
        return self._size() - self._mark

    def check_size(self, declared: int, *, hint: object = None) -> None:
        """Refuse a declared size above the maximum BEFORE waiting for or allocating it."""
        if declared < 0 or declared > self.max_frame_size:
            raise FrameTooLarge(declared, self.max_frame_size, hint=hint)

    def available(self, n: int) -> bool:
        """Whether ``n`` bytes from the read position have arrived (if not, ``missing`` says
        how many more)."""
        short = self._head + n - self._size()
        if short > 0:
            self.missing = short
            return False
        return True

    def consume_exactly(self, n: int) -> bytes | None:
        """Take ``n`` bytes, or ``None`` (and take nothing) if fewer have arrived."""
        end = self._head + n
        if end > len(self._data):
            if end > self._size():
                self.missing = end - self._size()
                return None
            out = self._joined(end)
        else:
            out = bytes(memoryview(self._data)[self._head : end])  # one copy, not two
        self._head = end
        return out

    def _joined(self, end: int) -> bytes:
        """The bytes from the read position to ``end``, which is in ``_more``: one join (none
        when they are one chunk as it came). The read position may be in ``_data`` or already
        in ``_more`` (a frame read in several pieces)."""
        head = self._head
        parts: list[bytes | memoryview] = []
        if head < len(self._data):
            parts.append(memoryview(self._data)[head:])
        at = len(self._data)
        for chunk in self._more:
            size = len(chunk)
            if at + size > head:
                lo, hi = max(0, head - at), min(size, end - at)
                parts.append(chunk if lo == 0 and hi == size else memoryview(chunk)[lo:hi])
            at += size
            if at >= end:
                break
        if len(parts) == 1 and isinstance(parts[0], bytes):
            return parts[0]
        return b"".join(parts)

    def peek(self, n: int) -> bytes | None:
        end = self._head + n
        if end > self._size():
            self.missing = end - self._size()
            return None
        if end > len(self._data):
            self._merge()
        return bytes(memoryview(self._data)[self._head : end])

    def unparsed(self) -> bytes:
        """What no frame has taken yet (codecs commit or roll back before returning, so the
        parse position is the start of it): a codec's ``trailing_data``."""
        self._merge()
        return bytes(self._data[self._head :])

    def commit(self) -> None:
        """The frame is complete: drop its bytes."""
        self._mark = self._head
        self.missing = 0
        if self._mark >= len(self._data) and self._more:
            # The frame ended in the chunks kept aside: what follows it starts a new ``_data``.
            rest = self._mark - len(self._data)
            for i, chunk in enumerate(self._more):
                if rest < len(chunk):
                    self._data = bytearray(memoryview(chunk)[rest:])
                    self._data += b"".join(self._more[i + 1 :])
                    break
                rest -= len(chunk)
            else:
                self._data = bytearray()
            self._more.clear()
            self._more_size = 0
            self._head = self._mark = 0
            return
        # Compact lazily: deleting a prefix is O(remaining), so only do it once it pays.
        if self._mark > 65536 or self._mark == self._size():
            self._merge()
            del self._data[: self._mark]
            self._head = self._mark = 0

    def rollback(self) -> None:
        """The frame is incomplete: the next parse starts again at its first byte."""
        self._head = self._mark

    def take_all(self) -> bytes:
        """Everything not yet committed (used to hand trailing bytes on, or in tests)."""
        self._merge()
        out = bytes(self._data[self._mark :])
        del self._data[:]
        self._head = self._mark = 0
        return out


_DEFER_FROM = 4096  # a chunk this big, fed in the middle of a frame, is kept aside as it came
