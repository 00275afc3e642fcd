"""Captures of real clients and RabbitMQ 3.10.8: every frame decodes and re-encodes byte for
byte in the role that sent it, and each connection's byte stream decodes three ways."""

from __future__ import annotations

from collections import Counter
from itertools import groupby

import pytest

from protocols.rabbitmq_stream import (
    CONNECTION_CLOSED,
    Deliver,
    Frame,
    Key,
    RouteResponse,
)
from tests.helpers.feeding import feed_three_ways
from tests.protocols.rabbitmq_stream.support import (
    Captured,
    decode_one,
    load_capture,
    receiver_of,
    sender_of,
)

# file -> frames; pinned so a lost or unreadable line fails the suite.
COUNTS = {
    "capture-rstream.jsonl": 75,
    "capture-rbfly.jsonl": 59,
    "capture-rstream-sac.jsonl": 30,
    "capture-rstream-key.jsonl": 13,
    "capture-rstream-hash.jsonl": 13,
    "capture-probe-3.10.8.jsonl": 113,
}
CAPTURES = {name: load_capture(name) for name in COUNTS}
ALL = [(name, i, f) for name, frames in CAPTURES.items() for i, f in enumerate(frames)]


def test_frame_counts_are_pinned() -> None:
    assert {name: len(frames) for name, frames in CAPTURES.items()} == COUNTS


@pytest.mark.parametrize(("name", "index", "captured"), ALL, ids=lambda v: str(v)[:40])
def test_every_captured_frame_round_trips(name: str, index: int, captured: Captured) -> None:
    frame = decode_one(captured.data, captured.direction)
    assert sender_of(captured.direction).send(frame) == captured.data


def test_the_captures_cover_what_the_clients_send() -> None:
    seen = Counter(type(decode_one(f.data, f.direction)).__name__ for _, _, f in ALL)
    # §9.4 plus the probe's error paths: 44 frame classes, each at least once.
    assert len(seen) == 44
    assert seen["Deliver"] == 10 and seen["Publish"] == 9 and seen["Tune"] == 28


def test_deliver_chunks_are_opaque_and_whole() -> None:
    delivers = [decode_one(f.data, f.direction) for _, _, f in ALL if f.name.startswith("Deliver")]
    assert len(delivers) == 10
    for frame in delivers:
        assert isinstance(frame, Deliver) and frame.version == 1
        assert frame.committed_chunk_id is None
        assert frame.chunk[0] == 0x50  # Osiris magic 5, version 0 (§6)
        data_length = int.from_bytes(frame.chunk[36:40], "big")
        assert len(frame.chunk) == 48 + data_length  # no bloom, no trailer sent (§6)


def test_3_10_route_and_partitions_responses_keep_their_key() -> None:
    replies = [
        decode_one(f.data, f.direction)
        for _, _, f in ALL
        if f.direction == "S->C" and f.data[4:6] in (b"\x00\x18", b"\x00\x19")
    ]
    assert len(replies) == 5  # Route: probe 2, rstream 1; Partitions: probe, rstream
    assert all(getattr(r, "legacy_key", False) for r in replies)
    assert any(isinstance(r, RouteResponse) and r.wire_key == Key.ROUTE for r in replies)


def _streams() -> list[tuple[str, bytes]]:
    """Each (file, connection, direction) as one byte stream, in capture order."""
    out = []
    for name, frames in CAPTURES.items():
        key = lambda f: (f.conn, f.direction)  # noqa: E731
        for (conn, direction), group in groupby(sorted(frames, key=key), key=key):
            out.append((f"{name}:{conn}:{direction}", direction, b"".join(f.data for f in group)))
    return [(label, direction + "|" + data.hex()) for label, direction, data in out]


@pytest.mark.parametrize(("label", "packed"), _streams(), ids=lambda v: str(v)[:50])
def test_each_connection_decodes_three_ways(label: str, packed: str) -> None:
    direction, hex_text = packed.split("|")
    data = bytes.fromhex(hex_text)
    frames = feed_three_ways(
        lambda: receiver_of(direction), data, eof=True, stop_at=(CONNECTION_CLOSED,)
    )
    assert frames and all(isinstance(f, Frame) for f in frames)
    assert b"".join(sender_of(direction).send(f) for f in frames) == data  # type: ignore[arg-type]
