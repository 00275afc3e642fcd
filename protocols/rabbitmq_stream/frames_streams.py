"""Stream and topology frames (rabbitmq-stream.md §5 "Streams and topology"): Create, Delete,
Metadata, MetadataUpdate, Route, Partitions, StreamStats, Create/DeleteSuperStream."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .codes import RESPONSE_BIT, Key
from .frame import CodeResponse, Frame, Request
from .layout import (
    CODE,
    I64,
    PROPERTIES,
    STRING,
    U16,
    U32,
    ArrayOf,
    Kind,
    Nested,
    Properties,
    Struct,
    pair,
)

__all__ = [
    "Broker",
    "Create",
    "CreateResponse",
    "CreateSuperStream",
    "CreateSuperStreamResponse",
    "Delete",
    "DeleteResponse",
    "DeleteSuperStream",
    "DeleteSuperStreamResponse",
    "Metadata",
    "MetadataResponse",
    "MetadataUpdate",
    "Partitions",
    "PartitionsResponse",
    "Route",
    "RouteResponse",
    "StreamMetadata",
    "StreamStats",
    "StreamStatsResponse",
]

_STREAMS = ArrayOf(STRING)


@dataclass(frozen=True, slots=True, kw_only=True)
class Create(Request):
    """``arguments``: max-length-bytes, max-age, ... (the count is mandatory, 0 allowed)."""

    KEY: ClassVar[int] = Key.CREATE
    LAYOUT: ClassVar[tuple[Kind, ...]] = (U32, STRING, PROPERTIES)
    stream: str
    arguments: Properties = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateResponse(CodeResponse):
    KEY: ClassVar[int] = Key.CREATE


@dataclass(frozen=True, slots=True, kw_only=True)
class Delete(Request):
    KEY: ClassVar[int] = Key.DELETE
    LAYOUT: ClassVar[tuple[Kind, ...]] = (U32, STRING)
    stream: str


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteResponse(CodeResponse):
    KEY: ClassVar[int] = Key.DELETE


@dataclass(frozen=True, slots=True, kw_only=True)
class Metadata(Request):
    KEY: ClassVar[int] = Key.METADATA
    LAYOUT: ClassVar[tuple[Kind, ...]] = (U32, _STREAMS)
    streams: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Broker(Struct):
    LAYOUT: ClassVar[tuple[Kind, ...]] = (U16, STRING, U32)
    reference: int
    host: str
    port: int


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamMetadata(Struct):
    """A missing stream: code 0x02, leader 0xFFFF, no replicas (observed)."""

    LAYOUT: ClassVar[tuple[Kind, ...]] = (STRING, CODE, U16, ArrayOf(U16))
    stream: str
    code: int
    leader: int
    replicas: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class MetadataResponse(Frame):
    """The one response WITHOUT a response code (§5)."""

    KEY: ClassVar[int] = Key.METADATA
    RESPONSE: ClassVar[bool] = True
    LAYOUT: ClassVar[tuple[Kind, ...]] = (
        U32,
        ArrayOf(Nested(Broker)),
        ArrayOf(Nested(StreamMetadata)),
    )
    correlation_id: int
    brokers: tuple[Broker, ...] = ()
    streams: tuple[StreamMetadata, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class MetadataUpdate(Frame):
    """Server-initiated, no correlation id: e.g. code 0x06 after the stream was deleted."""

    KEY: ClassVar[int] = Key.METADATA_UPDATE
    LAYOUT: ClassVar[tuple[Kind, ...]] = (CODE, STRING)
    code: int
    stream: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Route(Request):
    KEY: ClassVar[int] = Key.ROUTE
    LAYOUT: ClassVar[tuple[Kind, ...]] = (U32, STRING, STRING)
    routing_key: str
    super_stream: str


@dataclass(frozen=True, slots=True, kw_only=True)
class _StreamsResponse(CodeResponse):
    """``corr, code, streams``. RabbitMQ 3.10 sends Route and Partitions responses without the
    response bit (§10): ``legacy_key`` keeps that key, which is not otherwise on the wire."""

    LAYOUT: ClassVar[tuple[Kind, ...]] = (*CodeResponse.LAYOUT, _STREAMS)
    streams: tuple[str, ...] = ()
    legacy_key: bool = False

    @property
    def wire_key(self) -> int:
        return self.KEY if self.legacy_key else self.KEY | RESPONSE_BIT


@dataclass(frozen=True, slots=True, kw_only=True)
class RouteResponse(_StreamsResponse):
    KEY: ClassVar[int] = Key.ROUTE


@dataclass(frozen=True, slots=True, kw_only=True)
class Partitions(Request):
    KEY: ClassVar[int] = Key.PARTITIONS
    LAYOUT: ClassVar[tuple[Kind, ...]] = (U32, STRING)
    super_stream: str


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionsResponse(_StreamsResponse):
    """Partitions in binding order (``x-stream-partition-order``)."""

    KEY: ClassVar[int] = Key.PARTITIONS


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamStats(Request):
    KEY: ClassVar[int] = Key.STREAM_STATS
    LAYOUT: ClassVar[tuple[Kind, ...]] = (U32, STRING)
    stream: str


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamStatsResponse(CodeResponse):
    """first_chunk_id, committed_chunk_id, last_chunk_id (-1 when empty), in sent order."""

    KEY: ClassVar[int] = Key.STREAM_STATS
    LAYOUT: ClassVar[tuple[Kind, ...]] = (*CodeResponse.LAYOUT, ArrayOf(pair(STRING, I64)))
    stats: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateSuperStream(Request):
    KEY: ClassVar[int] = Key.CREATE_SUPER_STREAM
    LAYOUT: ClassVar[tuple[Kind, ...]] = (U32, STRING, _STREAMS, _STREAMS, PROPERTIES)
    name: str
    partitions: tuple[str, ...] = ()
    binding_keys: tuple[str, ...] = ()
    arguments: Properties = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateSuperStreamResponse(CodeResponse):
    KEY: ClassVar[int] = Key.CREATE_SUPER_STREAM


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteSuperStream(Request):
    KEY: ClassVar[int] = Key.DELETE_SUPER_STREAM
    LAYOUT: ClassVar[tuple[Kind, ...]] = (U32, STRING)
    name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteSuperStreamResponse(CodeResponse):
    KEY: ClassVar[int] = Key.DELETE_SUPER_STREAM
