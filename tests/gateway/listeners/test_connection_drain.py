"""Drain at request boundaries (gateway/listeners/connection.py): a request whose frame has
begun to arrive when the gateway is told to stop is read to its end and answered; one whose rest
never comes is cut when limits.drain_timeout_s is over, without being blamed on the client.

In-process gateways on ephemeral ports (tests/conftest.py's config, drain_timeout_s 2); the
Rog protocol, whose publish frame can be sent in two halves on one connection.
"""

from __future__ import annotations

from pathlib import Path

import trio

from gateway.app import Running
from gateway.backends.embedded import open_embedded
from gateway.model import DEFAULT_STREAM, Read, Topic
from protocols._wire import NEED_DATA
from protocols.rog import CONNECTION_CLOSED, Ok, Publish, Response, RogClientCodec
from tests.conftest import gateway_config, start_gateway
from tests.helpers.connections import until_closed
from tests.helpers.rog_client import RogClient
from tests.helpers.waiting import eventually

BODY = b"half now, half after the signal " * 512


async def start(nursery: trio.Nursery, tmp_path: Path) -> Running:
    config = gateway_config(tmp_path / "data")
    running = await start_gateway(nursery, config)
    return running


def received(gw: Running) -> float:
    assert gw.metrics is not None
    return float(gw.metrics.bytes_received.labels("rog")._value.get())


def errors(gw: Running) -> float:
    assert gw.metrics is not None
    return sum(
        float(gw.metrics.connection_errors.labels("rog", reason)._value.get())
        for reason in ("protocol_error", "reset", "internal")
    )


async def answer(stream: trio.SocketStream, codec: RogClientCodec) -> Response | None:
    while (frame := codec.next_frame()) is NEED_DATA:
        data = await stream.receive_some(65536)
        if data:
            codec.receive_data(data)
        else:
            codec.receive_eof()
    return None if frame is CONNECTION_CLOSED else frame


async def half_sent(gw: Running, codec: RogClientCodec) -> tuple[trio.SocketStream, bytes]:
    """A connection with the first half of a publish frame read by the gateway; the rest."""
    host, port = gw.address("rog")
    assert await RogClient(host, port).create_log("held", 1) == Ok()
    frame = codec.send(Publish(name="held", partition=0, data=BODY))
    before = received(gw)
    stream = await trio.open_tcp_stream(host, port)
    await stream.send_all(frame[: len(frame) // 2])
    await eventually(lambda: received(gw) == before + len(frame) // 2)
    return stream, frame[len(frame) // 2 :]


async def test_a_request_begun_before_the_drain_is_answered(tmp_path: Path) -> None:
    codec = RogClientCodec()
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            gw = await start(nursery, tmp_path)
            host, port = gw.address("rog")
            stream, rest = await half_sent(gw, codec)
            idle = await trio.open_tcp_stream(host, port)  # nothing in flight on this one
            gw.shutdown()
            assert await until_closed(idle) == b""  # closed at once, between requests
            await idle.aclose()
            async with stream:
                await stream.send_all(rest)
                assert await answer(stream, codec) == Ok()
        # serve_gateway returned by itself once the answered connection closed.
    assert errors(gw) == 0
    async with open_embedded(tmp_path / "data", fsync="never") as store:
        result = await store.read(Read(topic=Topic(DEFAULT_STREAM, "held"), partition=0, offset=0))
    assert [m.value for b in result.batches for m in b.messages] == [BODY]


async def test_a_request_whose_rest_never_comes_is_cut_at_the_drain_timeout(
    tmp_path: Path,
) -> None:
    codec = RogClientCodec()
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            gw = await start(nursery, tmp_path)
            stream, _ = await half_sent(gw, codec)
            gw.shutdown()
            async with stream:
                # No answer: the gateway gives up on it when drain_timeout_s (2 s) is over.
                assert await until_closed(stream) == b""
    assert errors(gw) == 0
