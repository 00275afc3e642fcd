"""Byte layouts of Rog frames: one encoder and one decoder per direction, shared by both roles.

Decoders read from a ``ReceiveBuffer`` and never commit or roll back; the codec does that, so
the same functions serve the listener (server role) and a backend adapter (client role).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import assert_never

from protocols._wire import U8, U64_BE, LocalProtocolError, ReceiveBuffer, RemoteProtocolError

from .frames import (
    Ack,
    CreateLog,
    Error,
    Fetch,
    FetchOk,
    Ok,
    Publish,
    Request,
    Response,
    UnknownCommand,
    message_too_large,
)

__all__ = [
    "ACK",
    "CREATE_LOG",
    "FETCH",
    "PUBLISH",
    "STATUS_ERROR",
    "STATUS_OK",
    "Incomplete",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
]

# Command bytes (rog.md §2); every other byte is an UnknownCommand.
CREATE_LOG = 0x00
PUBLISH = 0x01
FETCH = 0x02
ACK = 0x03

# First byte of every reply (rog.md §3).
STATUS_OK = 0x00
STATUS_ERROR = 0x01

_U8_MAX = 0xFF


@dataclass(frozen=True, slots=True)
class Incomplete:
    """The bytes stop before ``field``: wait for more, or at EOF report it as unparseable."""

    field: str


# --- encoding ---------------------------------------------------------------------------------


def _u8(value: int, what: str) -> bytes:
    if not 0 <= value <= _U8_MAX:
        raise LocalProtocolError(f"{what} {value} does not fit Rog's u8 field (0..255)")
    return U8.pack(value)


def _utf8(text: str, what: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise LocalProtocolError(f"{what} is not encodable as UTF-8: {exc}") from exc


def _short_string(text: str, what: str) -> bytes:
    # Names and groups carry a u8 size (rog.md §2: "names and groups are at most 255 bytes").
    raw = _utf8(text, what)
    if len(raw) > _U8_MAX:
        raise LocalProtocolError(f"{what} is {len(raw)} bytes; Rog's u8 size allows at most 255")
    return U8.pack(len(raw)) + raw


def _sized(raw: bytes) -> bytes:
    return U64_BE.pack(len(raw)) + raw


def encode_request(request: Request) -> bytes:
    if isinstance(request, CreateLog):
        return b"".join(
            (
                U8.pack(CREATE_LOG),
                _u8(request.partitions, "partitions"),
                _short_string(request.name, "name"),
            )
        )
    if isinstance(request, Publish):
        return b"".join(
            (
                U8.pack(PUBLISH),
                _u8(request.partition, "partition"),
                _short_string(request.name, "name"),
                _sized(request.data),
            )
        )
    if isinstance(request, Fetch | Ack):
        # rog.md §2/§9.1: the group size is a u8, not the README's u64.
        return b"".join(
            (
                U8.pack(FETCH if isinstance(request, Fetch) else ACK),
                _u8(request.partition, "partition"),
                _short_string(request.name, "name"),
                _short_string(request.group, "group"),
            )
        )
    if isinstance(request, UnknownCommand):
        if not ACK < request.code <= _U8_MAX:
            raise LocalProtocolError(f"command byte {request.code} is not an unknown Rog command")
        return U8.pack(request.code)
    assert_never(request)


def encode_response(response: Response) -> bytes:
    if isinstance(response, Ok):
        return U8.pack(STATUS_OK)
    if isinstance(response, FetchOk):
        return U8.pack(STATUS_OK) + _sized(response.data)
    if isinstance(response, Error):
        return U8.pack(STATUS_ERROR) + _sized(_utf8(response.text, "error text"))
    assert_never(response)


# --- decoding ---------------------------------------------------------------------------------


def _read_u8(buffer: ReceiveBuffer) -> int | None:
    raw = buffer.consume_exactly(1)
    return None if raw is None else raw[0]


def _read_u64(buffer: ReceiveBuffer) -> int | None:
    raw = buffer.consume_exactly(8)
    return None if raw is None else int(U64_BE.unpack(raw)[0])


def _read_short_string(buffer: ReceiveBuffer, field: str) -> str | Incomplete:
    size = _read_u8(buffer)
    if size is None:
        return Incomplete(f"{field} size")
    raw = buffer.consume_exactly(size)
    if raw is None:
        return Incomplete(field)
    # The server decodes with from_utf8_lossy (rog.md §2), so invalid UTF-8 is not an error.
    return raw.decode("utf-8", errors="replace")


def decode_request(buffer: ReceiveBuffer) -> Request | Incomplete:
    """Read one request; a publish body above ``buffer.max_frame_size`` raises FrameTooLarge."""
    command = _read_u8(buffer)
    if command is None:
        return Incomplete("command")
    if command > ACK:
        return UnknownCommand(code=command)
    # create-log's partition count sits where the others' partition does; both are "partition".
    partition = _read_u8(buffer)
    if partition is None:
        return Incomplete("partition")
    name = _read_short_string(buffer, "name")
    if isinstance(name, Incomplete):
        return name
    if command == CREATE_LOG:
        return CreateLog(name=name, partitions=partition)
    if command == PUBLISH:
        size = _read_u64(buffer)
        if size is None:
            return Incomplete("data size")
        # Refuse before waiting for the body: the real server reserves the declared size first
        # and dies on 2**62 or 2**64-1 (rog.md §1).
        buffer.check_size(size, hint=Error(text=message_too_large(size, buffer.max_frame_size)))
        data = buffer.consume_exactly(size)
        if data is None:
            return Incomplete("data")
        return Publish(name=name, partition=partition, data=data)
    # A README-style u64 group size reads as a u8 here too: group "" and the other 7 size bytes
    # and the group are left as trailing bytes, exactly like the real server (rog.md §2).
    group = _read_short_string(buffer, "group")
    if isinstance(group, Incomplete):
        return group
    if command == FETCH:
        return Fetch(name=name, partition=partition, group=group)
    return Ack(name=name, partition=partition, group=group)


def decode_response(buffer: ReceiveBuffer, expect_fetch: bool) -> Response | Incomplete:
    """Read one reply; ``expect_fetch`` says whether a status 00 carries a size and a message."""
    status = _read_u8(buffer)
    if status is None:
        return Incomplete("status")
    if status == STATUS_OK and not expect_fetch:
        return Ok()
    if status not in (STATUS_OK, STATUS_ERROR):
        raise RemoteProtocolError(f"reply status byte 0x{status:02x} is neither 00 nor 01")
    field = "data" if status == STATUS_OK else "text"
    size = _read_u64(buffer)
    if size is None:
        return Incomplete(f"{field} size")
    buffer.check_size(size)
    body = buffer.consume_exactly(size)
    if body is None:
        return Incomplete(field)
    if status == STATUS_OK:
        return FetchOk(data=body)
    return Error(text=body.decode("utf-8", errors="replace"))
