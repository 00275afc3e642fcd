"""Rog end to end over real sockets against an in-process gateway on the embedded backend."""

from __future__ import annotations

import contextlib
import os
import struct

import trio

from gateway.app import Running
from gateway.listeners.rog import _KeyedLocks
from protocols.rog import (
    AT_LEAST_ONE_PARTITION,
    COMMAND_NOT_CREATED,
    NO_DATA_LEFT,
    Error,
    FetchOk,
    Ok,
    log_already_exists,
    message_too_large,
    no_log_registered,
    partition_out_of_range,
    unparseable,
)
from tests.helpers.rog_client import RogClient


def client(gw: Running) -> RogClient:
    return RogClient(*gw.address("rog"))


def publish_bytes(name: str, partition: int, data: bytes) -> bytes:
    n = name.encode()
    return bytes([1, partition, len(n)]) + n + struct.pack(">Q", len(data)) + data


async def test_create_log_and_its_errors(gateway: Running) -> None:
    c = client(gateway)
    with trio.fail_after(10):
        assert await c.create_log("events.log", 10) == Ok()
        assert await c.create_log("events.log", 10) == Error(text=log_already_exists("events.log"))
        assert await c.create_log("zero", 0) == Error(text=AT_LEAST_ONE_PARTITION)
        # The exact bytes of rog.md §5: create, then the 25-byte "already exists" error.
        raw = bytes.fromhex("0003066f7264657273")
        assert await c.raw(raw) == b"\x00"
        assert await c.raw(raw) == b"\x01" + struct.pack(">Q", 25) + b"Log orders already exists"


async def test_publish_to_every_partition_fetch_and_ack(gateway: Running) -> None:
    c = client(gateway)
    with trio.fail_after(20):
        assert await c.create_log("events", 10) == Ok()
        for p in range(10):
            assert await c.publish("events", p, f"data {p}".encode()) == Ok()
        for p in range(10):
            # No sleep: a publish is acknowledged only once it is stored (rog.md §4 says the
            # real server's tests need 0.1 s because it acknowledges before writing).
            assert await c.fetch("events", p, "test-group") == FetchOk(data=f"data {p}".encode())
            assert await c.ack("events", p, "test-group") == Ok()
            assert await c.fetch("events", p, "test-group") == Error(text=NO_DATA_LEFT)


async def test_fetch_repeats_until_ack_and_groups_are_independent(gateway: Running) -> None:
    c = client(gateway)
    with trio.fail_after(20):
        await c.create_log("orders", 3)
        for body in (b"first", b"second", b"third"):
            assert await c.publish("orders", 1, body) == Ok()
        for _ in range(3):
            assert await c.fetch("orders", 1, "g1") == FetchOk(data=b"first")
        assert await c.ack("orders", 1, "g1") == Ok()
        assert await c.fetch("orders", 1, "g1") == FetchOk(data=b"second")
        # Another group starts at 0 and does not move g1.
        assert await c.fetch("orders", 1, "g2") == FetchOk(data=b"first")
        assert await c.ack("orders", 1, "g2") == Ok()
        assert await c.fetch("orders", 1, "g2") == FetchOk(data=b"second")
        assert await c.fetch("orders", 1, "g1") == FetchOk(data=b"second")
        # Other partitions are untouched.
        assert await c.fetch("orders", 0, "g1") == Error(text=NO_DATA_LEFT)


async def test_ack_past_the_end_is_refused_and_skips_nothing(gateway: Running) -> None:
    c = client(gateway)
    with trio.fail_after(10):
        await c.create_log("skip", 1)
        await c.publish("skip", 0, b"one")
        # An ack before any fetch acknowledges the message a fetch would return (the real
        # server panics instead, rog.md §4).
        assert await c.ack("skip", 0, "g") == Ok()
        assert await c.ack("skip", 0, "g") == Error(text=NO_DATA_LEFT)
        await c.publish("skip", 0, b"two")
        # The real server would have skipped "two" here (rog.md §4, "Ack").
        assert await c.fetch("skip", 0, "g") == FetchOk(data=b"two")


async def test_unknown_log_and_partition_get_errors_not_silent_closes(gateway: Running) -> None:
    c = client(gateway)
    with trio.fail_after(10):
        for call in (c.publish("nope", 0, b"x"), c.fetch("nope", 0, "g"), c.ack("nope", 0, "g")):
            assert await call == Error(text=no_log_registered("nope"))
        await c.create_log("orders", 3)
        expected = Error(text=partition_out_of_range(3, "orders", 3))
        assert await c.publish("orders", 3, b"x") == expected
        assert await c.fetch("orders", 3, "g") == expected
        assert await c.ack("orders", 3, "g") == expected


async def test_unknown_command_byte(gateway: Running) -> None:
    reply = await client(gateway).raw(b"\x07")
    text = COMMAND_NOT_CREATED.encode()
    assert reply == b"\x01" + struct.pack(">Q", len(text)) + text


async def test_one_mebibyte_binary_payloads_round_trip(gateway: Running) -> None:
    c = client(gateway)
    blobs = [os.urandom(1 << 20) for _ in range(3)]
    with trio.fail_after(30):
        await c.create_log("big", 1)
        for blob in blobs:
            assert await c.publish("big", 0, blob) == Ok()
        for blob in blobs:
            assert await c.fetch("big", 0, "g") == FetchOk(data=blob)
            assert await c.ack("big", 0, "g") == Ok()


async def test_slow_body_is_stored_whole_never_zero_padded(gateway: Running) -> None:
    """rog.md §1: the real server stores a zero-filled tail when the body arrives late."""
    c = client(gateway)
    body = bytes(range(256)) * 64
    frame = publish_bytes("slow", 0, body)
    with trio.fail_after(10):
        await c.create_log("slow", 1)
        stream = await trio.open_tcp_stream(*gateway.address("rog"))
        async with stream:
            for i in range(0, len(frame), 4000):
                await stream.send_all(frame[i : i + 4000])
                await trio.sleep(0.01)
            assert await stream.receive_some(16) == b"\x00"
        assert await c.fetch("slow", 0, "g") == FetchOk(data=body)


async def test_huge_declared_size_is_refused_and_nothing_is_stored(gateway: Running) -> None:
    c = client(gateway)
    limit = 64 << 20
    with trio.fail_after(10):
        await c.create_log("huge", 1)
        for declared in (2**62, 2**64 - 1):
            header = bytes([1, 0, 4]) + b"huge" + struct.pack(">Q", declared)
            text = message_too_large(declared, limit).encode()
            assert await c.raw(header) == b"\x01" + struct.pack(">Q", len(text)) + text
        # The listener lives on and nothing was stored.
        assert await c.fetch("huge", 0, "g") == Error(text=NO_DATA_LEFT)


async def test_truncated_publish_at_eof_is_not_stored(gateway: Running) -> None:
    c = client(gateway)
    with trio.fail_after(10):
        await c.create_log("cut", 1)
        frame = publish_bytes("cut", 0, b"0123456789")
        text = unparseable("data").encode()
        assert await c.raw(frame[:-3], eof=True) == b"\x01" + struct.pack(">Q", len(text)) + text
        assert await c.fetch("cut", 0, "g") == Error(text=NO_DATA_LEFT)
        # Half-closing with nothing sent gets a silent close, not a bogus "create log" error.
        assert await c.raw(b"", eof=True) == b""


async def test_only_the_first_request_of_a_connection_is_served(gateway: Running) -> None:
    c = client(gateway)
    with trio.fail_after(10):
        await c.create_log("once", 1)
        two = publish_bytes("once", 0, b"a") + publish_bytes("once", 0, b"b")
        assert await c.raw(two) == b"\x00"
        assert await c.fetch("once", 0, "g") == FetchOk(data=b"a")
        assert await c.ack("once", 0, "g") == Ok()
        assert await c.fetch("once", 0, "g") == Error(text=NO_DATA_LEFT)


async def test_upstream_client_style_single_send_single_recv(gateway: Running) -> None:
    """rog.md §7: the upstream client sends with one send() and reads one recv(1024)."""
    host, port = gateway.address("rog")

    async def once(data: bytes) -> bytes:
        stream = await trio.open_tcp_stream(host, port)
        async with stream:
            await stream.send_all(data)
            return bytes(await stream.receive_some(1024))

    with trio.fail_after(10):
        assert await once(bytes.fromhex("000a0a6576656e74732e6c6f67")) == b"\x00"  # 10 partitions
        assert await once(publish_bytes("events.log", 2, b"some data")) == b"\x00"
        fetch = bytes([2, 2, 10]) + b"events.log" + bytes([10]) + b"test-group"
        reply = await once(fetch)
        size = struct.unpack(">Q", reply[1:9])[0]
        assert reply[0:1] == b"\x00" and reply[9 : 10 + size] == b"some data"


async def test_garbage_connections_do_not_take_the_listener_down(gateway: Running) -> None:
    c = client(gateway)

    async def send_junk(junk: bytes) -> None:
        # The server may answer and close before all the junk is written: a reset is fine.
        with contextlib.suppress(trio.BrokenResourceError):
            await c.raw(junk, eof=True)

    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            for i in range(50):
                nursery.start_soon(send_junk, os.urandom(1 + i * 7))
        assert await c.create_log("alive", 1) == Ok()
        assert await c.publish("alive", 0, b"yes") == Ok()
        assert await c.fetch("alive", 0, "g") == FetchOk(data=b"yes")


async def test_concurrent_acks_of_one_group_advance_exactly_once_each(gateway: Running) -> None:
    c = client(gateway)
    with trio.fail_after(30):
        await c.create_log("race", 1)
        for i in range(40):
            await c.publish("race", 0, b"%d" % i)
        async with trio.open_nursery() as nursery:
            for _ in range(20):
                nursery.start_soon(c.ack, "race", 0, "g")
        assert await c.fetch("race", 0, "g") == FetchOk(data=b"20")


async def test_group_locks_are_kept_only_while_used(autojump_clock: trio.abc.Clock) -> None:
    # Rog needs no login: a client naming a new (log, partition, group) on every request must
    # not leave a lock behind for each (issue 18's fuzz suite found 20,000 refused fetches with
    # distinct groups holding 15 MB for good). The mock clock orders the sleeps exactly.
    locks = _KeyedLocks()
    order: list[str] = []

    async def use(key: tuple[str, int, str], name: str, nap: float) -> None:
        async with locks.hold(key):
            order.append(f"{name}+")
            await trio.sleep(nap)
            order.append(f"{name}-")

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(use, ("log", 0, "g"), "a", 0.05)
            await trio.sleep(0.01)
            nursery.start_soon(use, ("log", 0, "g"), "b", 0)  # waits for a: one key, one holder
            nursery.start_soon(use, ("log", 0, "other"), "c", 0.02)  # another key: no waiting
            await trio.sleep(0.005)
            assert len(locks) == 2
        assert order.index("a-") < order.index("b+") and order.index("c-") < order.index("a-")
        for i in range(1000):
            await use(("nolog", 0, f"g{i}"), "x", 0)
    assert len(locks) == 0
