"""Shared receive buffer, integer primitives, protocol error types and the SASL PLAIN parser
for every codec."""

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
from .reader import BodyReader
from .receiver import Receiver
from .sasl import MalformedPlain, PlainCredentials, PlainNotUtf8, parse_plain
from .sentinel import CONNECTION_CLOSED, NEED_DATA, ConnectionClosed, NeedData

__all__ = [
    "CONNECTION_CLOSED",
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
    "BodyReader",
    "ConnectionClosed",
    "FrameTooLarge",
    "LocalProtocolError",
    "MalformedPlain",
    "NeedData",
    "PlainCredentials",
    "PlainNotUtf8",
    "ProtocolError",
    "ReceiveBuffer",
    "Receiver",
    "RemoteProtocolError",
    "decode_uvarint",
    "decode_uvarlong",
    "decode_varint",
    "decode_varlong",
    "encode_uvarint",
    "encode_varint",
    "parse_plain",
]
