"""Shared receive buffer, integer primitives and protocol error types for every codec."""

from .buffer import ReceiveBuffer
from .errors import FrameTooLarge, LocalProtocolError, ProtocolError, RemoteProtocolError
from .primitives import (
    I16_BE,
    I32_BE,
    I32_LE,
    I64_BE,
    I64_LE,
    U8,
    U16_BE,
    U16_LE,
    U32_BE,
    U32_LE,
    U64_BE,
    U64_LE,
    decode_uvarint,
    decode_uvarlong,
    decode_varint,
    decode_varlong,
    encode_uvarint,
    encode_varint,
)
from .sentinel import NEED_DATA, NeedData

__all__ = [
    "I16_BE",
    "I32_BE",
    "I32_LE",
    "I64_BE",
    "I64_LE",
    "NEED_DATA",
    "U8",
    "U16_BE",
    "U16_LE",
    "U32_BE",
    "U32_LE",
    "U64_BE",
    "U64_LE",
    "FrameTooLarge",
    "LocalProtocolError",
    "NeedData",
    "ProtocolError",
    "ReceiveBuffer",
    "RemoteProtocolError",
    "decode_uvarint",
    "decode_uvarlong",
    "decode_varint",
    "decode_varlong",
    "encode_uvarint",
    "encode_varint",
]
