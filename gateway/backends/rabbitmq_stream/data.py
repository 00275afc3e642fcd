"""Messages and offsets on RabbitMQ streams: append, read, list_offsets, consumer offsets.

Append: a batch in the ``rabbitmq_stream`` wire format (entries as a RabbitMQ client published
them) is published as those entries, undecoded; a deduplicating client's Publish frame
(``rabbitmq_stream_publish``) goes on as it came; any other batch as one AMQP 1.0 entry per
message (``to_amqp``; the shaping is in ``batches``). It is acknowledged only once RabbitMQ
confirmed every publishing id, and its base offset is where the partition's tail saw its entries
land (``rabbitmq_stream_tail``).
Appends to one partition go out in order (one publisher per partition stream, its lock held
while a batch is registered and sent); several may wait for confirms at once.

Read: from the tail's recent chunks when they hold the offset, else from a short subscription at
the offset; up to ``max_wait_ms`` for the first bytes (``min_bytes``) when at the end. Every
chunk comes back as a batch in the ``rabbitmq_stream`` wire format (its entries as published,
``base_offset`` = the chunk id), trimmed to the offsets asked for unless ``whole_batches``.

Offsets: StoreOffset(reference = the canonical group, the partition's stream) holds the LAST
processed offset, so canonical NEXT = stored + 1 (DESIGN.md §3); a StoreOffset is never answered
(§5), so each commit is followed by a QueryOffset that must read it back. A commit of NEXT = 0
(nothing consumed) and the commit metadata string have no place in RabbitMQ: they are catalog
records. RabbitMQ has no way to delete a stored offset: ``delete_offset`` is Unsupported.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Awaitable, Callable
from typing import Final

import structlog
import trio

from gateway.backends.rabbitmq_stream import fetch
from gateway.backends.rabbitmq_stream.batches import as_sent, batches_of, entries_of
from gateway.backends.rabbitmq_stream.catalog import Catalog, TopicEntry
from gateway.backends.rabbitmq_stream.catalog_log import CatalogLog
from gateway.backends.rabbitmq_stream.conn import Connection, check
from gateway.backends.rabbitmq_stream.cursor import Cursors
from gateway.backends.rabbitmq_stream.link import Link
from gateway.backends.rabbitmq_stream.producers import Producers
from gateway.backends.rabbitmq_stream.publisher import Publisher
from gateway.backends.rabbitmq_stream.streams import Kept, keyed_publisher
from gateway.backends.rabbitmq_stream.streams import publishers as kept_publishers
from gateway.backends.rabbitmq_stream.streams import tails as kept_tails
from gateway.backends.rabbitmq_stream.tail import Stored, Tail
from gateway.model import (
    Append,
    AppendResult,
    BackendUnavailable,
    CommitOffset,
    FetchOffset,
    InvalidRequest,
    ListOffsets,
    ListOffsetsResult,
    MessageBatch,
    OffsetOutOfRange,
    OffsetSpec,
    Read,
    ReadResult,
    Timeout,
    Topic,
    UnknownPartition,
    WireBatch,
)
from gateway.translate.rabbitmq_stream.messages import (
    PUBLISHED_FORMAT,
    committed_of_stored,
    stored_of_committed,
    stored_of_published,
)
from protocols import rabbitmq_stream as rs
from protocols.rabbitmq_stream import ResponseCode

LOCATE_TIMEOUT_S: Final = 30.0  # confirmed entries to show up at the tail
MAX_REFERENCE: Final = 255  # tracking ids are uint8-length (osiris, §6)

log = structlog.get_logger("streamgate.backend.rabbitmq_stream")

Resolve = Callable[[Topic], Awaitable[TopicEntry]]


def partition_stream(entry: TopicEntry, partition: int) -> str:
    if not 0 <= partition < len(entry.partitions):
        raise UnknownPartition(
            f"topic {entry.topic} has no partition {partition}", partitions=len(entry.partitions)
        )
    return entry.partitions[partition]


class Data:
    def __init__(
        self,
        link: Link,
        sub_link: Link,
        catalog: Catalog,
        log: CatalogLog,
        resolve: Resolve,
        max_bytes: int,
    ) -> None:
        self.link = link  # publishers, offsets
        self.sub_link = sub_link  # tails, reads, probes
        self.catalog = catalog
        self.log = log
        self.resolve = resolve
        self.max_message_bytes = max_bytes
        self.tails: Kept[Tail] | None = None
        self.cursors: Cursors | None = None  # reads from further back than the tails hold
        self.publishers: Kept[Publisher] | None = None
        self.producers = Producers(link)  # Kafka idempotent producers' publishing ids

    async def tail(self, stream: str) -> Tail:
        async def once() -> Tail:
            conn = await self.sub_link.connection()
            if self.tails is None or self.tails.conn is not conn:
                self.tails = kept_tails(conn)
            tail = await self.tails.get(stream)
            tail.touch()
            return tail

        return await self.sub_link.retry(once)

    async def publisher(self, stream: str, reference: str = "") -> Publisher:
        """The stream's publisher on the publishing connection; with a ``reference``, one
        declared with it (the broker then deduplicates by it), kept under its own key."""

        async def once() -> Publisher:
            conn = await self.link.connection()
            if self.publishers is None or self.publishers.conn is not conn:
                self.publishers = kept_publishers(conn)
            return await self.publishers.get(keyed_publisher(stream, reference))

        return await self.link.retry(once)

    def forget(self, names: list[str]) -> None:
        for kept in (self.tails, self.publishers, self.cursors):
            if kept is not None:
                kept.forget(names)

    def _cursors(self, conn: Connection) -> Cursors:
        if self.cursors is None or self.cursors.conn is not conn:
            self.cursors = Cursors(conn)
        return self.cursors

    def pulse(self) -> None:
        """Wake every long-poll (the catalog changed: they check their topic again)."""
        for tail in self.tails.items.values() if self.tails is not None else ():
            tail.pulse()

    async def _target(self, topic: Topic, partition: int) -> tuple[TopicEntry, str]:
        entry = await self.resolve(topic)
        return entry, partition_stream(entry, partition)

    # --- append ----------------------------------------------------------------------------------

    async def append(self, cmd: Append) -> AppendResult:
        entry, stream = await self._target(cmd.topic, cmd.partition)
        limit = entry.config.max_message_bytes or self.max_message_bytes
        limit = limit if limit > 0 else self.max_message_bytes
        wire = cmd.batch.wire
        if wire is not None and wire.format == PUBLISHED_FORMAT:
            if as_sent(cmd, wire, limit):
                return await self._publish_as_sent(cmd, entry, stream, wire, limit)
            cmd = _in_stored_form(cmd, wire)
        stored, records = entries_of(cmd.batch, limit)
        if cmd.producer_id >= 0 and cmd.base_sequence >= 0 and not cmd.publisher:
            return await self._append_idempotent(cmd, entry, stream, stored, records)
        if not cmd.offset_needed or cmd.publisher:
            return await self._publish_only(cmd, entry, stream, stored, records)
        return await self._located(cmd, entry, stream, stored, records)

    async def _append_idempotent(
        self, cmd: Append, entry: TopicEntry, stream: str, stored: bytes, records: int
    ) -> AppendResult:
        """A Kafka idempotent producer's batch, deduplicated by RabbitMQ (``producers``). A retry
        of what the broker says it stored is answered at once as a duplicate (without offsets, as
        Kafka's DUPLICATE_SEQUENCE_NUMBER); one still in flight finds the original's entries."""
        plan = await self.producers.plan(cmd, stream, records)
        if plan is None:
            return self._duplicate(entry, cmd, records)
        reference, ids = plan
        try:
            result = await self._located(cmd, entry, stream, stored, records, reference, ids)
        except Timeout:
            # Dropped by the broker as another gateway's copy, stored meanwhile? Then it is a
            # duplicate; else the timeout stands.
            if await self.producers.stored_elsewhere(stream, reference, ids[-1]):
                return self._duplicate(entry, cmd, records)
            raise
        self.producers.stored(stream, reference, ids[-1])
        return result

    def _duplicate(self, entry: TopicEntry, cmd: Append, records: int) -> AppendResult:
        return AppendResult(
            base_offset=-1,
            count=records,
            log_append_time_us=-1,
            log_start_offset=entry.start(cmd.partition),
            duplicate=True,
        )

    async def _located(
        self,
        cmd: Append,
        entry: TopicEntry,
        stream: str,
        stored: bytes,
        records: int,
        reference: str = "",
        ids: list[int] | None = None,
    ) -> AppendResult:
        """Publish and wait until the partition's tail saw where the entries landed (entries
        with these bytes: a copy some other publisher stored counts, as it is the same)."""
        tail = await self.tail(stream)
        tail.users += 1  # at once: in use, so not evicted while the publisher is declared
        try:
            publisher = await self.publisher(stream, reference)
            # Bounded: a broker under a resource alarm stops reading our socket.
            with tail.conn.watchdog.bound(LOCATE_TIMEOUT_S) as sending:
                async with publisher.lock:
                    expectation = tail.expect(stored, records)
                    if expectation.error is not None:  # the tail is gone: publish nothing
                        raise expectation.error
                    try:
                        batch = await publisher.send(stored, lambda: tail.abandon(expectation), ids)
                    except BaseException:  # not (all) sent: never wait for these entries
                        tail.abandon(expectation)
                        raise
            if sending.cancelled_caught:
                raise Timeout(f"RabbitMQ took no Publish on {stream!r} for {LOCATE_TIMEOUT_S} s")
            try:
                await publisher.wait(batch)
                with tail.conn.watchdog.bound(LOCATE_TIMEOUT_S):
                    await expectation.done.wait()
            finally:
                if not expectation.done.is_set() or batch.error is not None:
                    tail.abandon(expectation)
        finally:
            tail.users -= 1
        if expectation.error is not None:
            raise expectation.error
        if expectation.base < 0:
            raise Timeout(f"confirmed entries not seen on {stream!r} in {LOCATE_TIMEOUT_S} s")
        return AppendResult(
            base_offset=expectation.base,
            count=records,
            log_append_time_us=expectation.timestamp_ms * 1000,
            log_start_offset=entry.start(cmd.partition),
        )

    async def _publish_only(
        self, cmd: Append, entry: TopicEntry, stream: str, stored: bytes, records: int
    ) -> AppendResult:
        """An append whose offsets nobody asked for: done on PublishConfirm, without waiting
        for the tail to see where the entries landed (RabbitMQ's delivery latency, ~2 ms). With
        a publisher reference, the broker drops what it stored before for it (and confirms)."""
        publisher = await self.publisher(stream, cmd.publisher)
        ids = cmd.publishing_ids if cmd.publisher else None
        with publisher.conn.watchdog.bound(LOCATE_TIMEOUT_S) as sending:
            async with publisher.lock:
                batch = await publisher.send(stored, lambda: None, ids)
        if sending.cancelled_caught:
            raise Timeout(f"RabbitMQ took no Publish on {stream!r} for {LOCATE_TIMEOUT_S} s")
        await publisher.wait(batch)
        return AppendResult(
            base_offset=-1,
            count=records,
            log_append_time_us=time.time_ns() // 1000,
            log_start_offset=entry.start(cmd.partition),
        )

    async def _publish_as_sent(
        self, cmd: Append, entry: TopicEntry, stream: str, wire: WireBatch, limit: int
    ) -> AppendResult:
        """A deduplicating client's Publish frame, published on as it came (only the publisher
        id changes): no entry is looked at again, RabbitMQ confirms the client's ids. A frame
        above RabbitMQ's frame_max goes in the stored form, cut by the publisher."""
        publisher = await self.publisher(stream, cmd.publisher)
        if len(wire.data) > publisher.conn.frame_max:
            cmd = _in_stored_form(cmd, wire)
            stored, records = entries_of(cmd.batch, limit)
            return await self._publish_only(cmd, entry, stream, stored, records)
        with publisher.conn.watchdog.bound(LOCATE_TIMEOUT_S) as sending:
            async with publisher.lock:
                batch = await publisher.send_as_sent(wire.data, cmd.publishing_ids)
        if sending.cancelled_caught:
            raise Timeout(f"RabbitMQ took no Publish on {stream!r} for {LOCATE_TIMEOUT_S} s")
        await publisher.wait(batch)
        return AppendResult(
            base_offset=-1,
            count=wire.count,
            log_append_time_us=time.time_ns() // 1000,
            log_start_offset=entry.start(cmd.partition),
        )

    # --- read ------------------------------------------------------------------------------------

    async def read(self, cmd: Read) -> ReadResult:
        entry, stream = await self._target(cmd.topic, cmd.partition)
        floor = entry.start(cmd.partition)
        start = trio.current_time()
        deadline = start + cmd.max_wait_ms / 1000
        waited = 0.0
        chunks: list[Stored] = []
        size = records = 0
        pos = cmd.offset
        while True:
            try:
                tail = await self.tail(stream)
            except BackendUnavailable:
                # RabbitMQ closes a connection that subscribes to a stream it is deleting: once
                # the link has reconnected, ask again (a deleted topic answers UnknownTopic).
                entry, stream = await self._target(cmd.topic, cmd.partition)
                tail = await self.tail(stream)
            tail.users += 1
            try:
                found, changed = await self._gather(tail, pos, floor, cmd)
            finally:
                tail.users -= 1
            for stored in found:
                if chunks and (size >= cmd.max_bytes or records >= cmd.max_messages):
                    break
                chunks.append(stored)
                size += len(stored.body)
                records += stored.end - max(pos, stored.chunk_id)
                pos = stored.end
            # Nothing found is never "full": a read with max_messages=0 (the Kafka listener's
            # wait for data) must wait for data like any other, not return at once.
            full = bool(chunks) and (size >= cmd.max_bytes or records >= cmd.max_messages)
            if (chunks and size >= cmd.min_bytes) or full:
                break
            remaining = deadline - trio.current_time()
            if remaining <= 0:
                break
            began = trio.current_time()
            tail.waiters += 1  # wanted meanwhile: it must keep receiving chunks to wake us
            try:
                with trio.move_on_after(remaining):
                    await changed.wait()
            finally:
                tail.waiters -= 1
            waited += trio.current_time() - began
            entry, stream = await self._target(cmd.topic, cmd.partition)  # deleted meanwhile?
        batches = batches_of(chunks, cmd.offset, cmd.max_messages, whole=cmd.whole_batches)
        return ReadResult(
            batches=batches,
            high_watermark=max(tail.end, floor),
            log_start_offset=floor,
            waited_s=waited,
        )

    async def _gather(
        self, tail: Tail, pos: int, floor: int, cmd: Read
    ) -> tuple[list[Stored], trio.Event]:
        """The chunks from ``pos`` on (the tail's, else a short subscription's), and the event
        that fires when the tail has more."""
        end = tail.end
        if pos < floor or pos > end:
            raise OffsetOutOfRange(
                f"offset {pos} of {cmd.topic}/{cmd.partition} is outside {floor}..{end}",
                log_start=floor, log_end=end,
            )  # fmt: skip
        changed = tail.changed
        if pos == end:
            return [], changed
        found = tail.covering(pos)
        if found is not None:
            return found, changed
        found, first = await self._cursors(tail.conn).read(
            tail.stream, pos, max_bytes=cmd.max_bytes, max_records=cmd.max_messages, until=end
        )
        if first > pos:  # retention dropped it since the floor was set
            raise OffsetOutOfRange(
                f"offset {pos} of {tail.stream!r} is gone (the stream starts at {first})",
                log_start=first, log_end=end,
            )  # fmt: skip
        tail.keep_ahead(found)
        return found, changed

    # --- list_offsets -------------------------------------------------------------------------

    async def list_offsets(self, cmd: ListOffsets) -> ListOffsetsResult:
        entry, stream = await self._target(cmd.topic, cmd.partition)
        floor = entry.start(cmd.partition)
        if cmd.spec is OffsetSpec.LATEST:
            return ListOffsetsResult(offset=max((await self.tail(stream)).end, floor))
        conn = await self.sub_link.connection()
        if cmd.spec is OffsetSpec.EARLIEST:
            bounds = await self.sub_link.retry(lambda: fetch.probe(conn, stream))
            return ListOffsetsResult(offset=max(bounds.start, floor))
        if cmd.spec is OffsetSpec.TIMESTAMP:
            found = await self.sub_link.retry(
                lambda: fetch.find_timestamp(conn, stream, cmd.timestamp_us, start=floor)
            )
        else:
            found = await self.sub_link.retry(
                lambda: fetch.max_timestamp(conn, stream, start=floor)
            )
        if found is None:
            return ListOffsetsResult(offset=None)
        return ListOffsetsResult(offset=found[0], timestamp_us=found[1])

    # --- consumer offsets ----------------------------------------------------------------------

    async def commit_offset(self, cmd: CommitOffset) -> None:
        entry, stream = await self._target(cmd.topic, cmd.partition)
        if cmd.offset < 0:
            raise InvalidRequest(f"a committed offset must be >= 0, not {cmd.offset}")
        reference = _reference(cmd.group)
        stored = stored_of_committed(cmd.offset)
        if stored is not None:
            conn = await self.link.connection()
            conn.send_nowait(rs.StoreOffset(reference=reference, stream=stream, offset=stored))
            back = await self._query(stream, reference)
            if back != stored:
                raise Timeout(f"StoreOffset of {reference!r} on {stream!r} not read back")
        zero = cmd.offset == 0
        if (zero, cmd.metadata) != self.catalog.offset_meta(entry.uid, cmd.partition, cmd.group):
            await self.log.write({"op": "offset", "uid": entry.uid, "partition": cmd.partition,
                                  "group": cmd.group, "zero": zero,
                                  "metadata": cmd.metadata})  # fmt: skip
        if (entry.stream, cmd.group) not in self.catalog.groups:
            await self.log.write({"op": "group", "stream": entry.stream, "group": cmd.group})

    async def fetch_offset(self, cmd: FetchOffset) -> tuple[int | None, str]:
        entry, stream = await self._target(cmd.topic, cmd.partition)
        zero, metadata = self.catalog.offset_meta(entry.uid, cmd.partition, cmd.group)
        if zero:
            return 0, metadata
        stored = await self._query(stream, _reference(cmd.group))
        return (None if stored is None else committed_of_stored(stored)), metadata

    async def _query(self, stream: str, reference: str) -> int | None:
        async def once() -> rs.Frame:
            conn = await self.link.connection()
            return await conn.call(
                lambda c: rs.QueryOffset(correlation_id=c, reference=reference, stream=stream)
            )

        reply = await self.link.retry(once)
        check(reply, f"QueryOffset on {stream!r}", ResponseCode.NO_OFFSET)
        assert isinstance(reply, rs.QueryOffsetResponse)
        return None if reply.code == ResponseCode.NO_OFFSET else reply.offset


def _in_stored_form(cmd: Append, wire: WireBatch) -> Append:
    """The append of a client's Publish frame as stored entries (cut and checked one by one)."""
    return dataclasses.replace(cmd, batch=MessageBatch(wire=stored_of_published(wire)))


def _reference(group: str) -> str:
    if not group or len(group.encode()) > MAX_REFERENCE:
        raise InvalidRequest(f"a RabbitMQ offset reference is 1..{MAX_REFERENCE} bytes: {group!r}")
    return group


__all__ = ["Data", "partition_stream"]
