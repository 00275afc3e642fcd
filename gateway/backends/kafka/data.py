"""The Kafka backend's data path: append -> Produce, read -> Fetch, list_offsets -> ListOffsets.

Append: a batch already in the ``kafka`` wire format is sent as the same RecordBatch bytes,
records never decoded (the fast path), idempotent-producer fields included: the broker granted
that producer id (``KafkaBackend.init_producer``) and deduplicates by it, and answers a retry
DUPLICATE_SEQUENCE_NUMBER, which is a duplicate append here. Any other batch is encoded from
its canonical messages (``encode_append``, lossless through ``streamgate.*`` headers). Acks:
leader -> 1, all -> -1, and none -> 1 as well: a client that wants no answer still gets nothing
acknowledged that the broker has not taken. A transactional append (``Append.transactional_id``)
goes with its transactional id, and the broker checks it against its open transaction.

Read: whole stored batches (``Read.whole_batches``), else trimmed to ``offset`` and
``max_messages`` (only edge batches are decoded). A long poll is Kafka's own, in slices of at
most ``long_poll_slice_s``: some brokers only look again after half of max_wait (Tansu answers a
30 s Fetch 15 s after the data came, kafka.md §5). Appends and deletes made through this backend
wake its long polls at once. The whole long poll, round trips included, ends at max_wait.
Around transactions the broker's isolation level is read_uncommitted for
``Isolation.UNCOMMITTED`` only: the others stop at its last stable offset, and what is kept of
the batches (markers, aborted transactions) is ``kafka_isolation``'s.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Final

import trio
from kio.schema.errors import ErrorCode

from gateway.backends.kafka.cluster import LIST_OFFSETS, PRODUCE, Cluster
from gateway.backends.kafka.fetch import (
    EARLIEST,
    MAX_TIMESTAMP,
    NOW_MS,
    Fetched,
    Fetcher,
    wire_batch,
)
from gateway.backends.kafka.isolation import committed_only, with_aborted
from gateway.model import (
    Acks,
    Append,
    AppendResult,
    CorruptMessage,
    InvalidRequest,
    Isolation,
    ListOffsets,
    ListOffsetsResult,
    MessageBatch,
    MessageTooLarge,
    OffsetSpec,
    Read,
    ReadResult,
    UnknownPartition,
    UnknownTopic,
    Unsupported,
    WireBatch,
)
from gateway.translate.kafka.messages import WIRE_FORMAT, decode_wire, encode_append
from gateway.translate.kafka.messages import record_size as message_size
from protocols._wire import RemoteProtocolError
from protocols.kafka import parse_header, set_producer

_ACKS: Final = {Acks.NONE: 1, Acks.LEADER: 1, Acks.ALL: -1}
_SCAN_FETCH_BYTES: Final = 1 << 20
_SKIP_ROUNDS: Final = 64  # fetches a CLEAN read makes past markers and aborted batches, at most


def _level(cmd: Read | ListOffsets) -> int:
    """The broker's isolation level: 1 (read_committed) unless everything is wanted."""
    return 0 if cmd.isolation is Isolation.UNCOMMITTED else 1


class Wakeups:
    """One event per partition that a long poll on it waits for, and the events of waits over
    many partitions (``watch``); appends and deletes set them."""

    def __init__(self) -> None:
        self._events: dict[tuple[str, int], trio.Event] = {}
        self._watchers: dict[tuple[str, int], set[trio.Event]] = {}

    def event(self, topic: str, partition: int) -> trio.Event:
        return self._events.setdefault((topic, partition), trio.Event())

    def watch(self, keys: list[tuple[str, int]], event: trio.Event) -> None:
        for key in keys:
            self._watchers.setdefault(key, set()).add(event)

    def unwatch(self, keys: list[tuple[str, int]], event: trio.Event) -> None:
        for key in keys:
            watchers = self._watchers.get(key)
            if watchers is not None:
                watchers.discard(event)
                if not watchers:
                    del self._watchers[key]

    def notify(self, topic: str, partition: int | None = None) -> None:
        keys = [k for k in self._events if k[0] == topic and partition in (None, k[1])]
        for key in keys:
            self._events.pop(key).set()
        if partition is not None:
            for event in self._watchers.get((topic, partition), ()):
                event.set()
        else:
            for key, events in self._watchers.items():
                if key[0] == topic:
                    for event in events:
                        event.set()


class DataPath:
    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.fetcher = Fetcher(cluster, tansu=cluster.options.tansu)
        self.wakeups = Wakeups()
        self.long_poll_slice_s = cluster.options.long_poll_slice_s
        # Tansu's ListOffsets by time answers the earliest offset (kafka.md §5): scan instead.
        self.scan_timestamps = cluster.options.tansu

    # --- append ---------------------------------------------------------------------------------

    async def append(self, name: str, cmd: Append) -> AppendResult:
        meta, leader = await self.cluster.partition(name, cmd.partition)
        limit = meta.config.max_message_bytes
        wire = cmd.batch.wire
        if wire is not None and wire.format == WIRE_FORMAT:
            data = wire.data
            try:
                header = parse_header(data)
            except RemoteProtocolError as exc:
                raise CorruptMessage(str(exc)) from None
            count = header.records_count
            if limit is not None and len(data) > limit:  # Kafka's limit is per batch
                raise MessageTooLarge(f"a {len(data)}-byte batch, max.message.bytes is {limit}")
        else:
            messages = cmd.batch.messages
            count = len(messages)
            if limit is not None and any(message_size(m) > limit for m in messages):
                raise MessageTooLarge(f"a message larger than max.message.bytes ({limit})")
            data = encode_append(messages, now_us=time.time_ns() // 1000) if messages else b""
            if data and cmd.producer_id >= 0:
                data = set_producer(data, cmd.producer_id, cmd.producer_epoch, cmd.base_sequence)
            if cmd.transactional_id is not None:
                raise InvalidRequest("a transactional append needs a Kafka transactional batch")
        if count <= 0:
            raise InvalidRequest("an append needs at least one message")
        answer = await self.cluster.request(
            PRODUCE,
            {"transactional_id": cmd.transactional_id, "acks": _ACKS[cmd.acks],
             "timeout": int(self.cluster.options.request_timeout_s * 1000),
             "topic_data": [{"name": name,
                             "partition_data": [{"index": cmd.partition, "records": data}]}]},
            node=leader,
        )  # fmt: skip
        part = answer.responses[0].partition_responses[0]
        if part.error_code is ErrorCode.duplicate_sequence_number and cmd.producer_id >= 0:
            # The broker stored this producer's batch before (a retry, maybe through another
            # gateway): nothing new stored; Kafka does not say where the original landed.
            return AppendResult(base_offset=-1, count=count, log_append_time_us=-1, duplicate=True)
        self.fetcher.check(name, part.error_code, getattr(part, "error_message", None))
        self.wakeups.notify(name, cmd.partition)
        appended_at = part.log_append_time
        return AppendResult(
            base_offset=part.base_offset,
            count=count,
            log_append_time_us=-1 if appended_at is None else int(appended_at.timestamp() * 1e6),
            log_start_offset=max(getattr(part, "log_start_offset", 0), 0),
        )

    # --- read -----------------------------------------------------------------------------------

    async def read(self, name: str, cmd: Read) -> ReadResult:
        start = trio.current_time()
        result, past = await self._read_once(name, cmd)
        for _ in range(_SKIP_ROUNDS):
            # A CLEAN read keeps no marker and no aborted batch: when that was all it fetched,
            # it reads on from past them (within its max_wait), so that a reader who moves on by
            # what it got is not left in front of them for ever.
            if (
                result.batches
                or cmd.isolation is not Isolation.CLEAN
                or cmd.max_messages <= 0  # a wait for data, not a read of it
                or past <= cmd.offset
            ):
                break
            left_ms = cmd.max_wait_ms - int((trio.current_time() - start) * 1000)
            cmd = replace(cmd, offset=past, max_wait_ms=max(0, left_ms))
            waited = result.waited_s
            result, past = await self._read_once(name, cmd)
            result = replace(result, waited_s=result.waited_s + waited)
        return result

    async def _read_once(self, name: str, cmd: Read) -> tuple[ReadResult, int]:
        if cmd.max_wait_ms <= 0:
            _, leader = await self.cluster.partition(name, cmd.partition)
            fetched = await self._now(name, cmd, leader)
            return self._result(cmd, await self._settled(name, cmd, leader, fetched), 0.0)
        start = trio.current_time()
        waited = False
        # What is there now comes back however long it takes to fetch (a large Fetch may
        # outlast a short max_wait: cancelled, the data would be answered as "nothing new").
        _, leader = await self.cluster.partition(name, cmd.partition)
        fetched = await self._now(name, cmd, leader)
        # The waiting for more, round trips included, ends at max_wait (with what the last
        # complete fetch brought). 1 µs over: measured back as ``now - start``, the float sum
        # must not come out short.
        with trio.move_on_at(start + cmd.max_wait_ms / 1000 + 1e-6):
            while not self._enough(cmd, fetched):
                waited = True
                answer = await self._wait(name, cmd, leader)
                # A wakeup may be the topic's deletion: look it up again before reading.
                _, leader = await self.cluster.partition(name, cmd.partition)
                fetched = answer or await self._now(name, cmd, leader)
        waited_s = trio.current_time() - start if waited else 0.0
        return self._result(cmd, await self._settled(name, cmd, leader, fetched), waited_s)

    async def _settled(self, name: str, cmd: Read, leader: int, fetched: Fetched) -> Fetched:
        """A read_committed fetch with its aborted transactions: Tansu lists none, so they
        come from its markers (``isolation.with_aborted``)."""
        if not (self.fetcher.tansu and _level(cmd) and fetched.batches and not fetched.aborted):
            return fetched
        return await with_aborted(self.fetcher, name, cmd.partition, leader, fetched)

    @staticmethod
    def _enough(cmd: Read, fetched: Fetched) -> bool:
        end = fetched.high_watermark if _level(cmd) == 0 else fetched.stable
        if cmd.max_messages <= 0:  # a wait for data at or past the offset, none wanted
            return end > cmd.offset
        return fetched.bytes_after(cmd.offset) >= max(cmd.min_bytes, 1)

    async def _wait(self, name: str, cmd: Read, leader: int) -> Fetched | None:
        """One slice of the long poll: the broker's Fetch on a leased connection, or None if a
        wakeup from this backend came first."""
        woken = self.wakeups.event(name, cmd.partition)
        result: Fetched | None = None
        pool = await self.cluster.node(leader)
        async with trio.open_nursery() as nursery:

            async def on_wakeup() -> None:
                await woken.wait()
                nursery.cancel_scope.cancel()

            nursery.start_soon(on_wakeup)
            async with pool.lease() as conn:
                slice_ms = max(NOW_MS, int(self.long_poll_slice_s * 1000))
                result = await self.fetcher.fetch(
                    name, cmd.partition, cmd.offset, leader, conn=conn, max_wait_ms=slice_ms,
                    min_bytes=cmd.min_bytes, max_bytes=cmd.max_bytes, isolation_level=_level(cmd),
                )  # fmt: skip
            nursery.cancel_scope.cancel()
        return result

    async def await_data(self, targets: list[tuple[str, int, int]], max_wait_ms: int) -> float:
        """Wait until any (topic, partition, offset) has news (a message at or past the offset,
        an offset out of range, an error), at most ``max_wait_ms``: one Fetch per leader for all
        its partitions, in slices as ``read``'s long poll; an append or delete through this
        backend ends it at once. Returns the time waited (0: news at once)."""
        start = trio.current_time()
        keys = [(name, partition) for name, partition, _ in targets]
        woken = trio.Event()
        self.wakeups.watch(keys, woken)
        slice_ms = max(NOW_MS, int(self.long_poll_slice_s * 1000))
        try:
            if await self._news(targets, woken, NOW_MS):
                return 0.0
            with trio.move_on_at(start + max_wait_ms / 1000 + 1e-6):
                while not await self._news(targets, woken, slice_ms):
                    pass
        except (UnknownTopic, UnknownPartition):
            pass  # news as well: the read that follows reports it
        finally:
            self.wakeups.unwatch(keys, woken)
        return trio.current_time() - start

    async def _news(
        self, targets: list[tuple[str, int, int]], woken: trio.Event, wait_ms: int
    ) -> bool:
        """One slice: whether any target has news (False: ``wait_ms`` ran out without any)."""
        if woken.is_set():
            return True
        by_leader: dict[int, list[tuple[str, int, int]]] = {}
        for name, partition, offset in targets:
            _, leader = await self.cluster.partition(name, partition)
            by_leader.setdefault(leader, []).append((name, partition, offset))
        news = False

        async def one(leader: int, wanted: list[tuple[str, int, int]]) -> None:
            nonlocal news
            pool = await self.cluster.node(leader)
            async with pool.lease() as conn:
                answer = await self.fetcher.fetch_many(
                    leader, wanted, conn=conn, max_wait_ms=wait_ms
                )
            offsets = {(name, partition): offset for name, partition, offset in wanted}
            for key, part in answer.items():
                if part.error_code is not ErrorCode.none or part.high_watermark != offsets[key]:
                    news = True
            if news:
                nursery.cancel_scope.cancel()

        async def on_wakeup() -> None:
            nonlocal news
            await woken.wait()
            news = True
            nursery.cancel_scope.cancel()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(on_wakeup)
            async with trio.open_nursery() as fetches:
                for leader, wanted in by_leader.items():
                    fetches.start_soon(one, leader, wanted)
            nursery.cancel_scope.cancel()
        return news

    async def _now(self, name: str, cmd: Read, leader: int) -> Fetched:
        return await self.fetcher.fetch(
            name, cmd.partition, cmd.offset, leader, max_bytes=cmd.max_bytes,
            isolation_level=_level(cmd),
        )  # fmt: skip

    def _result(self, cmd: Read, fetched: Fetched, waited_s: float) -> tuple[ReadResult, int]:
        """The result, and the offset after every batch it looked at (kept or not)."""
        past = max(
            (h.last_offset + 1 for h, _ in fetched.batches if h.base_offset < fetched.stable),
            default=cmd.offset,
        )
        out: list[MessageBatch] = []
        taken = size = 0
        batches = fetched.after(cmd.offset, control=True)
        if _level(cmd):  # below the last stable offset only, whatever the broker sent
            batches = ((h, v) for h, v in batches if h.base_offset < fetched.stable)
        if cmd.isolation is Isolation.CLEAN:  # needs the markers to filter
            batches = committed_only(batches, fetched.aborted)
        elif not cmd.whole_batches:  # markers only go to Kafka clients, as they are stored
            batches = ((h, v) for h, v in batches if not h.is_control)
        last = -1
        for header, view in batches:
            if taken >= cmd.max_messages or (out and size + len(view) > cmd.max_bytes):
                break
            wanted = cmd.max_messages - taken
            wire = wire_batch(header, view)
            if cmd.whole_batches or (
                header.base_offset >= cmd.offset and header.records_count <= wanted
            ):
                out.append(MessageBatch(wire=wire))
                taken += header.last_offset - max(header.base_offset, cmd.offset) + 1
            else:
                kept = [m for m in decode_wire(wire) if m.offset >= cmd.offset][:wanted]
                out.append(MessageBatch(kept))
                taken += len(kept)
            size += len(view)
            last = header.last_offset
        aborted: tuple[tuple[int, int], ...] = ()
        if cmd.isolation is Isolation.COMMITTED:
            aborted = tuple(a for a in fetched.aborted if a[1] <= last)
        result = ReadResult(
            batches=tuple(out),
            high_watermark=fetched.high_watermark,
            log_start_offset=fetched.log_start_offset,
            waited_s=waited_s,
            last_stable_offset=fetched.last_stable_offset,
            aborted=aborted,
        )
        return result, past

    # --- offsets ---------------------------------------------------------------------------------

    async def list_offsets(self, name: str, cmd: ListOffsets) -> ListOffsetsResult:
        _, leader = await self.cluster.partition(name, cmd.partition)
        spec = cmd.spec
        wanted = [(name, cmd.partition, leader)]
        if spec is OffsetSpec.EARLIEST:
            earliest = await self.fetcher.offsets(wanted, EARLIEST)
            return ListOffsetsResult(offset=earliest[name, cmd.partition].offset)
        if spec is OffsetSpec.LATEST:
            latest = await self.fetcher.latest(wanted, _level(cmd))
            return ListOffsetsResult(offset=latest[name, cmd.partition])
        if self.scan_timestamps:
            return await self._scan(name, cmd, leader)
        if spec is OffsetSpec.MAX_TIMESTAMP:
            if self.cluster.version(LIST_OFFSETS) < 7:
                raise Unsupported("the broker has no max-timestamp lookup (ListOffsets v7)")
            ts = MAX_TIMESTAMP
        else:
            ts = -(-cmd.timestamp_us // 1000)  # the first millisecond at or after it
        part = (await self.fetcher.offsets(wanted, ts))[name, cmd.partition]
        if part.offset < 0:
            return ListOffsetsResult(offset=None)
        return ListOffsetsResult(offset=part.offset, timestamp_us=part.timestamp * 1000)

    async def _scan(self, name: str, cmd: ListOffsets, leader: int) -> ListOffsetsResult:
        """Timestamp lookups by reading the batch headers (for brokers whose ListOffsets by time
        is wrong, kafka.md §5); only the batch holding the answer is decoded."""
        target = cmd.timestamp_us
        best: tuple[int, WireBatch] | None = None
        offset, hw = await self.fetcher.bound(name, cmd.partition, leader)
        while offset < hw:
            fetched = await self.fetcher.fetch(
                name, cmd.partition, offset, leader, max_bytes=_SCAN_FETCH_BYTES
            )
            batches = list(fetched.after(offset))
            if not batches:
                break
            for header, view in batches:
                if cmd.spec is OffsetSpec.MAX_TIMESTAMP:
                    if best is None or header.max_timestamp > best[0]:
                        best = (header.max_timestamp, wire_batch(header, view))
                elif header.max_timestamp * 1000 + 999 >= target:
                    for m in decode_wire(wire_batch(header, view)):
                        if m.offset >= offset and m.timestamp_us >= target:
                            return ListOffsetsResult(offset=m.offset, timestamp_us=m.timestamp_us)
            offset = batches[-1][0].last_offset + 1
        if best is None:
            return ListOffsetsResult(offset=None)
        top = max(decode_wire(best[1]), key=lambda m: m.timestamp_us)  # the first of the largest
        return ListOffsetsResult(offset=top.offset, timestamp_us=top.timestamp_us)


__all__ = ["DataPath", "Wakeups"]
