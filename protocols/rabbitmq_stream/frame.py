"""The bases of every RabbitMQ Stream frame class (rabbitmq-stream.md §2)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Self

from .codes import RESPONSE_BIT
from .layout import CODE, U32, Kind, Struct
from .wire import Reader

__all__ = ["CodeResponse", "Frame", "Request"]


class Frame(Struct):
    """One frame: ``KEY`` is the command id; a response class sets ``RESPONSE`` (bit 15 on the
    wire). ``VERSIONS`` are the versions it may carry; ``version`` is the one this instance
    encodes with (1 unless a version-gated field says otherwise)."""

    __slots__ = ()

    KEY: ClassVar[int]
    RESPONSE: ClassVar[bool] = False
    VERSIONS: ClassVar[frozenset[int]] = frozenset((1,))

    @property
    def wire_key(self) -> int:
        return self.KEY | RESPONSE_BIT if self.RESPONSE else self.KEY

    @property
    def version(self) -> int:
        return 1

    @classmethod
    def decode(cls, reader: Reader, version: int, **header: Any) -> Self:
        """The body of a frame of ``version`` (already checked against ``VERSIONS``)."""
        return cls.decode_body(reader, **header)


@dataclass(frozen=True, slots=True, kw_only=True)
class Request(Frame):
    """A frame that opens a request/response pair: the correlation id comes first (§2)."""

    LAYOUT: ClassVar[tuple[Kind, ...]] = (U32,)
    correlation_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class CodeResponse(Frame):
    """A response: same key with bit 15, the request's correlation id, a §4 response code,
    then whatever the subclass adds (most add nothing)."""

    RESPONSE: ClassVar[bool] = True
    LAYOUT: ClassVar[tuple[Kind, ...]] = (U32, CODE)
    correlation_id: int
    code: int
