"""Which frames travel which way, and the whole-frame encoder and decoder (rabbitmq-stream.md
§2, §3, §12). Frames are told apart by their key alone (a response's key has bit 15), except
that a few keys mean one thing from a client and another from a server: 0x0014 Tune both ways,
0x8014 the Java client's Tune answer, 0x0018/0x0019 Route/Partitions requests from a client but
3.10's responses without the response bit from a server."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from protocols._wire import U16_BE, U32_BE, LocalProtocolError

from . import frames_connection as conn
from . import frames_consume as consume
from . import frames_publish as publish
from . import frames_streams as streams
from .codes import RESPONSE_BIT, Key, ResponseCode
from .frame import Frame
from .wire import Reader, malformed

__all__ = [
    "CLIENT_FRAMES",
    "HEADER_SIZE",
    "SERVER_FRAMES",
    "Decoding",
    "decode_frame",
    "encode_frame",
]

HEADER_SIZE: Final = 4  # uint16 key + uint16 version, after the uint32 size

# How to decode one wire key: the class, and the non-wire fields the key itself implies.
Decoding = tuple[type[Frame], Mapping[str, Any]]
_NONE: Mapping[str, Any] = {}


def _table(*classes: type[Frame]) -> dict[int, Decoding]:
    return {cls.KEY | RESPONSE_BIT if cls.RESPONSE else cls.KEY: (cls, _NONE) for cls in classes}


# Both directions: Tune, Heartbeat, Close and its response (§3).
_BOTH = (conn.Tune, conn.Heartbeat, conn.Close, conn.CloseResponse)

# What a client sends (the server codec decodes these, the client codec encodes them).
CLIENT_FRAMES: Final[Mapping[int, Decoding]] = {
    **_table(
        *_BOTH,
        publish.DeclarePublisher,
        publish.Publish,
        publish.QueryPublisherSequence,
        publish.DeletePublisher,
        consume.Subscribe,
        consume.Credit,
        consume.StoreOffset,
        consume.QueryOffset,
        consume.Unsubscribe,
        streams.Create,
        streams.Delete,
        streams.Metadata,
        conn.PeerProperties,
        conn.SaslHandshake,
        conn.SaslAuthenticate,
        conn.Open,
        streams.Route,
        streams.Partitions,
        consume.ConsumerUpdateResponse,
        conn.ExchangeCommandVersions,
        streams.StreamStats,
        streams.CreateSuperStream,
        streams.DeleteSuperStream,
        consume.ResolveOffsetSpec,
    ),
    Key.TUNE | RESPONSE_BIT: (conn.Tune, {"response": True}),  # the Java client (§5)
}

# What a server sends.
SERVER_FRAMES: Final[Mapping[int, Decoding]] = {
    **_table(
        *_BOTH,
        publish.DeclarePublisherResponse,
        publish.PublishConfirm,
        publish.PublishError,
        publish.QueryPublisherSequenceResponse,
        publish.DeletePublisherResponse,
        consume.SubscribeResponse,
        consume.Deliver,
        consume.CreditResponse,
        consume.QueryOffsetResponse,
        consume.UnsubscribeResponse,
        streams.CreateResponse,
        streams.DeleteResponse,
        streams.MetadataResponse,
        streams.MetadataUpdate,
        conn.PeerPropertiesResponse,
        conn.SaslHandshakeResponse,
        conn.SaslAuthenticateResponse,
        conn.OpenResponse,
        streams.RouteResponse,
        streams.PartitionsResponse,
        consume.ConsumerUpdate,
        conn.ExchangeCommandVersionsResponse,
        streams.StreamStatsResponse,
        streams.CreateSuperStreamResponse,
        streams.DeleteSuperStreamResponse,
        consume.ResolveOffsetSpecResponse,
    ),
    Key.ROUTE: (streams.RouteResponse, {"legacy_key": True}),  # 3.10 (§10)
    Key.PARTITIONS: (streams.PartitionsResponse, {"legacy_key": True}),
}


def encode_frame(frame: Frame, table: Mapping[int, Decoding]) -> bytes:
    """The whole frame, size prefix included; ``table`` is what the sender may send."""
    decoding = table.get(frame.wire_key)
    if decoding is None or decoding[0] is not type(frame):
        raise LocalProtocolError(f"{type(frame).__name__} is not sent this way")
    version = frame.version
    if version not in frame.VERSIONS:
        raise LocalProtocolError(f"{type(frame).__name__} has no version {version}")
    body = frame.encode_body()
    size = HEADER_SIZE + len(body)
    if size > 0xFFFF_FFFF:
        raise LocalProtocolError(f"a {size}-byte frame does not fit the uint32 size")
    return U32_BE.pack(size) + U16_BE.pack(frame.wire_key) + U16_BE.pack(version) + body


def decode_frame(data: bytes, table: Mapping[int, Decoding]) -> Frame:
    """One frame after its size prefix, exactly: bytes after the body are an error. Every
    error's hint is the code to close with (§4: 0x0d unknown frame)."""
    if len(data) < HEADER_SIZE:
        malformed(f"a {len(data)}-byte frame has no room for its key and version")
    key, version = U16_BE.unpack_from(data, 0)[0], U16_BE.unpack_from(data, 2)[0]
    decoding = table.get(key)
    if decoding is None:
        malformed(f"unknown frame key {key:#06x} (version {version})", ResponseCode.UNKNOWN_FRAME)
    cls, header = decoding
    if version not in cls.VERSIONS:
        malformed(f"{cls.__name__} has no version {version}")
    reader = Reader(data, HEADER_SIZE)
    frame = cls.decode(reader, version, **header)
    reader.expect_end(cls.__name__)
    return frame
