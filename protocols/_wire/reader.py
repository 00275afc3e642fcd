"""A bounds-checked reader over one complete body: every codec decodes a frame only once it is
whole, so running out of bytes is a malformed frame, never "need more data". Each protocol
subclasses it for its integer encodings and says, in ``HINT``, what to answer a malformed body
with (RemoteProtocolError.hint)."""

from __future__ import annotations

from typing import ClassVar, NoReturn

from .errors import RemoteProtocolError

__all__ = ["BodyReader"]


class BodyReader:
    __slots__ = ("data", "end", "pos")
    HINT: ClassVar[object] = None
    UNIT: ClassVar[str] = "body"  # what error texts call the thing being read

    def __init__(self, data: bytes, pos: int = 0, end: int | None = None) -> None:
        self.data = data
        self.pos = pos
        self.end = len(data) if end is None else end

    @classmethod
    def fail(cls, message: str) -> NoReturn:
        raise RemoteProtocolError(message, hint=cls.HINT)

    @property
    def remaining(self) -> int:
        return self.end - self.pos

    def at_end(self) -> bool:
        return self.pos >= self.end

    def expect_end(self, what: str) -> None:
        if self.pos != self.end:
            self.fail(f"{self.end - self.pos} bytes after the {what}")

    def take(self, n: int, what: str = "field") -> bytes:
        end = self.pos + n
        if n < 0 or end > self.end:
            self.fail(
                f"the {what} runs past the end of the {self.UNIT} ({n} bytes, "
                f"{self.remaining} left)"
            )
        out = self.data[self.pos : end]
        self.pos = end
        return out
