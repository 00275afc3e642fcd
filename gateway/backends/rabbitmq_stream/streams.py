"""What a connection keeps per RabbitMQ stream in use: tails on the subscribing connection,
publishers on the publishing one, least recently used dropped first (ids are uint8 per
connection, rabbitmq-stream.md §12).

Two connections, not one: RabbitMQ 3.10.8 answers a Publish 10-20 times later (about 2-4 ms
instead of 0.2 ms, measured) when the same connection also subscribes to that stream, and every
stream the backend writes has a tail. A subscription on another connection costs nothing.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Final, Generic, Protocol, TypeVar

import trio

from gateway.backends.rabbitmq_stream.conn import Connection
from gateway.backends.rabbitmq_stream.publisher import Publisher
from gateway.backends.rabbitmq_stream.tail import Tail
from gateway.model import BackendUnavailable, GatewayError, UnknownTopic

MAX_TAILS: Final = 128  # of 256 subscription ids: the rest for reads, probes, the catalog
MAX_PUBLISHERS: Final = 200  # of 256 publisher ids: one is the catalog's


class _Kept(Protocol):
    @property
    def usable(self) -> bool: ...
    @property
    def idle(self) -> bool: ...
    def drop(self, why: GatewayError) -> None: ...


K = TypeVar("K", bound=_Kept)


class Kept(Generic[K]):
    """One of ``make(stream)`` per stream on ``conn``, at most ``limit`` (idle ones go first)."""

    def __init__(
        self, conn: Connection, make: Callable[[Connection, str], Awaitable[K]], limit: int
    ) -> None:
        self.conn = conn
        self.items: OrderedDict[str, K] = OrderedDict()
        self._make = make
        self._limit = limit
        self._opening: dict[str, trio.Lock] = {}

    async def get(self, stream: str) -> K:
        found = self.items.get(stream)
        if found is not None and found.usable:
            self.items.move_to_end(stream)
            return found
        opening = self._opening.setdefault(stream, trio.Lock())
        try:
            async with opening:
                found = self.items.get(stream)
                if found is None or not found.usable:
                    if found is not None:  # e.g. a stale tail: its subscription is let go
                        del self.items[stream]
                        found.drop(BackendUnavailable(f"{stream!r} is reopened"))
                    for name, old in list(self.items.items()):
                        if len(self.items) < self._limit:
                            break
                        if not old.usable or old.idle:
                            del self.items[name]
                            old.drop(BackendUnavailable(f"{name!r} dropped to make room"))
                    found = self.items[stream] = await self._make(self.conn, stream)
                return found
        finally:
            # Nobody holds or waits for it: keeping one per stream ever used would be a leak.
            if not opening.locked() and self._opening.get(stream) is opening:
                del self._opening[stream]

    def forget(self, names: list[str]) -> None:
        """Streams deleted: what waits on them fails (long-polls wake, find them gone)."""
        for name in names:
            found = self.items.pop(name, None)
            if found is not None:
                found.drop(UnknownTopic(f"RabbitMQ stream {name!r} was deleted"))


def tails(conn: Connection) -> Kept[Tail]:
    return Kept(conn, Tail.open, MAX_TAILS)


def keyed_publisher(stream: str, reference: str = "") -> str:
    """The key of a stream's publisher with ``reference`` among the kept ones: the stream's
    name alone without one (so ``forget`` finds it), NUL-separated with one (a stream name
    never holds NUL)."""
    return f"{stream}\0{reference}" if reference else stream


async def _declare(conn: Connection, key: str) -> Publisher:
    stream, _, reference = key.partition("\0")
    return await Publisher.declare(conn, stream, reference)


def publishers(conn: Connection) -> Kept[Publisher]:
    return Kept(conn, _declare, MAX_PUBLISHERS)


__all__ = ["Kept", "keyed_publisher", "publishers", "tails"]
