"""The connection writer: frames queued as bytes or as a Gather of pieces reach the client byte
for byte, in order, over a plain socket (gathering writes, partial ones resumed inside a piece,
more pieces than one sendmsg takes) and over TLS (joined)."""

from __future__ import annotations

import socket
import struct

import trio
import trio.testing

from gateway.gathered import _IOV_MAX, _SMALL
from gateway.listeners.serve import _buffers, _writer
from protocols._wire import Gather

_FRAMES_S = 20  # every network step here is bounded


def _frames() -> list[bytes | Gather]:
    """Frames of every shape: bytes, small and big pieces, memoryviews of another format (whose
    len() is not their byte count), empty pieces, and more pieces than one sendmsg takes."""
    ints = memoryview(bytearray(struct.pack("<4000I", *range(4000)))).cast("I")  # 16,000 bytes
    many = [bytes([i % 251]) * (i % 7) for i in range(3 * _IOV_MAX)]
    big = [bytes([i % 251]) * (_SMALL + i) for i in range(2 * _IOV_MAX)]  # each its own iovec
    frames: list[bytes | Gather] = [
        b"plain",
        Gather([b"head", ints, b"", b"tail"], 8 + ints.nbytes),
        Gather(many, sum(map(len, many))),
        b"between",
        Gather(big, sum(map(len, big))),
        Gather([memoryview(b"x" * 300_000)[7:], b"end"], 300_000 - 7 + 3),
    ]
    return frames


def _joined(frames: list[bytes | Gather]) -> bytes:
    return b"".join(f.join() if isinstance(f, Gather) else f for f in frames)


def test_buffers_join_small_runs_and_keep_big_pieces_whole() -> None:
    big = memoryview(b"b" * _SMALL)
    out = _buffers([b"a", Gather([b"b", b"", big, b"c", b"d"], 3 + _SMALL + 1), b""])
    assert out == [b"ab", big, b"cd"]
    assert out[1] is big  # not copied


async def _received(stream: trio.abc.Stream, expected: int) -> bytes:
    got = bytearray()
    while len(got) < expected:
        await trio.sleep(0.001)  # a slow reader: the writer's sendmsg calls come back partial
        chunk = await stream.receive_some(65536)
        assert chunk, f"EOF after {len(got)} of {expected} bytes"
        got += chunk
    return bytes(got)


async def _through(server: trio.abc.Stream, client: trio.abc.Stream) -> bytes:
    frames = _frames()
    expected = _joined(frames)
    send, receive = trio.open_memory_channel[bytes | Gather](len(frames))
    with trio.fail_after(_FRAMES_S):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_writer, server, receive)
            async with send:
                for frame in frames:
                    await send.send(frame)
            got = await _received(client, len(expected))
    assert got == expected
    return got


async def test_gathered_frames_over_a_plain_socket_with_partial_writes() -> None:
    a, b = socket.socketpair()
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)  # partial writes are certain
    server = trio.SocketStream(trio.socket.from_stdlib_socket(a))
    client = trio.SocketStream(trio.socket.from_stdlib_socket(b))
    async with server, client:
        await _through(server, client)


async def test_gathered_frames_over_a_stream_without_a_socket_are_joined() -> None:
    # The TLS case: the writer sees an SSLStream, not a SocketStream (a StapledStream here).
    left, right = trio.testing.memory_stream_pair()
    await _through(left, right)
