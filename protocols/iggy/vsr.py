"""The VSR framing (iggy.md §3): 256-byte request and reply headers, and the Eviction frame.

Only the fields a peer reads or echoes are kept; every other header byte is sent as 0 and
ignored on receive, as the SDK does (§3.2, §3.3: the client inspects only command, size,
status, operation and the Eviction fields).
"""

from __future__ import annotations

from dataclasses import dataclass

from protocols._wire import U32_LE, U64_LE, RemoteProtocolError

from .wire import pack_u8, pack_u32, pack_u64, pack_u128

__all__ = [
    "COMMAND_AT",
    "COMMAND_EVICTION",
    "COMMAND_REPLY",
    "COMMAND_REQUEST",
    "HEADER_SIZE",
    "OPERATION_AT",
    "Eviction",
    "ReplyHeader",
    "RequestHeader",
    "decode_reply_header",
    "decode_request_header",
    "encode_eviction",
    "encode_reply_header",
    "encode_request_header",
    "frame_size",
]

HEADER_SIZE = 256
COMMAND_REQUEST = 5
COMMAND_REPLY = 8
COMMAND_EVICTION = 13
_SIZE_AT = 48
COMMAND_AT = 60
OPERATION_AT = 176  # a request's operation (u8)


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestHeader:
    """§3.2. ``code`` is the classic command code at offset 196 (NonReplicated only)."""

    client: int
    request: int
    operation: int
    session: int = 0
    code: int = 0
    request_checksum: int = 0
    timestamp: int = 0
    user_id: int = 0  # the server's own business; never trusted


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplyHeader:
    """§3.3. ``op`` (offset 176) is where the real server puts the session number."""

    client: int
    request: int
    operation: int
    status: int = 0
    op: int = 0
    commit: int = 0
    request_checksum: int = 0
    timestamp: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Eviction:
    """§3.4: header only, ends the session; the versions are set for reason 14 only."""

    client: int
    reason: int
    server_protocol_version: int = 0
    server_protocol_version_min: int = 0


def frame_size(header: bytes) -> int:
    """The whole frame's size, header included (offset 48, §3.1)."""
    return int(U32_LE.unpack_from(header, _SIZE_AT)[0])


def _blank(size: int, command: int) -> bytearray:
    out = bytearray(HEADER_SIZE)
    out[_SIZE_AT : _SIZE_AT + 4] = pack_u32(size, "frame size")
    out[COMMAND_AT] = command
    return out


def encode_request_header(header: RequestHeader, body_size: int) -> bytes:
    out = _blank(HEADER_SIZE + body_size, COMMAND_REQUEST)
    out[128:144] = pack_u128(header.client, "client id")
    out[144:160] = pack_u128(header.request_checksum, "request checksum")
    out[160:168] = pack_u64(header.timestamp, "timestamp")
    out[168:176] = pack_u64(header.request, "request number")
    out[176] = pack_u8(header.operation, "operation")[0]
    out[184:192] = pack_u64(header.session, "session")
    out[192:196] = pack_u32(header.user_id, "user id")
    out[196:200] = pack_u32(header.code, "command code")
    return bytes(out)


def _u128(raw: bytes, at: int) -> int:
    return int.from_bytes(raw[at : at + 16], "little")


def _u64(raw: bytes, at: int) -> int:
    return int(U64_LE.unpack_from(raw, at)[0])


def _u32(raw: bytes, at: int) -> int:
    return int(U32_LE.unpack_from(raw, at)[0])


def decode_request_header(raw: bytes) -> RequestHeader:
    command = raw[COMMAND_AT]
    if command != COMMAND_REQUEST:
        raise RemoteProtocolError(f"VSR header command {command} is not Request (5)")
    return RequestHeader(
        client=_u128(raw, 128),
        request_checksum=_u128(raw, 144),
        timestamp=_u64(raw, 160),
        request=_u64(raw, 168),
        operation=raw[OPERATION_AT],
        session=_u64(raw, 184),
        user_id=_u32(raw, 192),
        code=_u32(raw, 196),
    )


def encode_reply_header(header: ReplyHeader, body_size: int) -> bytes:
    out = _blank(HEADER_SIZE + body_size, COMMAND_REPLY)
    out[128:144] = pack_u128(header.request_checksum, "request checksum")
    out[160:176] = pack_u128(header.client, "client id")
    out[176:184] = pack_u64(header.op, "op")
    out[184:192] = pack_u64(header.commit, "commit")
    out[192:200] = pack_u64(header.timestamp, "timestamp")
    out[200:208] = pack_u64(header.request, "request number")
    out[208] = pack_u8(header.operation, "operation")[0]
    out[216:220] = pack_u32(header.status, "status")
    return bytes(out)


def encode_eviction(eviction: Eviction) -> bytes:
    out = _blank(HEADER_SIZE, COMMAND_EVICTION)
    out[128:144] = pack_u128(eviction.client, "client id")
    out[144:148] = pack_u32(eviction.server_protocol_version, "protocol version")
    out[148:152] = pack_u32(eviction.server_protocol_version_min, "protocol version")
    out[255] = pack_u8(eviction.reason, "eviction reason")[0]
    return bytes(out)


def decode_reply_header(raw: bytes) -> ReplyHeader | Eviction:
    command = raw[COMMAND_AT]
    if command == COMMAND_EVICTION:
        return Eviction(
            client=_u128(raw, 128),
            reason=raw[255],
            server_protocol_version=_u32(raw, 144),
            server_protocol_version_min=_u32(raw, 148),
        )
    if command != COMMAND_REPLY:
        raise RemoteProtocolError(f"VSR header command {command} is neither Reply nor Eviction")
    return ReplyHeader(
        request_checksum=_u128(raw, 128),
        client=_u128(raw, 160),
        op=_u64(raw, 176),
        commit=_u64(raw, 184),
        timestamp=_u64(raw, 192),
        request=_u64(raw, 200),
        operation=raw[208],
        status=_u32(raw, 216),
    )
