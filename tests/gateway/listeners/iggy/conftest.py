"""Helpers for the apache-iggy 0.9.0 tests: scenarios in a worker thread, and the raw wire bits
that ``send_binary_request`` needs (iggy.md §2, §5).

The client is asyncio over a shared Tokio runtime, so each scenario is one ``asyncio.run`` in a
worker thread while the gateway (the ``gateway`` fixture of tests/conftest.py) serves in the
test's trio loop. Before a scenario returns, every client it opened is pinged: a process that
tears Tokio down while a heartbeat is in flight may abort (iggy.md §1.1).
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TypeVar

import trio
from apache_iggy import (
    Consumer,
    IggyClient,
    PollingStrategy,
    ReceiveMessage,
    SendMessage,
    TcpConfig,
    TcpReconnectionConfig,
)

from gateway.app import Running

T = TypeVar("T")

# The client redials at once instead of after its default 5 s cooldown: a session the gateway
# ends (an inactive user's login, §3.4) is retried by the client before the error surfaces.
QUICK = TcpReconnectionConfig(interval=timedelta(milliseconds=50), reestablish_after=timedelta(0))

ROOT_USER, ROOT_PASSWORD = "iggy", "iggy"  # the default root user, id 0 (iggy.md §0.6)
ROOT_ID = 0
GET_CLUSTER_METADATA, GET_ME, GET_CLIENT, GET_CLIENTS = 12, 20, 21, 22
GET_PATS, CREATE_PAT, DELETE_PAT = 41, 42, 43
GET_OFFSET, STORE_OFFSET, DELETE_OFFSET = 120, 121, 122
SINGLE, GROUP = 1, 2  # Consumer kinds on the wire


async def in_thread(fn: Callable[[], T], *, limit_s: float = 30) -> T:
    """Run a blocking call in a thread, bounded in time (the thread is abandoned, not killed, on
    timeout; the test fails either way)."""
    with trio.fail_after(limit_s):
        return await trio.to_thread.run_sync(fn, abandon_on_cancel=True)


@dataclass
class Clients:
    """Opens a scenario's clients against the gateway and settles them at the end."""

    address: str
    opened: list[IggyClient] = field(default_factory=list)

    async def connect(
        self, username: str | None = ROOT_USER, password: str = ROOT_PASSWORD
    ) -> IggyClient:
        """A connected client, logged in unless ``username`` is None."""
        client = self.track(IggyClient(TcpConfig(server_address=self.address, reconnection=QUICK)))
        await client.connect()
        if username is not None:
            await client.login_user(username, password)
        return client

    def track(self, client: IggyClient) -> IggyClient:
        self.opened.append(client)
        return client

    async def settle(self) -> None:
        clean = True
        for client in self.opened:
            try:
                await asyncio.wait_for(client.ping(), 1)
            except (RuntimeError, TimeoutError):
                clean = False
        if not clean:
            await asyncio.sleep(0.3)  # the quirk's other cure, for a client that cannot ping


async def run_iggy(
    running: Running, scenario: Callable[[Clients], Awaitable[T]], *, limit_s: float = 30
) -> T:
    """Run ``scenario`` in a fresh asyncio loop in a worker thread, bounded on both sides:
    asyncio cancels it before the trio bound fails the test, so the clients still settle."""
    host, port = running.address("iggy")

    async def main() -> T:
        clients = Clients(f"{host}:{port}")
        try:
            return await asyncio.wait_for(scenario(clients), limit_s - 5)
        finally:
            await clients.settle()

    return await in_thread(lambda: asyncio.run(main()), limit_s=limit_s)


async def eventually(check: Callable[[], Awaitable[bool]], *, limit_s: float = 10) -> None:
    """Poll ``check`` (asyncio side) until it holds, failing after ``limit_s``."""
    deadline = time.monotonic() + limit_s
    while not await check():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)


async def with_stream(clients: Clients) -> IggyClient:
    """A root client, and a stream "s"."""
    client = await clients.connect()
    await client.create_stream("s")
    return client


async def with_topic(clients: Clients, partitions: int = 1) -> IggyClient:
    """A root client, and a stream "s" with a topic "t"."""
    client = await with_stream(clients)
    await client.create_topic("s", "t", partitions)
    return client


# --- messages -----------------------------------------------------------------------------------


def texts(n: int, prefix: str = "m") -> list[SendMessage]:
    return [SendMessage(f"{prefix}{i}") for i in range(n)]


async def poll(
    client: IggyClient,
    stream: str | int,
    topic: str | int,
    strategy: PollingStrategy,
    *,
    partition: int | None = 0,
    count: int = 100,
    consumer: Consumer | None = None,
    auto_commit: bool = False,
) -> list[ReceiveMessage]:
    return await client.poll_messages(
        stream, topic, consumer=consumer or Consumer.Single("reader"), polling_strategy=strategy,
        count=count, auto_commit=auto_commit, partition_id=partition,
    )  # fmt: skip


def offsets(messages: list[ReceiveMessage]) -> list[int]:
    return [m.offset() for m in messages]


def payloads(messages: list[ReceiveMessage]) -> list[bytes]:
    return [m.payload() for m in messages]


# --- raw wire (iggy.md §2) -----------------------------------------------------------------------


def name(text: str) -> bytes:
    raw = text.encode()
    return bytes([len(raw)]) + raw


def identifier(value: str | int) -> bytes:
    if isinstance(value, int):
        return bytes([1, 4]) + struct.pack("<I", value)
    return bytes([2]) + name(value)


def consumer_target(
    kind: int, consumer: str | int, stream: str, topic: str, partition: int
) -> bytes:
    """``[Consumer][stream Id][topic Id][OptPartition]``, the head of every offset command."""
    return (
        bytes([kind]) + identifier(consumer) + identifier(stream) + identifier(topic)
        + struct.pack("<BI", 1, partition)
    )  # fmt: skip


@dataclass(frozen=True)
class StoredOffset:
    partition_id: int
    current_offset: int
    stored_offset: int


async def get_offset(client: IggyClient, target: bytes) -> StoredOffset | None:
    """GetConsumerOffset (120): an empty body means nothing is stored (§5.7)."""
    raw = await client.send_binary_request(GET_OFFSET, target)
    if not raw:
        return None
    assert len(raw) == 20, raw
    return StoredOffset(*struct.unpack("<IQQ", raw))


async def store_offset(client: IggyClient, target: bytes, offset: int) -> None:
    reply = await client.send_binary_request(STORE_OFFSET, target + struct.pack("<QB", offset, 1))
    assert reply == b""


async def delete_offset(client: IggyClient, target: bytes) -> None:
    reply = await client.send_binary_request(DELETE_OFFSET, target + b"\x01")  # ack: quorum
    assert reply == b""


class Reader:
    """Reads a reply body field by field; ``done`` says it was consumed exactly."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, n: int) -> bytes:
        assert self.pos + n <= len(self.data), f"reply too short at {self.pos}: {self.data!r}"
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def unpack(self, fmt: str) -> int:
        (value,) = struct.unpack("<" + fmt, self.take(struct.calcsize("<" + fmt)))
        return int(value)

    def text(self, width: str = "I") -> str:
        return self.take(self.unpack(width)).decode()

    @property
    def done(self) -> bool:
        return self.pos == len(self.data)


@dataclass(frozen=True)
class ClientInfo:
    client_id: int
    user_id: int
    transport: int
    address: str
    groups_count: int
    groups: tuple[tuple[int, int, int], ...] = ()  # (stream, topic, group) ids; details only


def read_client(r: Reader, *, details: bool) -> ClientInfo:
    """ClientInfo, or ClientDetails = ClientInfo + its (stream, topic, group) ids (§5.1)."""
    client_id, user_id, transport = r.unpack("I"), r.unpack("I"), r.unpack("B")
    address, count = r.text(), r.unpack("I")
    if not details:
        return ClientInfo(client_id, user_id, transport, address, count)
    groups = tuple((r.unpack("I"), r.unpack("I"), r.unpack("I")) for _ in range(count))
    return ClientInfo(client_id, user_id, transport, address, count, groups)


async def get_me(client: IggyClient) -> ClientInfo:
    r = Reader(await client.send_binary_request(GET_ME, b""))
    me = read_client(r, details=True)
    assert r.done
    return me
