"""The connection pump's bounds on what a client may cost before it logs in and while a frame
arrives (gateway/listeners/connection.py): the pre-login frame size, the login deadline and the
request deadline (slowloris), each counted under its reason.

In process, on an ephemeral port, with a fake protocol: ``[u32 size][payload]`` frames; the
payload ``login`` logs the connection in, any frame is answered with ``ok <size>``.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import socket
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio
from prometheus_client import CollectorRegistry

from gateway.listeners.connection import Connection, Limits
from gateway.listeners.limits import BUFFERED
from gateway.listeners.serve import ListenerInfo, serve_protocol
from gateway.metrics import Metrics
from protocols._wire import CONNECTION_CLOSED, NEED_DATA, ConnectionClosed, NeedData, Receiver
from tests.helpers.connections import until_closed
from tests.helpers.waiting import eventually

SIZE = struct.Struct(">I")
FULL = 1 << 20  # the listener's max_frame_bytes
PREAUTH = 1024


class SizedCodec(Receiver):
    """``[u32 size][payload]``, the size checked against the limit before waiting for the rest.
    Each read's size goes to ``READS``."""

    __slots__ = ()

    def receive_data(self, data: bytes) -> None:
        READS.append(len(data))
        super().receive_data(data)

    def next_frame(self) -> bytes | NeedData | ConnectionClosed:
        buffer = self._buffer
        head = buffer.consume_exactly(SIZE.size)
        if head is not None:
            (size,) = SIZE.unpack(head)
            buffer.check_size(size)
            body = buffer.consume_exactly(size)
            if body is not None:
                buffer.commit()
                return body
        buffer.rollback()
        return self._idle("frame")


RECEIVES: list[int] = []  # how many receives each frame took (a test clears it first)
READS: list[int] = []  # the size of each read (a test clears it first)
CONNECTIONS: list[Connection] = []  # each connection handled (a test clears it first)
MID_FRAME_WAITS: list[int] = []  # the size held at each wait for the rest of a frame (ditto)


async def handle(conn: Connection) -> None:
    CONNECTIONS.append(conn)
    codec = SizedCodec(FULL)
    receives = 0
    while True:
        frame = codec.next_frame()
        if frame is NEED_DATA:
            if codec.buffered:
                MID_FRAME_WAITS.append(codec.buffered)
            await conn.feed(codec)
            receives += 1
            continue
        if frame is CONNECTION_CLOSED:
            return
        assert isinstance(frame, bytes)
        RECEIVES.append(receives)
        receives = 0
        if frame == b"login":
            conn.authenticated()
        await conn.send(b"ok %d\n" % len(frame))


def frame(payload: bytes) -> bytes:
    return SIZE.pack(len(payload)) + payload


class Listener:
    def __init__(self, info: ListenerInfo, metrics: Metrics) -> None:
        self.host, self.port = info.addresses[0]
        self.metrics = metrics

    def errors(self, reason: str) -> float:
        value = self.metrics.registry.get_sample_value(
            "streamgate_connection_errors_total", {"protocol": "rog", "reason": reason}
        )
        assert value is not None
        return value

    async def connect(self) -> trio.SocketStream:
        return await trio.open_tcp_stream(self.host, self.port)


@asynccontextmanager
async def listening(
    *,
    authenticates: bool = True,
    idle_timeout_s: float = 600.0,
    auth_timeout_s: float = 10.0,
    request_timeout_s: float = 30.0,
    max_buffered_bytes: int = 512 << 20,
) -> AsyncIterator[Listener]:
    metrics = Metrics(CollectorRegistry())
    limits = Limits(
        max_frame_bytes=FULL,
        max_preauth_frame_bytes=PREAUTH,
        idle_timeout_s=idle_timeout_s,
        auth_timeout_s=auth_timeout_s,
        request_timeout_s=request_timeout_s,
        max_buffered_bytes=max_buffered_bytes,
    )
    serve = functools.partial(
        serve_protocol, "rog", handle, host="127.0.0.1", port=0, metrics=metrics,
        limits=limits, authenticates=authenticates,
    )  # fmt: skip
    async with trio.open_nursery() as nursery:
        info = await nursery.start(serve)
        yield Listener(info, metrics)
        nursery.cancel_scope.cancel()


async def answers(stream: trio.SocketStream, count: int) -> bytes:
    got = b""
    while got.count(b"\n") < count:
        data = await stream.receive_some(65536)
        assert data, f"closed after {got!r}"
        got += data
    return got


async def test_a_frame_above_the_preauth_limit_is_refused_unread() -> None:
    with trio.fail_after(10):
        async with listening() as lst:
            stream = await lst.connect()
            async with stream:
                # A small frame is served before the login; a big one closes the connection
                # as soon as its size is read, without waiting for (or buffering) the rest.
                await stream.send_all(frame(b"x" * PREAUTH))
                assert await answers(stream, 1) == b"ok 1024\n"
                await stream.send_all(SIZE.pack(PREAUTH + 1) + b"y" * 100)
                assert await until_closed(stream) == b""
            assert lst.errors("preauth_frame_too_large") == 1
            assert lst.errors("frame_too_large") == 0


async def test_the_limit_is_max_frame_bytes_once_logged_in() -> None:
    with trio.fail_after(10):
        async with listening() as lst:
            stream = await lst.connect()
            async with stream:
                await stream.send_all(frame(b"login"))
                await stream.send_all(frame(b"z" * (FULL - 1)))
                assert await answers(stream, 2) == b"ok 5\nok %d\n" % (FULL - 1)
                await stream.send_all(SIZE.pack(FULL + 1))
                assert await until_closed(stream) == b""
            assert lst.errors("frame_too_large") == 1
            assert lst.errors("preauth_frame_too_large") == 0


async def test_a_listener_without_login_has_no_preauth_limit_nor_deadline() -> None:
    with trio.fail_after(10):
        async with listening(authenticates=False, auth_timeout_s=0.2) as lst:
            stream = await lst.connect()
            async with stream:
                await stream.send_all(frame(b"z" * (PREAUTH * 4)))
                assert await answers(stream, 1) == b"ok 4096\n"
                await trio.sleep(0.5)  # past auth_timeout_s: nothing to log in to
                await stream.send_all(frame(b"again"))
                assert await answers(stream, 1) == b"ok 5\n"
            assert lst.errors("auth_timeout") == 0


async def test_a_connection_not_logged_in_is_closed_at_the_deadline() -> None:
    with trio.fail_after(10):
        async with listening(auth_timeout_s=0.5) as lst:
            # Before connecting: each deadline starts when the gateway accepts, later than this
            # (a loaded machine's login round trip below once took half the deadline).
            t0 = trio.current_time()
            idle, busy, logged_in = await lst.connect(), await lst.connect(), await lst.connect()
            await logged_in.send_all(frame(b"login"))
            assert await answers(logged_in, 1) == b"ok 5\n"
            # Small frames keep coming on ``busy``: working is not logging in.
            async with trio.open_nursery() as nursery:

                async def chatter() -> None:
                    with pytest.raises((trio.BrokenResourceError, trio.ClosedResourceError)):
                        while True:
                            await busy.send_all(frame(b"ping"))
                            await trio.sleep(0.05)

                nursery.start_soon(chatter)
                await until_closed(idle)
                assert trio.current_time() - t0 >= 0.4
                await until_closed(busy)
            assert lst.errors("auth_timeout") == 2
            # The one that logged in stays.
            await trio.sleep(0.3)
            await logged_in.send_all(frame(b"still"))
            assert await answers(logged_in, 1) == b"ok 5\n"
            for stream in (idle, busy, logged_in):
                await stream.aclose()


async def trickle(stream: trio.SocketStream, data: bytes, every_s: float) -> None:
    with pytest.raises((trio.BrokenResourceError, trio.ClosedResourceError)):
        for i in range(len(data)):
            await stream.send_all(data[i : i + 1])
            await trio.sleep(every_s)
        await trio.sleep_forever()


@pytest.mark.parametrize("authenticates", [False, True])
async def test_a_frame_trickled_in_is_cut_at_the_request_deadline(authenticates: bool) -> None:
    # One byte every 0.05 s keeps a 0.2 s idle timer from ever running out: the request
    # deadline ends it, counted from its first byte.
    with trio.fail_after(10):
        async with listening(
            authenticates=authenticates, idle_timeout_s=0.2, request_timeout_s=0.8
        ) as lst:
            stream = await lst.connect()
            if authenticates:
                await stream.send_all(frame(b"login"))
                assert await answers(stream, 1) == b"ok 5\n"
            t0 = trio.current_time()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(trickle, stream, frame(b"s" * 200), 0.05)
                assert await until_closed(stream) == b""
            assert 0.7 <= trio.current_time() - t0 < 3
            await stream.aclose()
            assert lst.errors("request_timeout") == 1
            assert lst.errors("idle_timeout") == 0


async def test_the_request_deadline_is_per_frame() -> None:
    # Frames sent back to back for longer than request_timeout_s, each cut across two chunks
    # (the next one beginning in the chunk that ends this one): every frame gets its own
    # deadline, so a client that streams for long is not taken for a slow one.
    payload = frame(b"p" * 3000)
    with trio.fail_after(10):
        async with listening(authenticates=False, request_timeout_s=0.5) as lst:
            stream = await lst.connect()
            async with stream:
                sent = 0
                t0 = trio.current_time()
                pending = payload[:1000]
                await stream.send_all(pending)
                while trio.current_time() - t0 < 1.5:
                    # the rest of one frame and the beginning of the next, 0.1 s apart
                    await trio.sleep(0.1)
                    await stream.send_all(payload[1000:] + payload[:1000])
                    sent += 1
                assert await answers(stream, sent) == b"ok 3000\n" * sent
            assert lst.errors("request_timeout") == 0


async def test_a_silent_connection_between_frames_is_idle_not_slow() -> None:
    with trio.fail_after(10):
        async with listening(authenticates=False, idle_timeout_s=0.3, request_timeout_s=0.1) as lst:
            stream = await lst.connect()
            async with stream:
                await stream.send_all(frame(b"a"))
                assert await answers(stream, 1) == b"ok 1\n"
                assert await until_closed(stream) == b""
            assert lst.errors("idle_timeout") == 1
            assert lst.errors("request_timeout") == 0


async def test_partial_frames_are_bounded_for_the_whole_process() -> None:
    # A listener without login takes max_frame_bytes frames from anyone: on many connections at
    # once, the total is what is bounded (Buffered). Three clients each send 600 KiB of a 1 MiB
    # frame under a 1.5 MiB budget: the one that crosses it is closed and counted; once another
    # leaves, the first finishes its frame and is answered; small frames always are; nothing
    # stays counted afterwards.
    budget, part, size = 1536 << 10, 600 << 10, FULL - 8
    with trio.fail_after(20):
        async with listening(authenticates=False, max_buffered_bytes=budget) as listener:
            base = BUFFERED.total
            streams = [await listener.connect() for _ in range(3)]
            for held, stream in enumerate(streams, 1):
                # the third may be closed while it still sends
                with contextlib.suppress(trio.BrokenResourceError):
                    await stream.send_all(SIZE.pack(size) + bytes(part))
                if held < 3:  # read and counted before the next client sends
                    await eventually(functools.partial(_holds, base + held * (part + SIZE.size)))
            closed = [s for s in streams if await _closed_soon(s)]
            assert closed == [streams[2]]
            assert listener.errors("memory") == 1
            small = await listener.connect()
            await small.send_all(frame(b"x" * 100))
            assert await answers(small, 1) == b"ok 100\n"
            await streams[1].aclose()
            await eventually(lambda: BUFFERED.total <= base + part + SIZE.size)  # released
            await streams[0].send_all(bytes(size - part))
            assert await answers(streams[0], 1) == b"ok %d\n" % size
            for stream in (streams[0], streams[2], small):
                await stream.aclose()
            await eventually(lambda: BUFFERED.total == base)  # all released


def _holds(at_least: int) -> bool:
    return BUFFERED.total >= at_least


async def _closed_soon(stream: trio.SocketStream) -> bool:
    with trio.move_on_after(0.5):
        try:
            return await stream.receive_some(1) == b""
        except trio.BrokenResourceError:
            return True
    return False


BIG = 600_000


async def test_the_rest_of_a_big_frame_is_received_in_one_wake() -> None:
    """Once a big frame's size is read, the listener's socket wakes its reader only when the
    whole rest has come (SO_RCVLOWAT): the frame, sent in 6 bursts 50 ms apart, takes a few
    receives (the first read, what was already there, then the rest), not one a burst (7 or
    more). A small frame right after is answered at once: the mark is back to one byte."""
    with trio.fail_after(10):
        async with listening(authenticates=False) as lst:
            stream = await lst.connect()
            async with stream:
                RECEIVES.clear()
                data = frame(b"b" * BIG)
                step = len(data) // 6 + 1
                for at in range(0, len(data), step):
                    await stream.send_all(data[at : at + step])
                    await trio.sleep(0.05)
                assert await answers(stream, 1) == b"ok %d\n" % BIG
                await stream.send_all(frame(b"small"))
                assert await answers(stream, 1) == b"ok 5\n"
            assert len(RECEIVES) == 2 and RECEIVES[0] <= 4 and RECEIVES[1] <= 2
            assert BUFFERED.awaited == 0  # no longer waited for


def _quick_ack(sock: trio.socket.SocketType) -> int:
    """1 while the socket acknowledges at once, 0 in Linux's interactive mode, where it delays
    the acknowledgement of what it received to send it with its answer."""
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK)


@pytest.mark.skipif(not hasattr(socket, "TCP_QUICKACK"), reason="Linux's TCP_QUICKACK")
async def test_a_frame_begun_is_acknowledged_at_once() -> None:
    """A client with Nagle's algorithm on (apache-iggy's) holds the tail of a write back until
    what it sent is acknowledged, and a connection whose requests are answered at once is
    in Linux's interactive mode, which delays that acknowledgement (up to 40 ms per frame).
    While a frame is incomplete the listener acks at once: by the time it waits for the rest,
    its socket has left that mode (it would leave it anyway when the delayed ACK goes out, so
    without the quick ack this could pass only on a machine stalled for that long)."""
    with trio.fail_after(10):
        async with listening(authenticates=False) as lst:
            CONNECTIONS.clear()
            stream = await lst.connect()
            async with stream:
                await stream.send_all(frame(b"a" * 100))
                await answers(stream, 1)
                server_stream = CONNECTIONS[0].stream
                assert isinstance(server_stream, trio.SocketStream)
                server = server_stream.socket
                for _ in range(50):  # a few exchanges put it in the interactive mode
                    if not _quick_ack(server):
                        break
                    await stream.send_all(frame(b"b" * 100))
                    await answers(stream, 1)
                assert _quick_ack(server) == 0
                head = frame(b"c" * 100)
                MID_FRAME_WAITS.clear()
                await stream.send_all(head[:50])
                await eventually(lambda: bool(MID_FRAME_WAITS))  # (trio: it waits now)
                assert _quick_ack(server) == 1
                await stream.send_all(head[50:])
                assert await answers(stream, 1) == b"ok 100\n"


async def test_after_a_big_frame_reads_end_where_frames_do() -> None:
    """A big frame's rest is read to its end exactly; the next frame's size prefix alone, then
    its body exactly (one chunk, which the codec takes as it is). So no read runs past the end
    of a big frame, nor of the frame after one. Small frames after a small one are read
    together again."""
    bodies = [b"a" * BIG, b"b" * (BIG + 1), b"c" * 70_000, b"d" * 10]
    smalls = [b"e" * 20, b"f" * 30]
    with trio.fail_after(10):
        async with listening(authenticates=False) as lst:
            stream = await lst.connect()
            async with stream:
                READS.clear()
                await stream.send_all(b"".join(map(frame, bodies)))
                expected = b"".join(b"ok %d\n" % len(b) for b in bodies)
                assert await answers(stream, len(bodies)) == expected
                await stream.send_all(b"".join(map(frame, smalls)))  # one segment
                assert await answers(stream, 2) == b"ok 20\nok 30\n"
    read_ends = list(itertools.accumulate(READS))
    frame_ends = list(itertools.accumulate(len(frame(b)) for b in bodies + smalls))
    assert set(frame_ends[:4]) <= set(read_ends)
    assert {end + SIZE.size for end in frame_ends[:3]} <= set(read_ends)  # prefixes alone
    assert read_ends[-1] == frame_ends[-1] and frame_ends[-2] not in read_ends  # smalls: one read


async def test_a_big_frame_that_stops_coming_is_cut_at_the_request_deadline() -> None:
    """A reader waiting for the rest of a big frame still has the request deadline. (Under a
    small budget, ``test_partial_frames_are_bounded_for_the_whole_process`` shows that
    connections read as the bytes come instead, and are counted.)"""
    with trio.fail_after(10):
        async with listening(authenticates=False, request_timeout_s=0.5) as lst:
            stream = await lst.connect()
            t0 = trio.current_time()
            await stream.send_all(frame(b"b" * BIG)[:200_000])
            assert await until_closed(stream) == b""
            assert 0.4 <= trio.current_time() - t0 < 3
            await stream.aclose()
            assert lst.errors("request_timeout") == 1
            assert BUFFERED.awaited == 0  # released when the wait was cut
