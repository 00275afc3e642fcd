"""Publishing frames (rabbitmq-stream.md §5 "Publishing"): DeclarePublisher, Publish v1/v2,
PublishConfirm, PublishError, QueryPublisherSequence, DeletePublisher.

Entries are kept as sent: a simple entry's bytes (an AMQP 1.0 message for interoperable
clients, §8) and a sub-batch's compressed data are opaque here.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final, Self

from protocols._wire import LocalProtocolError

from .codes import Key
from .frame import CodeResponse, Frame, Request
from .layout import CODE, NULLABLE_STRING, STRING, U8, U32, U64, ArrayOf, Kind, Nested, Struct
from .publish_entries import (
    PUBLISH_ITEMS_AT,
    Entry,
    PublishedMessage,
    PublishedSubBatch,
    SimpleEntries,
    items_entries,
    items_frame,
    publish_frames,
    scan_simple,
)
from .wire import Reader, malformed, pack

__all__ = [
    "PUBLISH_ITEMS_AT",
    "DeclarePublisher",
    "DeclarePublisherResponse",
    "DeletePublisher",
    "DeletePublisherResponse",
    "Publish",
    "PublishConfirm",
    "PublishError",
    "PublishedMessage",
    "PublishedSubBatch",
    "PublishingError",
    "QueryPublisherSequence",
    "QueryPublisherSequenceResponse",
    "SimpleEntries",
    "items_entries",
    "items_frame",
    "publish_frames",
]

_SUB_BATCH_FLAG: Final = 0x80
_ENTRY_LENGTH_MAX: Final = 0x7FFF_FFFF  # a simple entry's length has its top bit 0
_I32 = struct.Struct(">i")
_SUB_BATCH_HEAD = struct.Struct(">BHII")  # flags, records, uncompressed length, data length
_ID_LENGTH = struct.Struct(">QI")  # a v1 item: publishing id, then a simple entry's length
_LENGTH = struct.Struct(">I")
_CONFIRM_HEAD = struct.Struct(">Bi")  # publisher id, id count


@dataclass(frozen=True, slots=True, kw_only=True)
class DeclarePublisher(Request):
    """An empty reference means no deduplication."""

    KEY: ClassVar[int] = Key.DECLARE_PUBLISHER
    LAYOUT: ClassVar[tuple[Kind, ...]] = (U32, U8, STRING, STRING)
    publisher_id: int
    reference: str
    stream: str


@dataclass(frozen=True, slots=True, kw_only=True)
class DeclarePublisherResponse(CodeResponse):
    KEY: ClassVar[int] = Key.DECLARE_PUBLISHER


@dataclass(frozen=True, slots=True, kw_only=True)
class Publish(Frame):
    """No correlation id; answered by PublishConfirm / PublishError. ``version`` 2 (3.13+)
    puts a nullable filter value before each simple entry and allows no sub-batches."""

    KEY: ClassVar[int] = Key.PUBLISH
    VERSIONS: ClassVar[frozenset[int]] = frozenset((1, 2))
    publisher_id: int
    messages: Sequence[Entry] = ()  # decoded v1 frames of simple entries: a SimpleEntries
    publish_version: int = 1

    @property
    def version(self) -> int:
        return self.publish_version

    def encode_body(self) -> bytes:
        v2 = self.publish_version == 2
        if self.publish_version not in self.VERSIONS:
            raise LocalProtocolError(f"Publish has no version {self.publish_version}")
        parts = [U8.encode(self.publisher_id), pack(_I32, len(self.messages), "entry count")]
        for entry in self.messages:
            parts.append(U64.encode(entry.publishing_id))
            if isinstance(entry, PublishedSubBatch):
                if v2:
                    raise LocalProtocolError("Publish v2 carries no sub-batches")
                parts.append(_encode_sub_batch(entry))
                continue
            if v2:
                parts.append(NULLABLE_STRING.encode(entry.filter_value))
            elif entry.filter_value is not None:
                raise LocalProtocolError("a filter value needs Publish v2")
            parts.append(_encode_simple(entry.data))
        return b"".join(parts)

    @classmethod
    def decode(cls, reader: Reader, version: int, **header: Any) -> Self:
        publisher_id = U8.decode(reader)
        # Smallest entry: publishing id + a 4-byte length (+ a 2-byte filter value in v2).
        n = reader.count("entry", 14 if version == 2 else 12)
        if version == 1:
            simple = scan_simple(reader, n)
            if simple is not None:
                return cls(publisher_id=publisher_id, messages=simple, publish_version=version)
        entries: list[Entry] = []
        for _ in range(n):
            publishing_id = U64.decode(reader)
            if version == 2:
                filter_value = NULLABLE_STRING.decode(reader)
                data = _decode_simple(reader)
                if data is None:
                    malformed("Publish v2 carries no sub-batches")
                entries.append(
                    PublishedMessage(
                        publishing_id=publishing_id, data=data, filter_value=filter_value
                    )
                )
            else:
                entries.append(_decode_entry(reader, publishing_id))
        return cls(publisher_id=publisher_id, messages=tuple(entries), publish_version=version)


def _encode_simple(data: bytes) -> bytes:
    if len(data) > _ENTRY_LENGTH_MAX:
        raise LocalProtocolError(f"a {len(data)}-byte entry does not fit 31 bits")
    return U32.encode(len(data)) + data


def _encode_sub_batch(entry: PublishedSubBatch) -> bytes:
    if not 0 <= entry.compression <= 7:
        raise LocalProtocolError(f"compression {entry.compression} does not fit 3 bits")
    flags = _SUB_BATCH_FLAG | entry.compression << 4
    try:
        head = _SUB_BATCH_HEAD.pack(
            flags, entry.record_count, entry.uncompressed_length, len(entry.data)
        )
    except struct.error as exc:
        raise LocalProtocolError(f"sub-batch header does not fit: {exc}") from exc
    return head + entry.data


def _decode_simple(reader: Reader) -> bytes | None:
    """A simple entry, or None (nothing read) when the next entry is a sub-batch."""
    if reader.remaining and reader.data[reader.pos] & _SUB_BATCH_FLAG:
        return None
    return reader.take(U32.decode(reader), "entry")


def _decode_entry(reader: Reader, publishing_id: int) -> Entry:
    data = _decode_simple(reader)
    if data is not None:
        return PublishedMessage(publishing_id=publishing_id, data=data)
    head = reader.take(_SUB_BATCH_HEAD.size, "sub-batch header")
    flags, records, uncompressed, size = _SUB_BATCH_HEAD.unpack(head)
    if flags & 0x0F:
        malformed(f"sub-batch flags {flags:#04x}: the reserved bits are set")
    return PublishedSubBatch(
        publishing_id=publishing_id,
        compression=(flags >> 4) & 0x07,
        record_count=records,
        uncompressed_length=uncompressed,
        data=reader.take(size, "sub-batch data"),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class PublishConfirm(Frame):
    KEY: ClassVar[int] = Key.PUBLISH_CONFIRM
    LAYOUT: ClassVar[tuple[Kind, ...]] = (U8, ArrayOf(U64))
    publisher_id: int
    publishing_ids: tuple[int, ...] = ()

    def encode_body(self) -> bytes:
        # The server's hot answer: the ids in one pack, not one call each.
        n = len(self.publishing_ids)
        try:
            return _CONFIRM_HEAD.pack(self.publisher_id, n) + struct.pack(
                f">{n}Q", *self.publishing_ids
            )
        except struct.error as exc:
            raise LocalProtocolError(f"PublishConfirm does not fit: {exc}") from None

    @classmethod
    def decode(cls, reader: Reader, version: int, **header: Any) -> Self:
        # The hot answer of a publishing client: the ids in one unpack, not one call each.
        publisher_id = U8.decode(reader)
        n = reader.count("publishing id", 8)
        ids = struct.unpack_from(f">{n}Q", reader.data, reader.pos)
        reader.pos += 8 * n
        return cls(publisher_id=publisher_id, publishing_ids=ids)


@dataclass(frozen=True, slots=True, kw_only=True)
class PublishingError(Struct):
    LAYOUT: ClassVar[tuple[Kind, ...]] = (U64, CODE)
    publishing_id: int
    code: int


@dataclass(frozen=True, slots=True, kw_only=True)
class PublishError(Frame):
    KEY: ClassVar[int] = Key.PUBLISH_ERROR
    LAYOUT: ClassVar[tuple[Kind, ...]] = (U8, ArrayOf(Nested(PublishingError)))
    publisher_id: int
    errors: tuple[PublishingError, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class QueryPublisherSequence(Request):
    KEY: ClassVar[int] = Key.QUERY_PUBLISHER_SEQUENCE
    LAYOUT: ClassVar[tuple[Kind, ...]] = (U32, STRING, STRING)
    reference: str
    stream: str


@dataclass(frozen=True, slots=True, kw_only=True)
class QueryPublisherSequenceResponse(CodeResponse):
    """``sequence`` is 0, still with code OK, for an unknown reference."""

    KEY: ClassVar[int] = Key.QUERY_PUBLISHER_SEQUENCE
    LAYOUT: ClassVar[tuple[Kind, ...]] = (*CodeResponse.LAYOUT, U64)
    sequence: int


@dataclass(frozen=True, slots=True, kw_only=True)
class DeletePublisher(Request):
    KEY: ClassVar[int] = Key.DELETE_PUBLISHER
    LAYOUT: ClassVar[tuple[Kind, ...]] = (U32, U8)
    publisher_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class DeletePublisherResponse(CodeResponse):
    KEY: ClassVar[int] = Key.DELETE_PUBLISHER
