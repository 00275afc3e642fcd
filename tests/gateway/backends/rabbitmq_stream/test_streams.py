"""What the RabbitMQ backend keeps per stream on a connection, without a broker: ``Kept`` (tails,
publishers) and a tail's expected appends leave nothing behind that grows over time."""

from __future__ import annotations

from typing import cast

import trio
import trio.testing

from gateway.backends.rabbitmq_stream.conn import Connection
from gateway.backends.rabbitmq_stream.streams import Kept
from gateway.backends.rabbitmq_stream.tail import Tail
from gateway.model import GatewayError

NO_CONNECTION = cast(Connection, None)  # neither Kept nor these Tail methods touch it


class Item:
    def __init__(self) -> None:
        self.usable = True
        self.idle = True
        self.dropped: GatewayError | None = None

    def drop(self, why: GatewayError) -> None:
        self.dropped = why


async def test_kept_keeps_no_lock_per_stream_ever_opened() -> None:
    made: list[str] = []

    async def make(conn: Connection, stream: str) -> Item:
        await trio.sleep(0.01)  # others asking for the same stream meanwhile wait for this one
        made.append(stream)
        return Item()

    kept: Kept[Item] = Kept(NO_CONNECTION, make, 2)
    with trio.fail_after(5):
        for i in range(20):
            async with trio.open_nursery() as nursery:
                for _ in range(3):
                    nursery.start_soon(kept.get, f"s{i}")
    assert made == [f"s{i}" for i in range(20)]  # one each, however many asked at once
    assert list(kept.items) == ["s18", "s19"]
    assert kept._opening == {}


async def test_kept_drops_with_a_retriable_error() -> None:
    async def make(conn: Connection, stream: str) -> Item:
        return Item()

    kept: Kept[Item] = Kept(NO_CONNECTION, make, 1)
    first = await kept.get("a")
    await kept.get("b")
    assert first.dropped is not None and first.dropped.retriable


async def test_an_abandoned_append_leaves_its_tail_idle() -> None:
    """A tail with appends still expected is never idle (never evicted): a failed append must
    not count, even when no chunk comes after it."""
    tail = Tail(NO_CONNECTION, "s")
    expectation = tail.expect(b"entries", 1)
    assert not tail.idle
    tail.abandon(expectation)
    assert tail.idle and expectation.done.is_set()
