"""Gathering writes: a frame in pieces (a head, then stored bytes as they are) goes to a plain
socket in one ``sendmsg``, not joined into one copy first. Used by the listeners' writers and
the backends' connections; TLS streams are given one joined write instead."""

from __future__ import annotations

from collections.abc import Iterable

import trio

from protocols._wire import Piece

__all__ = ["coalesced", "send_gathered", "socket_of"]

_IOV_MAX = 1024  # buffers one sendmsg takes (Linux's UIO_MAXIOV)
_SMALL = 2048  # pieces below this are joined with their neighbours: one iovec each would cost more


def socket_of(stream: trio.abc.Stream) -> trio.socket.SocketType | None:
    """The socket under a plain TCP stream (gathering writes go to it); None under TLS."""
    return stream.socket if isinstance(stream, trio.SocketStream) else None


def coalesced(pieces: Iterable[Piece]) -> list[Piece]:
    """The pieces for one gathering write, runs of small ones joined, empty ones left out."""
    out: list[Piece] = []
    run: list[Piece] = []
    for piece in pieces:
        size = piece.nbytes if isinstance(piece, memoryview) else len(piece)
        if size >= _SMALL:
            if run:
                out.append(run[0] if len(run) == 1 else b"".join(run))
                run = []
            out.append(piece)
        elif size:
            run.append(piece)
    if run:
        out.append(run[0] if len(run) == 1 else b"".join(run))
    return out


async def send_gathered(sock: trio.socket.SocketType, buffers: list[Piece]) -> None:
    """Every byte of ``buffers`` with as few sendmsg calls as the socket allows (IOV_MAX at a
    time; a partial write resumes inside the buffer it stopped in)."""
    i, n = 0, len(buffers)
    while i < n:
        sent = await sock.sendmsg(buffers[i : i + _IOV_MAX])
        while sent and i < n:
            buf = buffers[i]
            size = buf.nbytes if isinstance(buf, memoryview) else len(buf)
            if sent >= size:
                sent -= size
                i += 1
            else:
                buffers[i] = memoryview(buf).cast("B")[sent:]
                sent = 0
