"""Connection frames (rabbitmq-stream.md §5 "Connection", §7): handshake, Tune, Open, Close,
Heartbeat, ExchangeCommandVersions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .codes import RESPONSE_BIT, Key
from .frame import CodeResponse, Frame, Request
from .layout import (
    BYTES,
    BYTES16,
    CODE,
    PROPERTIES,
    STRING,
    U16,
    U32,
    ArrayOf,
    Kind,
    Nested,
    Optional,
    Properties,
    Struct,
)

__all__ = [
    "Close",
    "CloseResponse",
    "CommandVersion",
    "ExchangeCommandVersions",
    "ExchangeCommandVersionsResponse",
    "Heartbeat",
    "Open",
    "OpenResponse",
    "PeerProperties",
    "PeerPropertiesResponse",
    "SaslAuthenticate",
    "SaslAuthenticateResponse",
    "SaslHandshake",
    "SaslHandshakeResponse",
    "Tune",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class PeerProperties(Request):
    KEY: ClassVar[int] = Key.PEER_PROPERTIES
    LAYOUT: ClassVar[tuple[Kind, ...]] = (U32, PROPERTIES)
    properties: Properties = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class PeerPropertiesResponse(CodeResponse):
    KEY: ClassVar[int] = Key.PEER_PROPERTIES
    LAYOUT: ClassVar[tuple[Kind, ...]] = (*CodeResponse.LAYOUT, PROPERTIES)
    properties: Properties = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class SaslHandshake(Request):
    # No mechanism field: the 3.10 PROTOCOL.adoc was wrong (§5).
    KEY: ClassVar[int] = Key.SASL_HANDSHAKE


@dataclass(frozen=True, slots=True, kw_only=True)
class SaslHandshakeResponse(CodeResponse):
    KEY: ClassVar[int] = Key.SASL_HANDSHAKE
    LAYOUT: ClassVar[tuple[Kind, ...]] = (*CodeResponse.LAYOUT, ArrayOf(STRING))
    mechanisms: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class SaslAuthenticate(Request):
    """PLAIN data is ``\\0 user \\0 password``; data may be null (-1)."""

    KEY: ClassVar[int] = Key.SASL_AUTHENTICATE
    LAYOUT: ClassVar[tuple[Kind, ...]] = (U32, STRING, BYTES)
    mechanism: str
    data: bytes | None


@dataclass(frozen=True, slots=True, kw_only=True)
class SaslAuthenticateResponse(CodeResponse):
    """Nothing after the code unless a challenge is returned, which the server encodes with an
    int16 length (§5; the Java client would read an int32)."""

    KEY: ClassVar[int] = Key.SASL_AUTHENTICATE
    LAYOUT: ClassVar[tuple[Kind, ...]] = (*CodeResponse.LAYOUT, Optional(BYTES16))
    challenge: bytes | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Tune(Frame):
    """Both ways, no correlation id. The server proposes, the client answers with its values
    under the same key 0x0014 (rstream, rbfly) or 0x8014 (Java, ``response=True``); §5, §7.
    0 means unlimited / no heartbeat."""

    KEY: ClassVar[int] = Key.TUNE
    LAYOUT: ClassVar[tuple[Kind, ...]] = (U32, U32)
    frame_max: int
    heartbeat: int
    response: bool = False  # not a wire field: the key's response bit

    @property
    def wire_key(self) -> int:
        return self.KEY | RESPONSE_BIT if self.response else self.KEY


@dataclass(frozen=True, slots=True, kw_only=True)
class Open(Request):
    KEY: ClassVar[int] = Key.OPEN
    LAYOUT: ClassVar[tuple[Kind, ...]] = (U32, STRING)
    virtual_host: str


@dataclass(frozen=True, slots=True, kw_only=True)
class OpenResponse(CodeResponse):
    """``properties`` None: 3.10.8 leaves the array out when it is empty (a failure)."""

    KEY: ClassVar[int] = Key.OPEN
    LAYOUT: ClassVar[tuple[Kind, ...]] = (*CodeResponse.LAYOUT, Optional(PROPERTIES))
    properties: Properties | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Close(Request):
    """Either side; the server uses correlation id 1 for its own (§5)."""

    KEY: ClassVar[int] = Key.CLOSE
    LAYOUT: ClassVar[tuple[Kind, ...]] = (U32, CODE, STRING)
    code: int
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CloseResponse(CodeResponse):
    KEY: ClassVar[int] = Key.CLOSE


@dataclass(frozen=True, slots=True, kw_only=True)
class Heartbeat(Frame):
    KEY: ClassVar[int] = Key.HEARTBEAT


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandVersion(Struct):
    LAYOUT: ClassVar[tuple[Kind, ...]] = (U16, U16, U16)
    key: int
    min_version: int
    max_version: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ExchangeCommandVersions(Request):
    KEY: ClassVar[int] = Key.EXCHANGE_COMMAND_VERSIONS
    LAYOUT: ClassVar[tuple[Kind, ...]] = (U32, ArrayOf(Nested(CommandVersion)))
    versions: tuple[CommandVersion, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ExchangeCommandVersionsResponse(CodeResponse):
    """rstream reads the list by position ``key - 1``: keep it in key order (§5)."""

    KEY: ClassVar[int] = Key.EXCHANGE_COMMAND_VERSIONS
    LAYOUT: ClassVar[tuple[Kind, ...]] = (
        *CodeResponse.LAYOUT,
        ArrayOf(Nested(CommandVersion)),
    )
    versions: tuple[CommandVersion, ...] = ()
