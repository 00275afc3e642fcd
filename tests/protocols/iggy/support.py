"""What the Iggy codec tests share: the §10 vectors, fresh codecs, and adapters that give the
codecs the ``next_frame`` shape of ``tests.helpers.feeding``."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protocols.iggy import (
    Command,
    Era,
    Framing,
    IggyClientCodec,
    IggyReply,
    IggyRequest,
    IggyServerCodec,
    RequestHeader,
)
from protocols.iggy.vsr import decode_request_header
from tests.helpers.feeding import CodecFeed

MAX = 1 << 20
VECTORS_FILE = Path(__file__).parents[2] / "vectors" / "iggy" / "frames.jsonl"


@dataclass(frozen=True, slots=True)
class Vector:
    id: str
    framing: Framing
    era: Era
    direction: str  # "request" (a client produced it) or "reply" (a server did)
    scope: str  # "frame" (whole frame) or "body" (payload after the VSR header)
    code: int
    data: bytes
    raw: dict[str, Any]


def load_vectors() -> dict[str, Vector]:
    vectors = {}
    for line in VECTORS_FILE.read_text().splitlines():
        raw = json.loads(line)
        vectors[raw["id"]] = Vector(
            id=raw["id"],
            framing=Framing(raw["framing"]),
            era=Era(raw["era"]),
            direction=raw["direction"],
            scope=raw["scope"],
            code=raw["code"],
            data=bytes.fromhex(raw["hex"]),
            raw=raw,
        )
    return vectors


VECTORS = load_vectors()


def server(era: Era = Era.B) -> IggyServerCodec:
    return IggyServerCodec(max_frame_size=MAX, legacy_era=era)


def client(era: Era = Era.C, *, client_id: int = 0x1234) -> IggyClientCodec:
    framing = Framing.VSR if era is Era.C else Framing.LEGACY
    return IggyClientCodec(framing, era=era, client_id=client_id, max_frame_size=MAX)


def client_like(header: RequestHeader) -> IggyClientCodec:
    """A VSR client whose next request gets the client id, session and counter of ``header``."""
    codec = client(client_id=header.client)
    codec.session = header.session
    codec.request_number = header.request
    return codec


def vsr_header_of(frame: bytes) -> RequestHeader:
    return decode_request_header(frame[:256])


def decode_one(data: bytes, era: Era = Era.B) -> IggyRequest:
    codec = server(era)
    codec.receive_data(data)
    request = codec.next_request()
    assert isinstance(request, IggyRequest), request
    assert codec.trailing_data == b""
    return request


def answer(request: Command, reply: bytes, era: Era = Era.C) -> IggyReply:
    """What a client that sent ``request`` makes of ``reply``."""
    codec = client(era)
    codec.send(request)
    codec.receive_data(reply)
    result = codec.next_reply()
    assert isinstance(result, IggyReply), result
    assert codec.trailing_data == b""
    return result


class ServerFeed(CodecFeed):
    def __init__(self, era: Era = Era.B, max_frame_size: int = MAX) -> None:
        codec = IggyServerCodec(max_frame_size=max_frame_size, legacy_era=era)
        super().__init__(codec, codec.next_request)


class ClientFeed(CodecFeed):
    """A client codec with ``commands`` already sent, ready for their replies."""

    def __init__(self, commands: list[Command], era: Era = Era.C) -> None:
        codec = client(era)
        for command in commands:
            codec.send(command)
        super().__init__(codec, codec.next_reply)


def short_id(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
