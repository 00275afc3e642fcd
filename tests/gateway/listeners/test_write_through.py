"""A connection writes a frame itself while its writer task has none queued (``WriteThrough``,
gateway/gathered.py); what the socket does not take at once, and every frame sent while one is
queued, goes through the writer, so the client reads every frame whole and in the order sent.
And a small rest of a frame is read at once when it has come (``read_now``)."""

from __future__ import annotations

import os
import socket

import pytest
import trio
import trio.testing
from prometheus_client import CollectorRegistry

from gateway.gathered import SEND_LOWAT, WriteThrough, read_now
from gateway.listeners.connection import Connection, Limits
from gateway.listeners.serve import _writer
from gateway.metrics import Metrics
from protocols._wire import Gather

from .test_writer import _frames, _joined, _received

_STEP_S = 20  # every network step here is bounded


def _pair(send_buffer: int | None = None) -> tuple[trio.SocketStream, trio.SocketStream]:
    a, b = socket.socketpair()
    if send_buffer is not None:
        a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_buffer)
    return (
        trio.SocketStream(trio.socket.from_stdlib_socket(a)),
        trio.SocketStream(trio.socket.from_stdlib_socket(b)),
    )


def _connection(
    stream: trio.abc.Stream,
) -> tuple[Connection, trio.MemoryReceiveChannel[bytes | Gather]]:
    send, receive = trio.open_memory_channel[bytes | Gather](64)
    conn = Connection(
        stream, send, protocol="kafka", conn_id=1, peer="test", limits=Limits(),
        metrics=Metrics(CollectorRegistry(), process=False),
    )  # fmt: skip
    return conn, receive


async def test_a_frame_the_socket_takes_is_written_without_the_writer() -> None:
    server, client = _pair()
    async with server, client:
        conn, queue = _connection(server)
        with trio.fail_after(_STEP_S):
            await conn.send(b"hello")
            await conn.send(Gather([b"head ", memoryview(b"and view")], 13))
            # No writer task runs: the frames went out from the sending task, none was queued.
            assert conn.through.queued == 0
            assert queue.statistics().current_buffer_used == 0
            assert await _received(client, 18) == b"hellohead and view"


async def test_frames_behind_a_queued_one_wait_for_it_and_all_arrive_in_order() -> None:
    server, client = _pair(send_buffer=4096)  # the big frames cannot go at once
    async with server, client:
        conn, queue = _connection(server)
        frames = _frames()
        with trio.fail_after(_STEP_S):
            for frame in frames:  # no writer yet: what the socket did not take stays queued
                await conn.send(frame)
            assert conn.through.queued == queue.statistics().current_buffer_used > 0
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_writer, server, queue, conn.through)
                got = await _received(client, len(_joined(frames)))
                nursery.cancel_scope.cancel()
        assert got == _joined(frames)
        assert conn.through.queued == 0  # the writer counted off all it wrote


async def test_nothing_is_written_through_without_a_plain_socket() -> None:
    left, _ = trio.testing.memory_stream_pair()  # the TLS case: no socket under the stream
    through = WriteThrough(left)
    frame = Gather([b"a", b"b"], 2)
    assert through.write(frame) is frame
    assert read_now(left, 10) is None


async def test_a_closed_socket_hands_the_frame_on() -> None:
    server, client = _pair()
    through = WriteThrough(server)
    await server.aclose()
    await client.aclose()
    assert through.write(b"late") == b"late"  # the writer's own write reports the closed socket
    assert read_now(server, 10) is None


def test_a_writing_task_yields_every_sixteenth_write() -> None:
    left, _ = trio.testing.memory_stream_pair()
    through = WriteThrough(left)
    due = [through.yield_due() for _ in range(48)]
    assert [i for i, d in enumerate(due) if d] == [15, 31, 47]


async def test_read_now_takes_what_has_come_and_nothing_more() -> None:
    server, client = _pair()
    async with server, client:
        with trio.fail_after(_STEP_S):
            assert read_now(server, 10) is None  # nothing yet: no wait
            await client.send_all(b"0123456789abc")
            await trio.testing.wait_all_tasks_blocked()
            assert read_now(server, 10) == b"0123456789"
            assert read_now(server, 10) == b"abc"
            assert read_now(server, 10) is None
            await client.send_eof()
            assert read_now(server, 10) == b""  # the end of the stream


async def _tcp_pair() -> tuple[trio.SocketStream, trio.SocketStream]:
    listener = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
    async with listener:
        port = listener.socket.getsockname()[1]
        client = await trio.open_tcp_stream("127.0.0.1", port)
        server = await listener.accept()
    assert isinstance(server, trio.SocketStream)
    return server, client


def _unsent_allowed(stream: trio.SocketStream) -> int:
    return stream.socket.getsockopt(socket.IPPROTO_TCP, socket.TCP_NOTSENT_LOWAT)


@pytest.mark.skipif(not hasattr(socket, "TCP_NOTSENT_LOWAT"), reason="TCP_NOTSENT_LOWAT")
async def test_a_big_frame_goes_into_the_socket_in_one_write() -> None:
    """trio holds every socket stream to 16 KiB unsent (TCP_NOTSENT_LOWAT); a connection lifts
    that, so a reply of 512 KiB to a client that has not read yet is taken by one write (what
    the peer's window allows sent, the rest kept by the kernel), not handed to the writer to go
    out in window-sized pieces, a wake each."""
    server, client = await _tcp_pair()
    async with server, client:
        assert _unsent_allowed(server) == 16 << 10  # trio's
        conn, queue = _connection(server)
        assert _unsent_allowed(server) == SEND_LOWAT
        body = os.urandom(512 << 10)
        with trio.fail_after(_STEP_S):
            await conn.send(Gather([b"head", memoryview(body)], 4 + len(body)))
            assert conn.through.queued == 0
            assert queue.statistics().current_buffer_used == 0
            assert await _received(client, 4 + len(body)) == b"head" + body
