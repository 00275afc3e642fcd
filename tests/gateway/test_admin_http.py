"""Admin HTTP: /metrics, /livez, /readyz against an in-process gateway."""

from __future__ import annotations

import trio

from gateway.app import Running
from tests.helpers.rog_client import RogClient


async def http_get(address: tuple[str, int], path: str, method: str = "GET") -> tuple[int, bytes]:
    stream = await trio.open_tcp_stream(*address)
    async with stream:
        await stream.send_all(f"{method} {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        chunks = []
        while chunk := await stream.receive_some(65536):
            chunks.append(chunk)
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    return int(head.split()[1]), body


async def test_health_endpoints(gateway: Running) -> None:
    assert gateway.admin is not None
    with trio.fail_after(10):
        assert await http_get(gateway.admin, "/livez") == (200, b"ok\n")
        assert await http_get(gateway.admin, "/readyz") == (200, b"ok\n")
        assert (await http_get(gateway.admin, "/nope"))[0] == 404
        assert (await http_get(gateway.admin, "/livez", "POST"))[0] == 405


async def test_metrics_after_rog_traffic(gateway: Running) -> None:
    assert gateway.admin is not None
    c = RogClient(*gateway.address("rog"))
    with trio.fail_after(10):
        await c.create_log("m", 1)
        await c.publish("m", 0, b"x" * 10)
        await c.fetch("m", 0, "g")
        status, body = await http_get(gateway.admin, "/metrics")
    assert status == 200
    text = body.decode()
    # Sub-millisecond buckets, labelled by protocol, canonical command and wire command.
    assert (
        'streamgate_command_duration_seconds_bucket{backend="embedded",command="append",'
        'error_type="",le="5e-05",outcome="ok",protocol="rog",wire_command="publish"}'
    ) in text
    assert 'streamgate_messages_in_total{protocol="rog"} 1.0' in text
    assert 'streamgate_messages_out_total{protocol="rog"} 1.0' in text
    assert 'streamgate_connections_total{protocol="rog"} 3.0' in text
    assert 'streamgate_build_info{backend="embedded"' in text
    # Pre-created so dashboards have series before the first request of a kind.
    assert 'streamgate_connections_active{protocol="kafka"} 0.0' in text
    overhead = 'streamgate_gateway_overhead_seconds_count{protocol="rog",wire_command="publish"}'
    assert f"{overhead} 1.0" in text


async def test_garbage_http_does_not_break_admin(gateway: Running) -> None:
    assert gateway.admin is not None
    with trio.fail_after(15):
        stream = await trio.open_tcp_stream(*gateway.admin)
        async with stream:
            await stream.send_all(b"\x00\xff garbage\r\n\r\n")
            while await stream.receive_some(1024):
                pass
        assert (await http_get(gateway.admin, "/livez"))[0] == 200
