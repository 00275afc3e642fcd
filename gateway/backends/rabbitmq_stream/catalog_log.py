"""A log of JSON records on the broker that every gateway on the virtual host writes and
follows: the catalog's stream (see ``rabbitmq_stream_catalog``), and the coordination stream
that shared consumer groups replicate over (``coordination.shared_groups``). Followed by a
subscription on every subscribing connection, written through a publisher of its own.

On each new subscribing connection ``attach`` creates the stream if needed, subscribes from the
first record not applied yet and writes a ``sync`` record (through the publishing connection);
once that record comes back, everything written before it has been applied and the catalog is
ready. A write waits for its own record to come back, so the state a command reads afterwards
includes it, in the log's order: several gateways writing one catalog agree on the result.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from typing import Any, Final, Protocol

import structlog
import trio

from gateway.backends.rabbitmq_stream.catalog import CATALOG_STREAM
from gateway.backends.rabbitmq_stream.conn import Connection, check
from gateway.backends.rabbitmq_stream.link import Link
from gateway.backends.rabbitmq_stream.publisher import Publisher
from gateway.model import BackendUnavailable, GatewayError, Timeout
from protocols import rabbitmq_stream as rs
from protocols._wire import RemoteProtocolError
from protocols.rabbitmq_stream import OffsetType, ResponseCode
from protocols.rabbitmq_stream.chunk import (
    DeliveredChunk,
    SimpleEntry,
    decode_chunk,
    encode_entry,
    iter_records,
)

log = structlog.get_logger("streamgate.backend.rabbitmq_stream")

FOLLOW_CREDIT: Final = 16
ATTACH_RETRY_S: Final = 0.5


class Applier(Protocol):
    """What a log's records build (the catalog, a replica of shared groups)."""

    next_offset: int  # the next record to apply

    def apply_entry(self, data: bytes, *, offset: int, timestamp_ms: int) -> str | None:
        """Apply one record (``timestamp_ms``: the broker's, of its chunk); its rid, if any."""
        ...


class _Follower:
    """The log's subscription (the connection's Subscriber): applies records in order."""

    def __init__(self, owner: CatalogLog, conn: Connection) -> None:
        self.owner = owner
        self.stream = owner.stream
        self.conn = conn
        self.sid = -1
        self.gone = trio.Event()

    def deliver(self, chunk: DeliveredChunk) -> None:
        applier = self.owner.catalog
        try:
            decoded = decode_chunk(chunk)
            records = list(iter_records(decoded))
        except RemoteProtocolError as exc:
            log.error("corrupt chunk", stream=self.stream, error=str(exc))
            self.conn.close()
            return
        self.conn.outbox.credit(self.sid, 1)
        for offset, data in records:
            if offset < applier.next_offset:
                continue  # chunk-granular delivery: applied already
            rid = applier.apply_entry(data, offset=offset, timestamp_ms=decoded.timestamp_ms)
            applier.next_offset = offset + 1
            seen = self.owner.waiting.get(rid) if rid is not None else None
            if seen is not None:
                seen.set()
        self.owner.changed()

    def closed(self, why: GatewayError) -> None:
        self.gone.set()


class CatalogLog:
    def __init__(
        self,
        link: Link,
        sub_link: Link,
        catalog: Applier,
        on_change: Callable[[], None],
        *,
        stream: str = CATALOG_STREAM,
        arguments: Sequence[tuple[str, str]] = (),
    ) -> None:
        self.stream = stream
        self.arguments = tuple(arguments)  # RabbitMQ's, for the Create of the stream
        self.link = link  # writes: the publishing connection
        self.sub_link = sub_link  # the follower: the subscribing connection
        self.catalog = catalog
        self.changed = on_change  # after every applied chunk of records
        self.waiting: dict[str, trio.Event] = {}
        self._ready_on: Connection | None = None
        self._ready = trio.Event()
        self._publisher: Publisher | None = None
        self._declaring = trio.Lock()
        self.last_error = f"{stream} not read yet"

    # --- following ---------------------------------------------------------------------------

    async def attach(self, conn: Connection) -> None:
        """The subscribing link's on_connect hook: follow the log while ``conn`` lives."""
        while conn.alive:
            follower = _Follower(self, conn)
            try:
                await self._follow(conn, follower)
                await self._write(await self.link.connection(), {"op": "sync"})
            except GatewayError as exc:
                self.last_error = f"{self.stream}: {exc.message}"
                log.info("log stream not available yet", stream=self.stream, error=exc.message)
                if follower.sid >= 0:
                    conn.remove_subscriber(follower.sid)
                await trio.sleep(ATTACH_RETRY_S)
                continue
            self._ready_on = conn
            self._ready.set()
            await follower.gone.wait()
            self._ready_on = None
            self._ready = trio.Event()
            self.last_error = f"{self.stream} unavailable"

    async def _follow(self, conn: Connection, follower: _Follower) -> None:
        created = await conn.call(
            lambda c: rs.Create(correlation_id=c, stream=self.stream, arguments=self.arguments)
        )
        check(created, f"Create of {self.stream}", ResponseCode.STREAM_ALREADY_EXISTS)
        follower.sid = conn.add_subscriber(follower)
        at = self.catalog.next_offset
        spec = rs.OffsetSpec.offset(at) if at else rs.OffsetSpec(type=OffsetType.FIRST)
        reply = await conn.call(
            lambda c: rs.Subscribe(
                correlation_id=c,
                subscription_id=follower.sid,
                stream=self.stream,
                offset=spec,
                credit=FOLLOW_CREDIT,
            )
        )
        check(reply, f"Subscribe to {self.stream}")

    @property
    def ready(self) -> bool:
        conn = self._ready_on
        return conn is not None and conn.alive

    async def wait_ready(self) -> None:
        """Until the log is applied up to date on a live connection, waiting a little."""
        with self.link.watchdog.bound(self.link.connect_wait_s):
            while True:
                conn = self._ready_on
                if conn is not None and conn.alive:
                    return
                if self._ready.is_set():
                    await trio.sleep(0.01)
                else:
                    await self._ready.wait()
        self.sub_link.current()  # raises when the broker itself is unreachable
        raise BackendUnavailable(self.last_error)

    # --- writing -----------------------------------------------------------------------------

    async def write(self, record: dict[str, Any]) -> None:
        """Append ``record``; return once the follower has applied it."""
        await self.wait_ready()
        await self._write(await self.link.connection(), record)

    async def _write(self, conn: Connection, record: dict[str, Any]) -> None:
        rid = record.get("rid") or uuid.uuid4().hex
        data = json.dumps({**record, "rid": rid}, separators=(",", ":")).encode()
        seen = trio.Event()
        self.waiting[rid] = seen
        try:
            publisher = await self._publisher_on(conn)
            async with publisher.lock:
                batch = await publisher.send(encode_entry(SimpleEntry(data)))
            await publisher.wait(batch)
            with conn.watchdog.bound(conn.settings.request_timeout_s):
                await seen.wait()
            if not seen.is_set():
                raise Timeout(f"{self.stream} record confirmed but not read back in time")
        finally:
            self.waiting.pop(rid, None)

    async def _publisher_on(self, conn: Connection) -> Publisher:
        async with self._declaring:
            publisher = self._publisher
            if publisher is None or publisher.conn is not conn or not publisher.usable:
                publisher = self._publisher = await Publisher.declare(conn, self.stream)
            return publisher


def new_rid() -> str:
    return uuid.uuid4().hex


__all__ = ["Applier", "CatalogLog", "new_rid"]
