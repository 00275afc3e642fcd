"""The real RabbitMQ the backend tests run against (tests/helpers/rabbitmq_server.py): rstream
publishes and consumes on it, it keeps its data across a clean stop and a SIGKILL, two run at
once, it listens on loopback only and leaves no process behind."""

from __future__ import annotations

import socket
from dataclasses import astuple
from pathlib import Path

import pytest
import trio

from tests.helpers.rabbitmq_server import (
    HOST,
    RabbitMQServer,
    RabbitMQStartError,
    alive,
    require_rabbitmq,
    running_rabbitmq,
)

from .conftest import consume, in_asyncio, publish

pytestmark = pytest.mark.slow

LIMIT_S = 90.0  # a test with a restart: two starts (~5 s each here) and a stop (~2.5 s)


def bodies(prefix: str, count: int, start: int = 0) -> list[bytes]:
    return [f"{prefix}{i}".encode() for i in range(start, start + count)]


def listening(pids: list[int]) -> set[tuple[str, int]]:
    """(address, port) of every TCP socket in LISTEN state held by ``pids`` (proc(5))."""
    inodes = set()
    for pid in pids:
        fds = Path(f"/proc/{pid}/fd")
        for fd in fds.iterdir() if fds.exists() else ():
            try:
                target = fd.readlink().name
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    found = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            address, port = fields[1].split(":")
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                # Host byte order (little-endian) per 32-bit word.
                raw = b"".join(bytes.fromhex(address[i : i + 8])[::-1] for i in range(0, 32, 8))
                family = socket.AF_INET6 if table == "tcp6" else socket.AF_INET
                found.add((socket.inet_ntop(family, raw[: len(address) // 2]), int(port, 16)))
    return found


def bindable(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((HOST, port))
        except OSError:
            return False
        return True


async def test_rstream_publishes_with_confirms_and_consumes(rabbitmq: RabbitMQServer) -> None:
    sent = bodies("m", 20)
    with trio.fail_after(LIMIT_S):
        await in_asyncio(lambda: publish(rabbitmq, "s", sent, create=True))
        assert await in_asyncio(lambda: consume(rabbitmq, "s", 20)) == list(enumerate(sent))
        queues = await rabbitmq.rabbitmqctl("list_queues", "--quiet", "name", "type")
        assert "s\tstream" in queues.splitlines()
        await rabbitmq.rabbitmq_streams("add_super_stream", "invoices", "--partitions", "2")
        queues = await rabbitmq.rabbitmqctl("list_queues", "--quiet", "name")
        assert {"invoices-0", "invoices-1"} <= set(queues.split())


async def test_stop_and_start_keep_the_messages(rabbitmq: RabbitMQServer) -> None:
    with trio.fail_after(LIMIT_S):
        await in_asyncio(lambda: publish(rabbitmq, "s", bodies("m", 10), create=True))
        ports, nodename = rabbitmq.ports, rabbitmq.nodename
        await rabbitmq.stop()
        assert rabbitmq.pids() == []
        await rabbitmq.start()
        assert (rabbitmq.ports, rabbitmq.nodename) == (ports, nodename)
        await rabbitmq.wait_stream_available("s")
        await in_asyncio(lambda: publish(rabbitmq, "s", bodies("m", 5, start=10)))
        got = await in_asyncio(lambda: consume(rabbitmq, "s", 15))
    assert got == list(enumerate(bodies("m", 15)))


async def test_kill_and_start_again(rabbitmq: RabbitMQServer) -> None:
    with trio.fail_after(LIMIT_S):
        await in_asyncio(lambda: publish(rabbitmq, "s", bodies("m", 10), create=True))
        beam = rabbitmq.beam_pid
        assert beam is not None
        await rabbitmq.kill()
        assert not alive(beam)
        with pytest.raises(OSError):
            await trio.open_tcp_stream(*rabbitmq.stream_address)
        await rabbitmq.start()
        assert rabbitmq.beam_pid != beam
        await rabbitmq.wait_stream_available("s")
        # Confirmed before the crash, so on disk (the page cache survives a killed process).
        await in_asyncio(lambda: publish(rabbitmq, "s", [b"after"]))
        got = await in_asyncio(lambda: consume(rabbitmq, "s", 11))
    assert got == list(enumerate([*bodies("m", 10), b"after"]))


async def test_advertised_address_is_configurable_across_restarts(tmp_path: Path) -> None:
    require_rabbitmq()
    with trio.fail_after(LIMIT_S):
        async with running_rabbitmq(tmp_path / "r") as server:
            props = await server.open_properties()
            assert (props["advertised_host"], props["advertised_port"]) == (
                HOST,
                str(server.stream_port),
            )
            # A test fronting it with a gateway learns its port late: set it, then restart.
            server.advertised_host, server.advertised_port = "localhost", 5999
            await server.stop()
            await server.start()
            props = await server.open_properties()
            assert (props["advertised_host"], props["advertised_port"]) == ("localhost", "5999")


async def test_two_servers_at_once(tmp_path: Path) -> None:
    require_rabbitmq()
    servers = [RabbitMQServer(tmp_path / "a"), RabbitMQServer(tmp_path / "b")]
    try:
        with trio.fail_after(LIMIT_S):
            async with trio.open_nursery() as nursery:  # started together: no shared port
                for server in servers:
                    nursery.start_soon(server.start)
            a, b = servers
            assert a.ports is not None and b.ports is not None
            assert not set(astuple(a.ports)) & set(astuple(b.ports))
            assert a.nodename != b.nodename
            await in_asyncio(lambda: publish(a, "s", [b"for a"], create=True))
            await in_asyncio(lambda: publish(b, "s", [b"for b0", b"for b1"], create=True))
            assert await in_asyncio(lambda: consume(a, "s", 1)) == [(0, b"for a")]
            assert await in_asyncio(lambda: consume(b, "s", 2)) == [(0, b"for b0"), (1, b"for b1")]
            await a.stop()  # one stopping leaves the other alone
            assert await in_asyncio(lambda: consume(b, "s", 1)) == [(0, b"for b0")]
    finally:
        for server in servers:
            await server.aclose()


async def test_loopback_only_and_nothing_left_after_exit(tmp_path: Path) -> None:
    require_rabbitmq()
    with trio.fail_after(LIMIT_S):
        async with running_rabbitmq(tmp_path / "r") as server:
            await server.rabbitmqctl("status")
            started, ports = server.started_pids, server.ports
            assert server.beam_pid in started and len(started) >= 3  # launcher, beam, epmd
            assert ports is not None
            found = listening(server.pids())
            assert {p for _, p in found} == set(astuple(ports))
            assert {a for a, _ in found} <= {"127.0.0.1", "::1"}  # epmd adds ::1 by itself
    assert [p for p in started if alive(p)] == []
    assert server.pids() == []
    assert all(bindable(p) for p in astuple(ports))


async def test_failed_start_reports_the_log_and_leaves_nothing(rabbitmq: RabbitMQServer) -> None:
    with trio.fail_after(LIMIT_S):
        await rabbitmq.stop()
        with socket.socket() as squatter:  # its AMQP port, taken while it was down
            squatter.bind((HOST, rabbitmq.amqp_port))  # no SO_REUSEADDR: the node's bind fails
            with pytest.raises(RabbitMQStartError, match=r"rabbit\.log"):
                await rabbitmq.start()
        assert rabbitmq.pids() == []
        await rabbitmq.start()  # and it starts again once the port is free
        assert not await rabbitmq.stream_available("s")
        await in_asyncio(lambda: publish(rabbitmq, "s", [b"x"], create=True))
        assert await in_asyncio(lambda: consume(rabbitmq, "s", 1)) == [(0, b"x")]
