"""What the bad-input tests of every listener share: reading until the gateway closes a
connection, and the per-protocol connection counters of its metrics registry."""

from __future__ import annotations

import trio

from gateway.app import Running

__all__ = ["bytes_received", "connection_errors", "until_closed"]


async def until_closed(stream: trio.abc.ReceiveStream, got: bytes = b"") -> bytes:
    """Read until the gateway closes (EOF or reset); ``got`` and whatever came after it."""
    while True:
        try:
            data = await stream.receive_some(65536)
        except trio.BrokenResourceError:  # reset: closed with our bytes unread
            return got
        if not data:
            return got
        got += data


def connection_errors(running: Running, protocol: str, reason: str) -> float:
    assert running.metrics is not None
    value = running.metrics.registry.get_sample_value(
        "streamgate_connection_errors_total", {"protocol": protocol, "reason": reason}
    )
    assert value is not None, f"no connection_errors sample for {protocol}/{reason}"
    return value


def bytes_received(running: Running, protocol: str) -> float:
    assert running.metrics is not None
    value = running.metrics.registry.get_sample_value(
        "streamgate_bytes_received_total", {"protocol": protocol}
    )
    return value or 0.0
