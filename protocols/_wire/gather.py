"""A frame in pieces: what an encoder hands the writer instead of one joined ``bytes`` when
most of the frame is stored data it did not make (a Fetch answer's record batches). The writer
sends the pieces with one gathering write (``sendmsg``) on a plain socket and joins them only
where it must (TLS), so the data is not copied into a frame first."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Gather", "Piece"]

Piece = bytes | memoryview  # any contiguous buffer (a memoryview's len() may not be its bytes)


@dataclass(frozen=True, slots=True)
class Gather:
    """The frame's pieces in order and their byte count (what the frame's length is)."""

    pieces: Sequence[Piece]
    nbytes: int

    def join(self) -> bytes:
        return b"".join(self.pieces)
