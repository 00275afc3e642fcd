"""Hypothesis properties of the RabbitMQ Stream codec: a round trip for every frame class in the
direction it travels, and fuzzing (any bytes decode or raise RemoteProtocolError, nothing
else), in both roles."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocols._wire import NEED_DATA, RemoteProtocolError
from protocols.rabbitmq_stream import (
    CLIENT_FRAMES,
    CONNECTION_CLOSED,
    SERVER_FRAMES,
    Frame,
)
from tests.protocols.rabbitmq_stream.strategies import frames
from tests.protocols.rabbitmq_stream.support import CLIENT, client, decode_one, sender_of, server

FAST = settings(max_examples=40, deadline=None)
FUZZ = settings(max_examples=400, deadline=None)

CASES = sorted(
    {(CLIENT, cls) for cls, _ in CLIENT_FRAMES.values()}
    | {("S->C", cls) for cls, _ in SERVER_FRAMES.values()},
    key=lambda c: (c[0], c[1].__name__),
)


def test_every_command_of_section_3_has_frames_both_ways() -> None:
    keys = {cls.KEY for _, cls in CASES}
    assert keys == set(range(0x01, 0x20))
    # 28 client classes + 30 server classes; Tune, Heartbeat, Close and CloseResponse are in both.
    assert len(CASES) == 58


@pytest.mark.parametrize(("direction", "cls"), CASES, ids=lambda v: getattr(v, "__name__", v))
@FAST
@given(data=st.data())
def test_round_trip(direction: str, cls: type[Frame], data: st.DataObject) -> None:
    frame = data.draw(frames(cls, from_client=direction == CLIENT))
    wire = sender_of(direction).send(frame)
    assert decode_one(wire, direction) == frame
    assert sender_of(direction).send(decode_one(wire, direction)) == wire


def _drain_or_refuse(codec: Any, data: bytes) -> None:
    codec.receive_data(data)
    codec.receive_eof()
    try:
        for _ in range(len(data) + 2):
            frame = codec.next_frame()
            if frame is NEED_DATA or frame is CONNECTION_CLOSED:
                return
            assert isinstance(frame, Frame)
    except RemoteProtocolError:
        return


@FUZZ
@given(data=st.binary(max_size=200))
def test_fuzz_arbitrary_bytes(data: bytes) -> None:
    _drain_or_refuse(server(), data)
    _drain_or_refuse(client(), data)


@FUZZ
@given(
    key=st.sampled_from(sorted(set(CLIENT_FRAMES) | set(SERVER_FRAMES))),
    version=st.sampled_from([1, 2, 3]),
    body=st.binary(max_size=80),
)
def test_fuzz_bodies_of_known_keys(key: int, version: int, body: bytes) -> None:
    frame = (4 + len(body)).to_bytes(4, "big") + key.to_bytes(2, "big")
    frame += version.to_bytes(2, "big") + body
    _drain_or_refuse(server(), frame)
    _drain_or_refuse(client(), frame)
