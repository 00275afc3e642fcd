"""A Rog client for tests, built on the client role of ``protocols.rog``.

Like the upstream Python client (rog.md §7) it opens a new connection per request; unlike it,
it reads the reply until the server closes instead of trusting one ``recv``.
"""

from __future__ import annotations

import trio

from protocols._wire import NEED_DATA
from protocols.rog import (
    CONNECTION_CLOSED,
    Ack,
    CreateLog,
    Fetch,
    Publish,
    Request,
    Response,
    RogClientCodec,
)


class RogClient:
    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port

    async def request(self, request: Request) -> Response | None:
        """The reply, or None when the server closed without one."""
        codec = RogClientCodec()
        stream = await trio.open_tcp_stream(self.host, self.port)
        async with stream:
            await stream.send_all(codec.send(request))
            while True:
                frame = codec.next_frame()
                if frame is CONNECTION_CLOSED:
                    return None
                if frame is not NEED_DATA:
                    return frame
                data = await stream.receive_some(65536)
                if data:
                    codec.receive_data(data)
                else:
                    codec.receive_eof()

    async def raw(self, data: bytes, *, eof: bool = False) -> bytes:
        """Send bytes as they are and return everything the server sends until it closes."""
        stream = await trio.open_tcp_stream(self.host, self.port)
        async with stream:
            await stream.send_all(data)
            if eof:
                await stream.send_eof()
            chunks = []
            while chunk := await stream.receive_some(65536):
                chunks.append(chunk)
            return b"".join(chunks)

    async def create_log(self, name: str, partitions: int) -> Response | None:
        return await self.request(CreateLog(name=name, partitions=partitions))

    async def publish(self, name: str, partition: int, data: bytes) -> Response | None:
        return await self.request(Publish(name=name, partition=partition, data=data))

    async def fetch(self, name: str, partition: int, group: str) -> Response | None:
        return await self.request(Fetch(name=name, partition=partition, group=group))

    async def ack(self, name: str, partition: int, group: str) -> Response | None:
        return await self.request(Ack(name=name, partition=partition, group=group))
