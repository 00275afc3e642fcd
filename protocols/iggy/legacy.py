"""The legacy framing (iggy.md §9.1): requests ``[length u32 = 4 + payload][code u32][payload]``,
replies ``[status u32][length u32 = payload][payload]``, an error being ``[code][0]``."""

from __future__ import annotations

from protocols._wire import U32_LE, ReceiveBuffer, RemoteProtocolError

from .wire import pack_u32

__all__ = [
    "PREFIX_SIZE",
    "encode_legacy_reply",
    "encode_legacy_request",
    "read_legacy_reply",
    "read_legacy_request",
]

PREFIX_SIZE = 8


def encode_legacy_request(code: int, payload: bytes) -> bytes:
    return pack_u32(4 + len(payload), "request length") + pack_u32(code, "command code") + payload


def encode_legacy_reply(status: int, payload: bytes) -> bytes:
    return pack_u32(status, "status") + pack_u32(len(payload), "reply length") + payload


def _prefix(buffer: ReceiveBuffer) -> tuple[int, int] | None:
    raw = buffer.peek(PREFIX_SIZE)
    if raw is None:
        return None
    first, second = U32_LE.unpack_from(raw, 0)[0], U32_LE.unpack_from(raw, 4)[0]
    return int(first), int(second)


def read_legacy_request(buffer: ReceiveBuffer) -> tuple[int, bytes] | None:
    """``(code, payload)`` of the next whole request, or None (nothing consumed)."""
    prefix = _prefix(buffer)
    if prefix is None:
        return None
    length, code = prefix
    if length < 4:
        raise RemoteProtocolError(f"request length {length} leaves no room for its code")
    buffer.check_size(length)  # before waiting for (or allocating) the payload
    if not buffer.available(4 + length):
        return None
    buffer.consume_exactly(PREFIX_SIZE)
    payload = buffer.consume_exactly(length - 4)
    assert payload is not None
    return code, payload


def read_legacy_reply(buffer: ReceiveBuffer) -> tuple[int, bytes] | None:
    """``(status, payload)`` of the next whole reply, or None (nothing consumed)."""
    prefix = _prefix(buffer)
    if prefix is None:
        return None
    status, length = prefix
    buffer.check_size(length)
    if not buffer.available(PREFIX_SIZE + length):
        return None
    buffer.consume_exactly(PREFIX_SIZE)
    payload = buffer.consume_exactly(length)
    assert payload is not None
    return status, payload
