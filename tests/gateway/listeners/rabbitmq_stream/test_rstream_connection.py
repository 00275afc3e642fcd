"""rstream 1.1.1 connecting to the gateway (rabbitmq-stream.md §1.3, §5 Connection, §7):
authentication, virtual hosts, and the advertised address that Open and Metadata carry (rstream
opens its publishing and consuming connections there)."""

from __future__ import annotations

import gc
import socket
from pathlib import Path

import pytest
from rstream import Consumer, Producer, RawMessage, StreamDoesNotExist
from rstream.exceptions import AuthenticationFailure, VirtualHostAccessFailure
from rstream.schema import Broker

from gateway.app import Running
from gateway.model import CreateStream

from .conftest import USER, rstream_kwargs, run_client
from .rstream_support import Inbox, first, gateway_on, low_level

# rstream 1.1.1 leaves the socket and asyncio StreamWriter of a refused connection open (its
# start() raises before it keeps the connection anywhere it could close): unraisable
# ResourceWarnings of the library's, collected at garbage collection.
_RSTREAM_LEAKS_REFUSED = pytest.mark.filterwarnings(
    "ignore::pytest.PytestUnraisableExceptionWarning"
)


@_RSTREAM_LEAKS_REFUSED
async def test_wrong_credentials_are_refused(gateway: Running) -> None:
    async def scenario(host: str, port: int) -> None:
        with pytest.raises(AuthenticationFailure):
            await Producer(host, port, username=USER, password="wrong").start()
        with pytest.raises(AuthenticationFailure):
            await Consumer(host, port, username="nobody", password="guest").start()
        # The right ones still work afterwards.
        async with Producer(**rstream_kwargs(port)) as producer:
            await producer.create_stream("s")

    await run_client(gateway, scenario)
    gc.collect()  # the leaked objects go now, inside this test's filter


@_RSTREAM_LEAKS_REFUSED
async def test_unknown_virtual_host_is_refused(gateway: Running) -> None:
    async def scenario(host: str, port: int) -> None:
        with pytest.raises(VirtualHostAccessFailure):
            await Producer(**rstream_kwargs(port), vhost="nope").start()

    await run_client(gateway, scenario)
    gc.collect()  # the leaked objects go now, inside this test's filter


async def test_virtual_hosts_are_separate(gateway: Running) -> None:
    # A virtual host is a canonical stream; one made through the backend is open to rstream.
    assert gateway.backend is not None
    await gateway.backend.create_stream(CreateStream(stream="tenant"))

    async def scenario(host: str, port: int) -> None:
        async with Producer(**rstream_kwargs(port), vhost="tenant") as producer:
            await producer.create_stream("orders")
            await producer.send_wait("orders", RawMessage(b"in tenant"))
        async with Producer(**rstream_kwargs(port)) as producer:
            assert not await producer.stream_exists("orders")
            with pytest.raises(StreamDoesNotExist):
                await producer.send_wait("orders", RawMessage(b"in /"))
        inbox = Inbox()
        async with Consumer(**rstream_kwargs(port), vhost="tenant") as consumer:
            await consumer.subscribe("orders", inbox, offset_specification=first())
            await inbox.until(1)
        assert inbox.bodies == [b"in tenant"]

    await run_client(gateway, scenario)


async def test_open_and_metadata_advertise_the_gateway(gateway: Running) -> None:
    async def scenario(host: str, port: int) -> None:
        async with low_level(host, port) as client:
            props = client.server_properties
            assert props is not None
            assert (props["advertised_host"], props["advertised_port"]) == (host, str(port))
            assert props["product"] == "RabbitMQ"
            await client.create_stream("s")
            leader, replicas = await client.query_leader_and_replicas("s")
            assert (leader, replicas) == (Broker(0, host, port), [])
            assert await client.stream_exists("s")
            assert not await client.stream_exists("missing")

    await run_client(gateway, scenario)


async def test_clients_follow_the_configured_advertised_address(tmp_path: Path) -> None:
    # A port that refuses connections: bound, never listening.
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        refused = closed.getsockname()[1]

        async def scenario(host: str, port: int) -> None:
            async with low_level(host, port) as client:
                assert client.server_properties is not None
                assert client.server_properties["advertised_host"] == "localhost"
                assert client.server_properties["advertised_port"] == str(refused)
                await client.create_stream("s")
                leader, _ = await client.query_leader_and_replicas("s")
                assert (leader.host, leader.port) == ("localhost", refused)
            # rstream publishes through the advertised address, not the one it was given.
            async with Producer(**rstream_kwargs(port)) as producer:
                with pytest.raises(ConnectionRefusedError):
                    await producer.send_wait("s", RawMessage(b"x"))

        overrides = {
            "listeners.rabbitmq_stream.advertised_host": "localhost",
            "listeners.rabbitmq_stream.advertised_port": refused,
        }
        async with gateway_on(tmp_path / "data", **overrides) as running:
            await run_client(running, scenario)


async def test_advertised_host_alone_keeps_the_listening_port(tmp_path: Path) -> None:
    async def scenario(host: str, port: int) -> None:
        async with low_level(host, port) as client:
            await client.create_stream("s")
            leader, _ = await client.query_leader_and_replicas("s")
            assert (leader.host, leader.port) == ("localhost", port)
        async with Producer(**rstream_kwargs(port)) as producer:
            assert await producer.send_wait("s", RawMessage(b"via localhost")) == 1

    overrides = {"listeners.rabbitmq_stream.advertised_host": "localhost"}
    async with gateway_on(tmp_path / "data", **overrides) as running:
        await run_client(running, scenario)
