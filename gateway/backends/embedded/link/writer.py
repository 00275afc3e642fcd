"""The one task that writes a link's frames (either end): what is queued goes out in order;
small pieces queued together go in one write, a large one (a batch) alone, uncopied."""

from __future__ import annotations

import socket
from typing import Final

import trio

_JOIN_BELOW: Final = 64 << 10
# What a batch of a MiB and more can be queued in the kernel at once (capped by the system's
# net.core.wmem_max): a default-sized unix socket buffer (208 KiB) takes a 1 MiB produce in five
# sends, each a wakeup when the other side has drained the last.
SEND_BUFFER: Final = 4 << 20


def widen(stream: trio.SocketStream) -> trio.SocketStream:
    stream.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)
    return stream


async def write_frames(
    stream: trio.SocketStream, receive: trio.MemoryReceiveChannel[list[memoryview]]
) -> None:
    async for pieces in receive:
        small: list[memoryview] = []
        while True:
            for piece in pieces:
                if len(piece) < _JOIN_BELOW:
                    small.append(piece)
                    continue
                if small:
                    await stream.send_all(small[0] if len(small) == 1 else b"".join(small))
                    small = []
                await stream.send_all(piece)
            try:
                pieces = receive.receive_nowait()
            except trio.WouldBlock:
                break
        if small:
            await stream.send_all(small[0] if len(small) == 1 else b"".join(small))


__all__ = ["widen", "write_frames"]
