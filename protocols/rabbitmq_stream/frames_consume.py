"""Consuming frames (rabbitmq-stream.md §5 "Consuming"): Subscribe, Deliver v1/v2, Credit and
its error answer, StoreOffset, QueryOffset, Unsubscribe, ConsumerUpdate, ResolveOffsetSpec.

Deliver carries its Osiris chunk (§6) as opaque bytes; ``chunk.py`` decodes it.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Self

from protocols._wire import Gather, LocalProtocolError

from .chunk import ChunkParts, DeliveredChunk
from .codes import Key
from .frame import CodeResponse, Frame, Request
from .layout import (
    CODE,
    I16,
    OFFSET_SPEC,
    PROPERTIES,
    STRING,
    U8,
    U16,
    U32,
    U64,
    Kind,
    OffsetSpec,
    Optional,
    Properties,
)
from .wire import Reader

__all__ = [
    "ConsumerUpdate",
    "ConsumerUpdateResponse",
    "Credit",
    "CreditResponse",
    "Deliver",
    "QueryOffset",
    "QueryOffsetResponse",
    "ResolveOffsetSpec",
    "ResolveOffsetSpecResponse",
    "StoreOffset",
    "Subscribe",
    "SubscribeResponse",
    "Unsubscribe",
    "UnsubscribeResponse",
    "deliver_frame",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Subscribe(Request):
    """``properties`` None: the array is absent (it is optional; rstream sends count 0)."""

    KEY: ClassVar[int] = Key.SUBSCRIBE
    LAYOUT: ClassVar[tuple[Kind, ...]] = (U32, U8, STRING, OFFSET_SPEC, U16, Optional(PROPERTIES))
    subscription_id: int
    stream: str
    offset: OffsetSpec
    credit: int
    properties: Properties | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SubscribeResponse(CodeResponse):
    KEY: ClassVar[int] = Key.SUBSCRIBE


@dataclass(frozen=True, slots=True, kw_only=True)
class Deliver(Frame):
    """v1: ``subscription_id, chunk``; v2 (3.11+, when the client asked for it in
    ExchangeCommandVersions) adds ``committed_chunk_id`` before the chunk."""

    KEY: ClassVar[int] = Key.DELIVER
    VERSIONS: ClassVar[frozenset[int]] = frozenset((1, 2))
    subscription_id: int
    # Decoded: a view of the frame's bytes (a chunk is ~1 MiB), or the parts a big Deliver was
    # read in (RabbitStreamClientCodec).
    chunk: DeliveredChunk
    committed_chunk_id: int | None = None

    @property
    def version(self) -> int:
        return 1 if self.committed_chunk_id is None else 2

    def encode_body(self) -> bytes:
        committed = b"" if self.committed_chunk_id is None else U64.encode(self.committed_chunk_id)
        chunk = self.chunk.joined() if isinstance(self.chunk, ChunkParts) else self.chunk
        return U8.encode(self.subscription_id) + committed + chunk

    @classmethod
    def decode(cls, reader: Reader, version: int, **header: Any) -> Self:
        subscription_id = U8.decode(reader)
        committed = U64.decode(reader) if version == 2 else None
        data = reader.data
        if isinstance(data, bytes):  # immutable: the chunk is a view of it, not a copy
            chunk: bytes | memoryview = memoryview(data)[reader.pos : reader.end]
            reader.pos = reader.end
        else:
            chunk = reader.take(reader.remaining, "chunk")
        return cls(subscription_id=subscription_id, chunk=chunk, committed_chunk_id=committed)


_DELIVER_V1 = struct.Struct(">IHHB")  # size, key, version, subscription id
_DELIVER_V2 = struct.Struct(">IHHBQ")  # ... and the committed chunk id


def deliver_frame(
    subscription_id: int, chunk: Sequence[bytes], committed_chunk_id: int | None = None
) -> Gather:
    """A whole Deliver frame (size prefix included) of a chunk in pieces (header, then stored
    entries), gathered: the pieces go out as they are, not copied into a frame. The bytes
    ``encode_frame(Deliver(...))`` writes for the joined chunk; v2 with a committed chunk id."""
    size = sum(map(len, chunk))
    try:
        if committed_chunk_id is None:
            head = _DELIVER_V1.pack(_DELIVER_V1.size - 4 + size, Key.DELIVER, 1, subscription_id)
        else:
            head = _DELIVER_V2.pack(_DELIVER_V2.size - 4 + size, Key.DELIVER, 2, subscription_id,
                                    committed_chunk_id)  # fmt: skip
    except struct.error as exc:
        raise LocalProtocolError(f"Deliver: {exc}") from None
    return Gather((head, *chunk), len(head) + size)


@dataclass(frozen=True, slots=True, kw_only=True)
class Credit(Frame):
    """No correlation id, no answer on success. ``credit`` is parsed signed (§5)."""

    KEY: ClassVar[int] = Key.CREDIT
    LAYOUT: ClassVar[tuple[Kind, ...]] = (U8, I16)
    subscription_id: int
    credit: int


@dataclass(frozen=True, slots=True, kw_only=True)
class CreditResponse(Frame):
    """Only on error (unknown subscription) and without a correlation id (observed)."""

    KEY: ClassVar[int] = Key.CREDIT
    RESPONSE: ClassVar[bool] = True
    LAYOUT: ClassVar[tuple[Kind, ...]] = (CODE, U8)
    code: int
    subscription_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class StoreOffset(Frame):
    """No correlation id and never an answer, even on error."""

    KEY: ClassVar[int] = Key.STORE_OFFSET
    LAYOUT: ClassVar[tuple[Kind, ...]] = (STRING, STRING, U64)
    reference: str
    stream: str
    offset: int


@dataclass(frozen=True, slots=True, kw_only=True)
class QueryOffset(Request):
    KEY: ClassVar[int] = Key.QUERY_OFFSET
    LAYOUT: ClassVar[tuple[Kind, ...]] = (U32, STRING, STRING)
    reference: str
    stream: str


@dataclass(frozen=True, slots=True, kw_only=True)
class QueryOffsetResponse(CodeResponse):
    """Code 0x13 with offset 0 when nothing is stored."""

    KEY: ClassVar[int] = Key.QUERY_OFFSET
    LAYOUT: ClassVar[tuple[Kind, ...]] = (*CodeResponse.LAYOUT, U64)
    offset: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Unsubscribe(Request):
    KEY: ClassVar[int] = Key.UNSUBSCRIBE
    LAYOUT: ClassVar[tuple[Kind, ...]] = (U32, U8)
    subscription_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class UnsubscribeResponse(CodeResponse):
    KEY: ClassVar[int] = Key.UNSUBSCRIBE


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerUpdate(Request):
    """Sent by the SERVER (3.11+, single active consumer); the client answers."""

    KEY: ClassVar[int] = Key.CONSUMER_UPDATE
    LAYOUT: ClassVar[tuple[Kind, ...]] = (U32, U8, U8)
    subscription_id: int
    active: int  # 0 or 1, kept as sent


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerUpdateResponse(CodeResponse):
    """Sent by the CLIENT: where to start once active (type NONE: keep the Subscribe's).

    rstream sends a uint64 after every type, also after NONE/FIRST/LAST/NEXT, which carry no
    value; RabbitMQ ignores those 8 bytes, and so does this decoder: ``unused_value`` keeps
    them, so the frame re-encodes as it came."""

    KEY: ClassVar[int] = Key.CONSUMER_UPDATE
    LAYOUT: ClassVar[tuple[Kind, ...]] = (*CodeResponse.LAYOUT, OFFSET_SPEC)
    offset: OffsetSpec
    unused_value: int | None = None

    def encode_body(self) -> bytes:
        body = U32.encode(self.correlation_id) + CODE.encode(self.code)
        body += OFFSET_SPEC.encode(self.offset)
        return body if self.unused_value is None else body + U64.encode(self.unused_value)

    @classmethod
    def decode(cls, reader: Reader, version: int, **header: Any) -> Self:
        correlation_id, code = U32.decode(reader), CODE.decode(reader)
        offset = OFFSET_SPEC.decode(reader)
        unused = None
        if offset.value is None and reader.remaining == 8:
            unused = U64.decode(reader)
        return cls(correlation_id=correlation_id, code=code, offset=offset, unused_value=unused)


@dataclass(frozen=True, slots=True, kw_only=True)
class ResolveOffsetSpec(Request):
    KEY: ClassVar[int] = Key.RESOLVE_OFFSET_SPEC
    LAYOUT: ClassVar[tuple[Kind, ...]] = (U32, STRING, OFFSET_SPEC, Optional(PROPERTIES))
    stream: str
    offset: OffsetSpec
    properties: Properties | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ResolveOffsetSpecResponse(CodeResponse):
    """4.3+: the spec resolved to a concrete offset (type always OFFSET, §5)."""

    KEY: ClassVar[int] = Key.RESOLVE_OFFSET_SPEC
    LAYOUT: ClassVar[tuple[Kind, ...]] = (*CodeResponse.LAYOUT, OFFSET_SPEC)
    offset: OffsetSpec
