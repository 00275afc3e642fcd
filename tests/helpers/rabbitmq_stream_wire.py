"""A raw RabbitMQ Stream connection for tests, on the client role of ``protocols.rabbitmq_stream``.

Frames go out encoded by ``RabbitStreamClientCodec`` and what the gateway sends comes back
decoded; hand-built bytes go out as they are. The handshake is split into its steps
(rabbitmq-stream.md §7) so a test can stop at any of them: ``hello`` (PeerProperties,
SaslHandshake), ``authenticate``, ``tune``, ``open_vhost``; ``RabbitWire.connected`` does all of
them. Frames that arrive while a test waits for another one (a Heartbeat, a Deliver) are kept in
``received`` in arrival order. Every wait on the gateway is bounded (``LIMIT_S``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import TypeVar

import trio

from gateway.app import Running
from protocols import rabbitmq_stream as rs
from protocols.rabbitmq_stream import ResponseCode
from protocols.rabbitmq_stream.chunk import SimpleEntry, decode_chunk

__all__ = ["LIMIT_S", "PASSWORD", "USER", "RabbitWire", "delivered"]

LIMIT_S = 10.0  # for any one connect, frame or close
USER, PASSWORD = "guest", "guest"  # the listener's default user (loopback only)

F = TypeVar("F", bound=rs.Frame)


def delivered(frame: rs.Deliver) -> list[tuple[int, bytes]]:
    """(offset, entry bytes) of the simple entries of a Deliver's chunk."""
    chunk = decode_chunk(frame.chunk)
    out = []
    for i, entry in enumerate(chunk.entries):
        assert isinstance(entry, SimpleEntry), entry
        out.append((chunk.chunk_id + i, entry.data))
    return out


class RabbitWire:
    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.codec = rs.RabbitStreamClientCodec()
        self.received: list[rs.Frame] = []  # decoded, not yet taken by a test
        self.server_tune: rs.Tune | None = None
        self._correlation = itertools.count(1)

    @classmethod
    async def open(cls, running: Running | str) -> RabbitWire:
        """A connection to a gateway's RabbitMQ Stream listener (or to ``host:port``)."""
        if isinstance(running, str):
            host, port = running.rsplit(":", 1)
            address = (host, int(port))
        else:
            address = running.address("rabbitmq_stream")
        with trio.fail_after(LIMIT_S):
            stream = await trio.open_tcp_stream(*address)
        return cls(stream)

    @classmethod
    async def connected(
        cls,
        running: Running | str,
        *,
        frame_max: int = 1_048_576,
        heartbeat: int = 0,
        vhost: str = "/",
    ) -> RabbitWire:
        """Handshake done and ``vhost`` open; heartbeat 0 (none) unless asked for."""
        wire = await cls.open(running)
        await wire.hello()
        reply = await wire.authenticate()
        assert reply.code == ResponseCode.OK, reply
        await wire.tune(frame_max=frame_max, heartbeat=heartbeat)
        opened = await wire.open_vhost(vhost)
        assert opened.code == ResponseCode.OK, opened
        return wire

    def corr(self) -> int:
        return next(self._correlation)

    async def aclose(self) -> None:
        await self.stream.aclose()

    # --- the handshake, step by step (§7) ------------------------------------------------------

    async def hello(self) -> None:
        props = (("product", "streamgate-tests"), ("connection_name", "wire"))
        reply = await self.call(rs.PeerProperties(correlation_id=self.corr(), properties=props))
        assert isinstance(reply, rs.PeerPropertiesResponse) and reply.code == ResponseCode.OK
        reply = await self.call(rs.SaslHandshake(correlation_id=self.corr()))
        assert isinstance(reply, rs.SaslHandshakeResponse) and "PLAIN" in reply.mechanisms

    async def authenticate(
        self, user: str = USER, password: str = PASSWORD, *, mechanism: str = "PLAIN"
    ) -> rs.SaslAuthenticateResponse:
        """The response; when it is OK, the server's Tune is read too (``server_tune``)."""
        data = b"\0" + user.encode() + b"\0" + password.encode()
        request = rs.SaslAuthenticate(correlation_id=self.corr(), mechanism=mechanism, data=data)
        reply = await self.call(request)
        assert isinstance(reply, rs.SaslAuthenticateResponse), reply
        if reply.code == ResponseCode.OK:
            self.server_tune = await self.expect(rs.Tune)
        return reply

    async def tune(self, *, frame_max: int, heartbeat: int) -> None:
        """The client's Tune answer (same key 0x0014, as rstream and rbfly send it)."""
        await self.send(rs.Tune(frame_max=frame_max, heartbeat=heartbeat))

    async def open_vhost(self, vhost: str = "/") -> rs.OpenResponse:
        reply = await self.call(rs.Open(correlation_id=self.corr(), virtual_host=vhost))
        assert isinstance(reply, rs.OpenResponse), reply
        return reply

    # --- frames ----------------------------------------------------------------------------------

    async def send(self, frame: rs.Frame) -> None:
        await self.send_raw(self.codec.send(frame))

    async def send_raw(self, data: bytes) -> None:
        with trio.fail_after(LIMIT_S):
            await self.stream.send_all(data)

    async def call(self, request: rs.Request) -> rs.Frame:
        """Send a request; its response (same correlation id), other frames kept aside."""
        await self.send(request)
        return await self.take(
            lambda f: (
                getattr(f, "correlation_id", None) == request.correlation_id
                and f.wire_key & 0x8000 != 0
            )
        )

    async def expect(self, cls: type[F]) -> F:
        """The next frame of ``cls`` (from ``received`` first, then the socket)."""
        frame = await self.take(lambda f: isinstance(f, cls))
        assert isinstance(frame, cls)
        return frame

    async def take(self, match: Callable[[rs.Frame], bool]) -> rs.Frame:
        with trio.fail_after(LIMIT_S):
            while True:
                for i, kept in enumerate(self.received):
                    if match(kept):
                        return self.received.pop(i)
                frame = await self._next()
                assert frame is not None, f"the gateway closed; received {self.received}"
                self.received.append(frame)

    async def next_frame(self) -> rs.Frame | None:
        """The next frame off the socket (``received`` untouched); None once the gateway closed."""
        with trio.fail_after(LIMIT_S):
            return await self._next()

    async def _next(self) -> rs.Frame | None:
        while True:
            frame = self.codec.next_frame()
            if frame is rs.CONNECTION_CLOSED:
                return None
            if frame is not rs.NEED_DATA:
                assert isinstance(frame, rs.Frame)
                return frame
            try:
                data = await self.stream.receive_some(65536)
            except trio.BrokenResourceError:  # reset: closed with our bytes unread
                data = b""
            if data:
                self.codec.receive_data(data)
            else:
                self.codec.receive_eof()

    async def closed(self) -> list[rs.Frame]:
        """Read until the gateway closes the connection, then close this end; every frame that
        came (``received`` first)."""
        frames, self.received = self.received, []
        with trio.fail_after(LIMIT_S):
            while (frame := await self._next()) is not None:
                frames.append(frame)
        await self.stream.aclose()
        return frames
