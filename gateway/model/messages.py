"""Messages and batches: the unit every protocol's records are translated to and from.

``Message`` and ``Header`` are NamedTuples, not dataclasses: they are built once per record on
the hot path, and a tuple is several times cheaper to create than a frozen dataclass.

A ``MessageBatch`` holds either decoded messages, or a batch's wire form (``WireBatch``: its
``WireFormat`` and the bytes) that is decoded only when somebody asks for ``messages``. When the
reading side speaks the stored format, the bytes go out untouched (DESIGN.md §2). A wire form
carries its own decoder, so decoding needs no table filled by whoever happened to be imported.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple


class HeaderKind(enum.IntEnum):
    """Typed header values. 1..15 are Iggy's kinds (iggy.md §2); the rest carry AMQP types.

    Values are bytes: integers and floats little-endian fixed width (as Iggy sends them), BOOL one
    byte, STRING/SYMBOL UTF-8, TIMESTAMP i64 LE milliseconds, UUID 16 bytes, NULL empty.
    """

    RAW = 1
    STRING = 2
    BOOL = 3
    INT8 = 4
    INT16 = 5
    INT32 = 6
    INT64 = 7
    INT128 = 8
    UINT8 = 9
    UINT16 = 10
    UINT32 = 11
    UINT64 = 12
    UINT128 = 13
    FLOAT32 = 14
    FLOAT64 = 15
    NULL = 64
    TIMESTAMP = 65
    UUID = 66
    SYMBOL = 67


class Header(NamedTuple):
    name: str
    value: bytes
    kind: HeaderKind = HeaderKind.RAW


class Message(NamedTuple):
    value: bytes
    key: bytes | None = None
    headers: tuple[Header, ...] = ()
    timestamp_us: int = 0  # 0 = let the backend stamp it on append
    offset: int = -1  # -1 until the backend assigned one
    id: int = 0  # u128, 0 = none


@dataclass(frozen=True, slots=True, kw_only=True)
class WireBatch:
    """A batch in some wire format, with what a store needs without decoding it."""

    format: WireFormat
    data: bytes
    count: int
    base_offset: int = 0
    first_timestamp_us: int = 0
    max_timestamp_us: int = 0
    # How many entries the wire form holds, when whoever made the batch had counted them (a
    # RabbitMQ Stream chunk's header does: a sub-entry batch is one entry of many records);
    # 0: not known, a reader that needs it counts.
    entries: int = 0


WireDecoder = Callable[[WireBatch], list[Message]]


@dataclass(frozen=True, slots=True, kw_only=True)
class WireFormat:
    """One wire form a batch may travel or be stored in: defined once, next to its decoder (the
    translator of its protocol, or the embedded store for ``sg1``). Equal by name, so a format
    compares and hashes the same after a copy or a pickle."""

    name: str
    decode: WireDecoder = field(compare=False, repr=False)

    def __str__(self) -> str:
        return self.name


def decode_wire(wire: WireBatch) -> list[Message]:
    # for a caller holding a bare WireBatch (no MessageBatch to cache the result in)
    return wire.format.decode(wire)


class MessageBatch:
    __slots__ = ("_messages", "wire")

    def __init__(
        self, messages: Sequence[Message] | None = None, *, wire: WireBatch | None = None
    ) -> None:
        if messages is None and wire is None:
            raise ValueError("a batch needs messages or a wire form")
        self._messages: tuple[Message, ...] | None = None if messages is None else tuple(messages)
        self.wire = wire

    @property
    def messages(self) -> tuple[Message, ...]:
        if self._messages is None:
            assert self.wire is not None
            self._messages = tuple(self.wire.format.decode(self.wire))
        return self._messages

    @property
    def decoded(self) -> bool:
        return self._messages is not None

    def __len__(self) -> int:
        if self._messages is not None:
            return len(self._messages)
        assert self.wire is not None
        return self.wire.count

    @property
    def base_offset(self) -> int:
        if self.wire is not None:
            return self.wire.base_offset
        return self._messages[0].offset if self._messages else -1

    def __repr__(self) -> str:
        form = self.wire.format.name if self.wire is not None else "decoded"
        return f"<MessageBatch {len(self)} messages, {form}>"
