"""Raw RabbitMQ Stream requests a test harness makes of a real server (rabbitmq-stream.md §5, §7),
on the client role of ``protocols.rabbitmq_stream``: is it up, what does it advertise, is a
stream available. Every call is bounded.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

from protocols import rabbitmq_stream as rs
from protocols._wire import RemoteProtocolError
from protocols.rabbitmq_stream import ResponseCode
from tests.helpers.rabbitmq_stream_wire import RabbitWire

__all__ = [
    "NO_LEADER",
    "PASSWORD",
    "USER",
    "create_and_delete",
    "open_properties",
    "opened",
    "peer_properties_ok",
    "stream_available",
]

USER, PASSWORD = "guest", "guest"  # loopback only (loopback_users.guest)


async def peer_properties_ok(address: tuple[str, int], limit_s: float = 2) -> bool:
    """Whether one PeerProperties round trip succeeds: the first step of every handshake."""
    codec = rs.RabbitStreamClientCodec()
    with trio.move_on_after(limit_s):
        try:
            stream = await trio.open_tcp_stream(*address)
        except OSError:
            return False
        async with stream:
            try:
                await stream.send_all(codec.send(rs.PeerProperties(correlation_id=1)))
                while True:
                    frame = codec.next_frame()
                    if isinstance(frame, rs.PeerPropertiesResponse):
                        return frame.code == ResponseCode.OK
                    if frame is not rs.NEED_DATA:
                        return False
                    data = await stream.receive_some(65536)
                    if not data:
                        return False
                    codec.receive_data(data)
            except (trio.BrokenResourceError, OSError, RemoteProtocolError):
                return False
    return False


@asynccontextmanager
async def opened(address: tuple[str, int]) -> AsyncIterator[tuple[RabbitWire, rs.OpenResponse]]:
    """A connection as guest, no heartbeats, vhost / open; and the Open response."""
    wire = RabbitWire(await trio.open_tcp_stream(*address))
    try:
        await wire.hello()
        assert (await wire.authenticate(USER, PASSWORD)).code == ResponseCode.OK
        await wire.tune(frame_max=rs.DEFAULT_MAX_FRAME_SIZE, heartbeat=0)
        reply = await wire.open_vhost("/")
        assert reply.code == ResponseCode.OK, reply
        yield wire, reply
    finally:
        await wire.aclose()


async def open_properties(address: tuple[str, int]) -> dict[str, str]:
    """The properties of the Open response: ``advertised_host`` and ``advertised_port`` (§1.3)."""
    async with opened(address) as (_, reply):
        return dict(reply.properties or ())


NO_LEADER = 0xFFFF


async def stream_available(address: tuple[str, int], name: str) -> bool:
    """Whether stream ``name`` has a leader now: Metadata code OK is not enough, the leader
    reference is 0xFFFF while a writer restarts (rstream then raises LeaderNotAvailable)."""
    async with opened(address) as (wire, _):
        reply = await wire.call(rs.Metadata(correlation_id=wire.corr(), streams=(name,)))
        assert isinstance(reply, rs.MetadataResponse), reply
        (stream,) = reply.streams
        return stream.code == ResponseCode.OK and stream.leader != NO_LEADER


async def create_and_delete(address: tuple[str, int], name: str) -> None:
    async with opened(address) as (wire, _):
        for request in (
            rs.Create(correlation_id=wire.corr(), stream=name),
            rs.Delete(correlation_id=wire.corr(), stream=name),
        ):
            reply = await wire.call(request)
            assert isinstance(reply, rs.CodeResponse) and reply.code == ResponseCode.OK, reply
