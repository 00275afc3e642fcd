"""A raw Iggy connection for tests, on the client role of ``protocols.iggy`` (either framing).

Commands go out framed by ``IggyClientCodec`` and their replies come back decoded; hand-built
bytes go out as they are, and ``raw_frame`` / ``closed`` read what the gateway sends without
the codec. Only one request is in flight at a time, as with every Iggy client (iggy.md §1.1).
Every wait on the gateway is bounded (``LIMIT_S``), so a test using it cannot hang.
"""

from __future__ import annotations

import trio

from gateway.app import Running
from protocols._wire import NEED_DATA, U32_LE
from protocols.iggy import (
    Command,
    Consumer,
    ConsumerKind,
    Era,
    Framing,
    Identifier,
    IggyClientCodec,
    IggyReply,
    LoginRegister,
    LoginUser,
    PolledMessages,
    PollingKind,
    PollingStrategy,
    PollMessages,
    ReplyBody,
    Status,
    pack_protocol_version,
)
from protocols.iggy.vsr import HEADER_SIZE, frame_size
from tests.helpers.connections import until_closed

__all__ = ["FIRST", "READER", "ROOT", "IggyWire", "login_command"]

LIMIT_S = 10.0  # for any one connect, reply, frame or close
READER = Consumer(kind=ConsumerKind.CONSUMER, id="iggy-wire")  # commits nothing unless asked
FIRST = PollingStrategy(kind=PollingKind.FIRST)
ROOT = ("iggy", "iggy")  # the gateway's default root user (auth.root_*)
# What each client sends as its version at login: apache-iggy 0.9.0 (SDK 0.11.0, §5.2),
# apache-iggy 0.8.0 (SDK 0.10.0, §9.2) and iggy-py 0.4.0 (SDK 0.6.202, §9.3).
_SDK_VERSIONS = {Era.C: "0.11.0", Era.B: "0.10.0", Era.A: "0.6.202"}


def login_command(era: Era, username: str = ROOT[0], password: str = ROOT[1]) -> Command:
    if era is Era.C:
        return LoginRegister(
            protocol_version=pack_protocol_version(0, 11, 0),
            sdk_name="rust-sdk",
            sdk_version=_SDK_VERSIONS[era],
            username=username,
            password=password,
        )
    return LoginUser(username=username, password=password, version=_SDK_VERSIONS[era])


class IggyWire:
    def __init__(self, stream: trio.SocketStream, codec: IggyClientCodec) -> None:
        self.stream = stream
        self.codec = codec
        self._received = bytearray()  # read from the socket, not yet handed to anyone

    @classmethod
    async def open(cls, running: Running, era: Era = Era.C) -> IggyWire:
        framing = Framing.VSR if era is Era.C else Framing.LEGACY
        with trio.fail_after(LIMIT_S):
            stream = await trio.open_tcp_stream(*running.address("iggy"))
        return cls(stream, IggyClientCodec(framing, era=era))

    @classmethod
    async def logged_in(cls, running: Running, era: Era = Era.C) -> IggyWire:
        wire = await cls.open(running, era)
        await wire.ok(login_command(era))
        return wire

    async def aclose(self) -> None:
        await self.stream.aclose()

    async def call(self, command: Command) -> IggyReply:
        with trio.fail_after(LIMIT_S):
            await self.stream.send_all(self.codec.send(command))
        return await self.reply()

    async def ok(self, command: Command) -> ReplyBody | None:
        """``call`` that must succeed; the reply's body (None: an empty one)."""
        reply = await self.call(command)
        assert reply.status == Status.OK, reply
        return reply.body

    async def poll(
        self,
        stream: Identifier,
        topic: Identifier,
        partition: int | None,
        *,
        consumer: Consumer = READER,
        strategy: PollingStrategy = FIRST,
        count: int = 100,
        auto_commit: bool = False,
    ) -> PolledMessages:
        body = await self.ok(
            PollMessages(
                consumer=consumer,
                stream_id=stream,
                topic_id=topic,
                partition_id=partition,
                strategy=strategy,
                count=count,
                auto_commit=auto_commit,
            )
        )
        assert isinstance(body, PolledMessages), body
        return body

    async def reply(self) -> IggyReply:
        """The answer to the oldest command the codec framed (sent by ``call`` or by hand)."""
        with trio.fail_after(LIMIT_S):
            while True:
                if self._received:
                    self.codec.receive_data(bytes(self._received))
                    self._received.clear()
                reply = self.codec.next_reply()
                if reply is not NEED_DATA:
                    assert isinstance(reply, IggyReply), f"the gateway closed: {reply}"
                    return reply
                await self._fill()

    async def raw_frame(self) -> bytes:
        """The next whole frame as bytes: a 256-byte VSR header and its body, or a legacy
        ``[status][length][payload]`` reply."""
        with trio.fail_after(LIMIT_S):
            while True:
                end = self._frame_end()
                if end is not None and len(self._received) >= end:
                    frame = bytes(self._received[:end])
                    del self._received[:end]
                    return frame
                await self._fill()

    def _frame_end(self) -> int | None:
        if self.codec.framing is Framing.VSR:
            if len(self._received) < HEADER_SIZE:
                return None
            return frame_size(bytes(self._received[:HEADER_SIZE]))
        if len(self._received) < 8:
            return None
        return 8 + int(U32_LE.unpack_from(self._received, 4)[0])

    async def _fill(self) -> None:
        data = await self.stream.receive_some(65536)
        assert data, "the gateway closed the connection"
        self._received += data

    async def closed(self) -> bytes:
        """Read until the gateway closes the connection (EOF or reset), then close this end;
        returns what came."""
        got = bytes(self._received)
        self._received.clear()
        with trio.fail_after(LIMIT_S):
            got = await until_closed(self.stream, got)
        await self.stream.aclose()
        return got
