"""A plain socket's fast paths, shared by the listeners and the backends' connections.

Gathering writes: a frame in pieces (a head, then stored bytes as they are) goes to a plain
socket in one ``sendmsg``, not joined into one copy first; TLS streams are given one joined
write instead. The receive low-water mark (``WakeWhole``, the listeners'): a reader in the
middle of a big frame wakes once the rest of it has come, not at every burst of segments.
Exact reads (``ExactReads``): after a big frame, reads end where frames do, so a big body is
the chunk as read, not a join of several. Quick acknowledgements (``QuickAck``): a frame that
has begun to arrive is acknowledged at once, so a client with Nagle's algorithm on sends its
rest without waiting for the delayed acknowledgement. Whole frames into the kernel
(``unthrottle_sends``): a big frame is taken by one write, not by as many as the peer's window
allows."""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterable

import trio

from protocols._wire import Gather, Piece, Receiver

__all__ = [
    "SEND_LOWAT", "WAKE_WHOLE_FROM", "ExactReads", "QuickAck", "WakeWhole", "WriteThrough",
    "coalesced", "read_now", "send_gathered", "socket_of", "unthrottle_sends",
]  # fmt: skip

# A frame still this many bytes short wakes its reader only once they are all there: below it,
# the two setsockopt calls would cost more than the passes through trio's loop they save.
WAKE_WHOLE_FROM = 65536

_IOV_MAX = 1024  # buffers one sendmsg takes (Linux's UIO_MAXIOV)
_SMALL = 2048  # pieces below this are joined with their neighbours: one iovec each would cost more
_YIELD_EVERY = 16  # writes through in a row before the writing task lets others run


def socket_of(stream: trio.abc.Stream) -> trio.socket.SocketType | None:
    """The socket under a plain TCP stream (gathering writes go to it); None under TLS."""
    return stream.socket if isinstance(stream, trio.SocketStream) else None


def _tcp_socket(stream: trio.abc.Stream) -> trio.socket.SocketType | None:
    """The socket under a plain stream or under TLS (for its options, never for its bytes)."""
    if isinstance(stream, trio.SSLStream):
        stream = stream.transport_stream
    return socket_of(stream)


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
        i = _past(buffers, i, sent)


def _past(buffers: list[Piece], i: int, sent: int) -> int:
    """The first of ``buffers[i:]`` not wholly in the ``sent`` bytes written from there (cut in
    place to what is left of it)."""
    n = len(buffers)
    while sent and i < n:
        buf = buffers[i]
        size = buf.nbytes if isinstance(buf, memoryview) else len(buf)
        if sent >= size:
            sent -= size
            i += 1
        else:
            buffers[i] = memoryview(buf).cast("B")[sent:]
            sent = 0
    return i


class WriteThrough:
    """A frame written by the task that made it, while the connection's writer task has none
    queued: one non-blocking write, where handing it to the writer costs a channel hand-over,
    a wake of that task and trio's pass through its loop after the send (together about a
    quarter of a small request's CPU). What the socket does not take at once, and every frame
    sent while one is queued, goes through the writer, so frames leave in the order they were
    sent. Plain sockets only (``write`` hands everything on under TLS)."""

    __slots__ = ("_socket", "_unyielded", "queued")

    def __init__(self, stream: trio.abc.Stream) -> None:
        self._socket = socket_of(stream)
        self.queued = 0  # frames handed to the writer and not yet written by it
        self._unyielded = 0

    def write(self, frame: bytes | Gather) -> bytes | Gather | None:
        """None when all of ``frame`` went out now; else what is left of it for the writer (the
        frame itself when nothing went: the socket's buffer is full, it is closed or failing,
        and the writer's own write then says so)."""
        sock = self._socket
        if sock is None or self.queued:
            return frame
        fd = sock.fileno()
        if fd < 0:
            return frame
        if isinstance(frame, Gather):
            buffers, size = coalesced(frame.pieces), frame.nbytes
        else:
            buffers, size = [frame], len(frame)
        try:
            sent = os.writev(fd, buffers[:_IOV_MAX])
        except OSError:
            return frame
        if sent >= size:
            return None
        rest = buffers[_past(buffers, 0, sent) :]
        return Gather(rest, size - sent)

    def yield_due(self) -> bool:
        """After a write through: whether its task should now let others run. Every 16th, so
        that a handler answering requests a client pipelined, each written through, still
        yields (and sees a cancellation) as it did handing each to the writer."""
        self._unyielded += 1
        if self._unyielded < _YIELD_EVERY:
            return False
        self._unyielded = 0
        return True


def read_now(stream: trio.abc.Stream, size: int) -> bytes | None:
    """What a plain socket holds already, up to ``size`` bytes, in one non-blocking read
    without a pass through trio's loop; None when nothing has come, under TLS, or when the
    socket is closed or failing (trio's receive, which the caller makes instead, reports it).
    b"" is the end of the stream."""
    sock = socket_of(stream)
    fd = -1 if sock is None else sock.fileno()
    if fd < 0:
        return None
    try:
        return os.read(fd, size)
    except OSError:
        return None


class WakeWhole:
    """SO_RCVLOWAT on a plain socket: ``expect(missing)`` before a receive makes it return once
    ``missing`` bytes have come (the rest of a frame that nothing can be parsed without), or at
    once when they are few. Set only when it changes: twice per big frame. EOF, an error or
    the caller's deadline still end the wait (the kernel reports them whatever the mark).
    Nothing under TLS, where the socket's bytes are records, not the frame's."""

    __slots__ = ("_low", "_socket")

    def __init__(self, stream: trio.abc.Stream) -> None:
        self._socket = socket_of(stream)
        self._low = 1

    @property
    def settable(self) -> bool:
        """Whether the mark is set here at all (a plain socket that took it)."""
        return self._socket is not None

    def expect(self, missing: int) -> None:
        low = missing if missing >= WAKE_WHOLE_FROM else 1
        if low == self._low or self._socket is None:
            return
        try:
            self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, low)
        except OSError:
            self._socket = None  # not settable here: wake at every burst, as without it
            return
        self._low = low


class QuickAck:
    """TCP_QUICKACK on a connection's socket (plain, or under TLS), asked for while a frame is
    incomplete. A client that leaves Nagle's algorithm on (apache-iggy's TCP client does) holds
    the short tail of a write back until what it sent before is acknowledged, and Linux delays
    that acknowledgement up to 40 ms when one full segment has come (a second would be acked at
    once): a frame of a segment and a bit, a batch of about 64 KiB over loopback, waited 40 ms
    per send. The option is not sticky: ``now`` flushes the acknowledgement due, once per wait
    in the middle of a frame. Not on systems without the option."""

    __slots__ = ("_socket",)

    def __init__(self, stream: trio.abc.Stream) -> None:
        self._socket = _tcp_socket(stream) if _TCP_QUICKACK else None

    def now(self) -> None:
        if self._socket is None:
            return
        try:
            self._socket.setsockopt(socket.IPPROTO_TCP, _TCP_QUICKACK, 1)
        except OSError:
            self._socket = None  # not a TCP socket (a test's socket pair): nothing to ack


_TCP_QUICKACK: int = getattr(socket, "TCP_QUICKACK", 0)  # (0: none here)

# What a socket may hold unsent: trio sets 16 KiB on every socket stream (TCP_NOTSENT_LOWAT, its
# issue #72: latency for interactive streams). A big frame (an Iggy poll or a Kafka Fetch of
# 1 MiB, a big Publish or Produce a backend forwards) then went out in as many writes as the
# peer's window allowed, each a wake of the writer and a pass through trio's loop: an Iggy poll
# of 1,000 x 1 KiB cost 0.80 us of CPU a message, 0.60 with this (twelve alternated rounds).
# The kernel's own bound stays: the send buffer (net.ipv4.tcp_wmem's maximum).
SEND_LOWAT = 4 << 20
_TCP_NOTSENT_LOWAT: int = getattr(socket, "TCP_NOTSENT_LOWAT", 0)  # (0: none here)


def unthrottle_sends(stream: trio.abc.Stream) -> None:
    """Let the socket under ``stream`` (plain, or under TLS) take up to ``SEND_LOWAT`` unsent
    bytes, a whole big frame in one write."""
    sock = _tcp_socket(stream)
    if sock is None or not _TCP_NOTSENT_LOWAT:
        return
    with contextlib.suppress(OSError):  # (not a TCP socket: nothing to lift)
        sock.setsockopt(socket.IPPROTO_TCP, _TCP_NOTSENT_LOWAT, SEND_LOWAT)


class ExactReads:
    """How much each read of a framed stream takes. A big frame's rest exactly (with
    ``WakeWhole``'s mark, in one read), so that the read ends where the frame does; and the
    frame after it, exactly what the codec asks for each time (its size prefix or header
    first): if that one is big too, its body is one chunk as read, which the codec takes
    without a copy, where a body begun in a 64 KiB read is joined out of its parts (a copy of
    all of it), and a read running past a frame's end copies what follows it. Small frames
    after a small one are read ``between`` bytes at a time, many in one read. Only on a plain
    socket (``WakeWhole.settable``): TLS hands out records, not what was asked for."""

    __slots__ = ("_big", "_exact", "between", "rest", "settable", "within")

    def __init__(self, settable: bool, *, between: int, within: int, rest: int) -> None:
        self.settable = settable
        self.between = between  # a read between frames
        self.within = within  # ... in the middle of one, when not read exactly
        self.rest = rest  # at most, read exactly
        self._big = False  # the frame being read had a big rest
        self._exact = False  # the frame being read is read exactly (it follows a big one)

    def size(self, codec: Receiver) -> int:
        if not codec.buffered:
            self._exact, self._big = self._big, False
            wants = codec.wants
            if self._exact and 0 < wants < self.between:
                return wants
            self._exact = False
            return self.between
        missing = min(codec.missing, self.rest)
        if missing >= WAKE_WHOLE_FROM and self.settable:
            self._exact = self._big = True
        return missing if self._exact and missing > 0 else self.within
