"""The Iggy backend through outages: its server stopped and started again on the same data and
port, a server that is not there at start, and one that stops answering. Commands fail with
the retriable ``BackendUnavailable``/``Timeout`` and never hang; ``ping`` recovers."""

from __future__ import annotations

from collections import Counter
from functools import partial
from pathlib import Path

import pytest
import trio

from gateway.app import Running
from gateway.backends.iggy.backend import IggyBackend
from gateway.model import (
    Append,
    BackendUnavailable,
    CreateTopic,
    DescribeTopic,
    GatewayError,
    InvalidCredentials,
    Message,
    MessageBatch,
    Read,
    Timeout,
    Topic,
)
from protocols.iggy import (
    CONNECTION_CLOSED,
    NEED_DATA,
    IggyServerCodec,
    LoginRegister,
    LoginRegisterResponse,
    Ping,
)
from tests.helpers.iggy_upstream import FAST_HEALTH, started_backend, upstream_gateway

TOPIC = Topic("s", "t")


def batch(*values: bytes) -> MessageBatch:
    return MessageBatch([Message(value=v) for v in values])


async def values(backend: IggyBackend, offset: int = 0) -> list[bytes]:
    result = await backend.read(Read(topic=TOPIC, partition=0, offset=offset))
    return [m.value for b in result.batches for m in b.messages]


async def wait_until_down(backend: IggyBackend) -> None:
    while True:
        try:
            await backend.ping()
        except BackendUnavailable:
            return
        await trio.sleep(0.02)


async def wait_until_up(backend: IggyBackend) -> None:
    while True:
        try:
            await backend.ping()
            return
        except BackendUnavailable:
            await trio.sleep(0.02)


class Upstream:
    """An upstream gateway that a test stops and starts again, on one data dir and port."""

    def __init__(self, nursery: trio.Nursery, data: Path) -> None:
        self.nursery, self.data = nursery, data
        self.port = 0
        self._scope: trio.CancelScope | None = None
        self._stopped = trio.Event()

    async def start(self) -> Running:
        running: Running = await self.nursery.start(self._serve)
        self.port = running.address("iggy")[1]
        return running

    async def _serve(self, task_status: trio.TaskStatus[Running]) -> None:
        self._stopped = trio.Event()
        try:
            with trio.CancelScope() as self._scope:
                async with upstream_gateway(self.data, iggy_port=self.port) as running:
                    task_status.started(running)
                    await trio.sleep_forever()
        finally:
            self._stopped.set()

    async def stop(self) -> None:
        assert self._scope is not None
        self._scope.cancel()
        await self._stopped.wait()


async def test_restart_on_the_same_data_and_port(tmp_path: Path, nursery: trio.Nursery) -> None:
    upstream = Upstream(nursery, tmp_path / "upstream")
    with trio.fail_after(30):
        running = await upstream.start()
        async with started_backend(running.address("iggy"), **FAST_HEALTH) as backend:
            await backend.create_topic(CreateTopic(topic=TOPIC, partitions=1))
            await backend.append(Append(topic=TOPIC, partition=0, batch=batch(b"a", b"b")))

            await upstream.stop()
            await wait_until_down(backend)
            with pytest.raises(BackendUnavailable) as exc:
                await backend.append(Append(topic=TOPIC, partition=0, batch=batch(b"lost")))
            assert exc.value.retriable
            with pytest.raises(BackendUnavailable):
                await backend.read(Read(topic=TOPIC, partition=0, offset=0, max_wait_ms=10_000))
            with pytest.raises(BackendUnavailable):
                await backend.describe_topic(DescribeTopic(topic=TOPIC))

            await upstream.start()  # same data directory, same port
            await wait_until_up(backend)
            assert await values(backend) == [b"a", b"b"]
            result = await backend.append(Append(topic=TOPIC, partition=0, batch=batch(b"c")))
            assert result.base_offset == 2
            assert await values(backend) == [b"a", b"b", b"c"]


async def test_a_long_poll_ends_when_the_server_goes(tmp_path: Path, nursery: trio.Nursery) -> None:
    upstream = Upstream(nursery, tmp_path / "upstream")
    with trio.fail_after(30):
        running = await upstream.start()
        async with started_backend(running.address("iggy"), **FAST_HEALTH) as backend:
            await backend.create_topic(CreateTopic(topic=TOPIC, partitions=1))
            errors: list[GatewayError] = []

            async def reader() -> None:
                try:
                    await backend.read(Read(topic=TOPIC, partition=0, offset=0, max_wait_ms=60_000))
                except BackendUnavailable as exc:
                    errors.append(exc)

            async with trio.open_nursery() as readers:
                readers.start_soon(reader)
                await trio.sleep(0.1)  # the reader is polling (no event says so)
                await upstream.stop()
            assert len(errors) == 1


async def test_server_missing_at_start(tmp_path: Path, nursery: trio.Nursery) -> None:
    with trio.socket.socket() as probe:  # a free port, then nobody on it
        await probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with trio.fail_after(30):
        async with started_backend(("127.0.0.1", port), **FAST_HEALTH) as backend:
            with pytest.raises(BackendUnavailable):
                await backend.ping()
            with pytest.raises(BackendUnavailable):
                await backend.describe_topic(DescribeTopic(topic=TOPIC))
            upstream = Upstream(nursery, tmp_path / "upstream")
            upstream.port = port
            await upstream.start()
            await wait_until_up(backend)
            await backend.create_topic(CreateTopic(topic=TOPIC, partitions=1))


async def test_wrong_credentials_stop_the_start(tmp_path: Path) -> None:
    with trio.fail_after(30):
        async with upstream_gateway(tmp_path / "upstream") as running:
            host, port = running.address("iggy")
            backend = IggyBackend.from_url(f"iggy://iggy:wrong@{host}:{port}")
            async with trio.open_nursery() as nursery:
                with pytest.raises(InvalidCredentials):
                    await nursery.start(backend.run)


async def _silent_after_login(stream: trio.SocketStream) -> None:
    """Logs the client in, then reads and never answers."""
    await _serve_logins(stream, pings=None)


async def _serve_logins(
    stream: trio.SocketStream, pings: trio.MemorySendChannel[int] | None
) -> None:
    """Answers logins, and pings when ``pings`` is given (sending it this connection's local
    port for each); everything else goes unanswered."""
    codec = IggyServerCodec()
    peer = stream.socket.getpeername()[1]
    async with stream:
        while True:
            request = codec.next_request()
            if request is NEED_DATA:
                data = await stream.receive_some(65536)
                if data:
                    codec.receive_data(data)
                else:
                    codec.receive_eof()
                continue
            if request is CONNECTION_CLOSED:
                return
            if isinstance(request.command, LoginRegister):
                reply = LoginRegisterResponse(
                    user_id=0, session=1, server_protocol_version=0, server_version="silent"
                )
                await stream.send_all(codec.send_ok(request, reply))
            elif isinstance(request.command, Ping) and pings is not None:
                await pings.send(peer)
                await stream.send_all(codec.send_ok(request))


async def test_a_server_that_stops_answering_times_out(nursery: trio.Nursery) -> None:
    listeners = await nursery.start(
        partial(trio.serve_tcp, _silent_after_login, 0, host="127.0.0.1")
    )
    port = listeners[0].socket.getsockname()[1]
    with trio.fail_after(30):
        async with started_backend(("127.0.0.1", port), request_timeout_s=0.5) as backend:
            start = trio.current_time()
            with pytest.raises(Timeout) as exc:
                await backend.describe_topic(DescribeTopic(topic=TOPIC))
            assert exc.value.retriable
            assert 0.4 < trio.current_time() - start < 5


async def test_every_idle_connection_gets_heartbeats(nursery: trio.Nursery) -> None:
    """An Iggy server drops a client that stops pinging (iggy.md §1.1): idle pooled
    connections are pinged too, not only the one a health check happens to take."""
    send, receive = trio.open_memory_channel[int](1000)
    listeners = await nursery.start(
        partial(trio.serve_tcp, partial(_serve_logins, pings=send), 0, host="127.0.0.1")
    )
    port = listeners[0].socket.getsockname()[1]
    with trio.fail_after(30):
        async with started_backend(("127.0.0.1", port), ping_interval_s=0.05) as backend:
            async with trio.open_nursery() as callers:
                for _ in range(3):  # three at once: three connections
                    callers.start_soon(backend.ping)
            counts: Counter[int] = Counter()
            async for connection in receive:
                counts[connection] += 1
                if len(counts) == 3 and min(counts.values()) >= 3:
                    break


async def _huge_ping_replies(stream: trio.SocketStream) -> None:
    """Logs the client in, then answers every Ping with a reply whose header says 4 GiB."""
    codec = IggyServerCodec()
    async with stream:
        while True:
            request = codec.next_request()
            if request is NEED_DATA:
                data = await stream.receive_some(65536)
                if data:
                    codec.receive_data(data)
                else:
                    codec.receive_eof()
                continue
            if request is CONNECTION_CLOSED:
                return
            if isinstance(request.command, LoginRegister):
                reply = LoginRegisterResponse(
                    user_id=0, session=1, server_protocol_version=0, server_version="huge"
                )
                await stream.send_all(codec.send_ok(request, reply))
            elif isinstance(request.command, Ping):
                frame = bytearray(codec.send_ok(request))
                frame[48:52] = (0xFFFF_FFF0).to_bytes(4, "little")  # the frame size (§3.1)
                await stream.send_all(bytes(frame))


async def test_a_reply_above_the_frame_limit_does_not_end_the_backend(
    nursery: trio.Nursery,
) -> None:
    """A heartbeat answered with a frame above the limit is a broken connection like any other:
    the backend reports it and goes on, it does not crash."""
    listeners = await nursery.start(
        partial(trio.serve_tcp, _huge_ping_replies, 0, host="127.0.0.1")
    )
    port = listeners[0].socket.getsockname()[1]
    with trio.fail_after(30):
        async with started_backend(("127.0.0.1", port), ping_interval_s=0.05) as backend:
            for _ in range(3):  # the heartbeats meanwhile hit the same replies
                with pytest.raises(GatewayError):
                    await backend.ping()
                await trio.sleep(0.2)
