"""What the RabbitMQ Stream codec tests share: the captures, fresh codecs in both roles."""

from __future__ import annotations

import json
import string
from dataclasses import dataclass
from pathlib import Path

from protocols.rabbitmq_stream import (
    Frame,
    RabbitStreamClientCodec,
    RabbitStreamServerCodec,
)

MAX = 1 << 20
VECTORS_DIR = Path(__file__).parents[2] / "vectors" / "rabbitmq_stream"
CLIENT = "C->S"


@dataclass(frozen=True, slots=True)
class Captured:
    conn: str
    direction: str  # "C->S" or "S->C"
    name: str
    data: bytes


def _is_hex(text: str) -> bool:
    return bool(text) and len(text) % 2 == 0 and all(c in string.hexdigits for c in text)


def load_capture(file_name: str) -> list[Captured]:
    """Every frame of one capture file, in order; the probe file's notes are skipped."""
    frames = []
    for line in (VECTORS_DIR / file_name).read_text().splitlines():
        raw = json.loads(line)
        if isinstance(raw, list):
            conn, direction, name, hex_text = raw
        else:
            conn, direction, name, hex_text = raw["conn"], raw["dir"], raw["name"], raw["hex"]
        if _is_hex(hex_text):
            frames.append(Captured(str(conn), direction, name, bytes.fromhex(hex_text)))
    return frames


def server(max_frame_size: int = MAX) -> RabbitStreamServerCodec:
    return RabbitStreamServerCodec(max_frame_size)


def client(max_frame_size: int = MAX) -> RabbitStreamClientCodec:
    return RabbitStreamClientCodec(max_frame_size)


def receiver_of(direction: str) -> RabbitStreamServerCodec | RabbitStreamClientCodec:
    """The codec that reads frames travelling ``direction``."""
    return server() if direction == CLIENT else client()


def sender_of(direction: str) -> RabbitStreamServerCodec | RabbitStreamClientCodec:
    return client() if direction == CLIENT else server()


def decode_one(data: bytes, direction: str = CLIENT) -> Frame:
    codec = receiver_of(direction)
    codec.receive_data(data)
    frame = codec.next_frame()
    assert isinstance(frame, Frame), frame
    assert codec.trailing_data == b""
    return frame
