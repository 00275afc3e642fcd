"""Messages and consumer offsets on an Iggy server (iggy.md §5.7, §6).

Append is one SendMessages to the explicit partition; a batch that arrived in Iggy's own wire
form goes out as the same bytes (the fast path), anything else through ``to_iggy`` (several
SendMessages when its timestamps span more than one Iggy batch can hold, see ``_runs``). Its
base offset is the server's confirmation (§6.1), or, from a server that sends none, the
partition's next offset after the send minus the count: appends to a partition then go one at
a time, exact as long as only this gateway appends there.

Read is PollMessages by offset. Iggy has no long poll: ``max_wait_ms`` and ``min_bytes`` are
emulated by polling again with a short, growing pause until enough arrived or time is up. Iggy
has no byte limit on a poll either: the count asked for follows the partition's recent message
size, and a reply too large for the codec is asked again with a smaller count.

Offsets: a canonical group keeps its offsets in an Iggy single consumer
(``gateway.translate.iggy.messages.consumer_of``), which stores the LAST consumed offset: a
commit of NEXT offset n stores n - 1, and a commit of 0 ("nothing consumed") deletes the stored
one.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

import trio

from gateway.backends.iggy import admin
from gateway.backends.iggy.pool import Pool
from gateway.model import (
    Append,
    AppendResult,
    CommitOffset,
    DeleteOffset,
    FetchOffset,
    FetchOffsetResult,
    InvalidRequest,
    ListOffsets,
    ListOffsetsResult,
    Message,
    MessageBatch,
    MessageTooLarge,
    NotFound,
    OffsetOutOfRange,
    OffsetSpec,
    Read,
    ReadResult,
    Topic,
    UnknownPartition,
)
from gateway.translate.iggy.messages import (
    U32_MAX,
    WIRE_FORMAT,
    Lossy,
    consumer_of,
    from_polled,
    message_bytes,
    stored_offset,
    to_iggy,
)
from protocols import iggy as wire
from protocols.iggy.identifiers import (
    Consumer,
    ConsumerKind,
    PartitionId,
    PollingKind,
    PollingStrategy,
)

READER: Final = Consumer(kind=ConsumerKind.CONSUMER, id="streamgate")  # polls never auto-commit
FIRST_PAUSE_S: Final = 0.005
LAST_PAUSE_S: Final = 0.05
MAX_POLL_COUNT: Final = 10_000
SCAN_COUNT: Final = 1_000  # messages per poll when scanning a partition (max timestamp)
_GUESS_BYTES: Final = 64.0  # a partition's message size before any was read

PartitionKey = tuple[str, str, int]


@dataclass(slots=True)
class Data:
    """What the data commands share: the pool and what was learned about partitions."""

    pool: Pool
    max_message_bytes: int
    lossy: Lossy
    sizes: dict[PartitionKey, float] = field(default_factory=dict)  # mean message bytes
    log_starts: dict[PartitionKey, int] = field(default_factory=dict)
    # Set once the server answered a SendMessages without confirmations (servers before the
    # current framing's; §6.1 allows it): appends to a partition then go one at a time, so
    # that the next offset after each tells its base offset.
    unconfirmed: bool = False
    locks: dict[PartitionKey, trio.Lock] = field(default_factory=dict)

    def forget(self, stream: str, topic: str | None = None) -> None:
        """A stream or topic deleted, renamed or purged: what was learned about its partitions
        goes (kept, it would grow with every topic ever used)."""

        def gone(key: PartitionKey) -> bool:
            return key[0] == stream and topic in (None, key[1])

        for table in (self.sizes, self.log_starts):
            for key in list(filter(gone, table)):
                del table[key]
        for key in [k for k, lock in self.locks.items() if gone(k) and not lock.locked()]:
            del self.locks[key]

    async def call(self, topic: Topic, p: int, command: wire.Command, *, safe: bool) -> object:
        """``admin.request`` with a PartitionNotFound that says how many partitions there are."""
        if p < 0:
            raise await admin.with_partitions(self.pool, topic, p)
        try:
            return await admin.request(self.pool, command, safe=safe)
        except UnknownPartition:
            raise await admin.with_partitions(self.pool, topic, p) from None

    async def partition(self, topic: Topic, p: int) -> tuple[int, int]:
        """(log start, next offset) from the topic's details; remembers the log start."""
        info = await admin.partition(self.pool, topic, p)
        self.log_starts[(topic.stream, topic.name, p)] = info.log_start_offset
        return info.log_start_offset, info.next_offset


# --- append ---------------------------------------------------------------------------------------


async def append(d: Data, cmd: Append) -> AppendResult:
    if not len(cmd.batch):
        raise InvalidRequest("an append needs at least one message")
    if not d.unconfirmed:
        return await _append(d, cmd)
    key = (cmd.topic.stream, cmd.topic.name, cmd.partition)
    async with d.locks.setdefault(key, trio.Lock()):
        return await _append(d, cmd)


async def _append(d: Data, cmd: Append) -> AppendResult:
    batch, topic = cmd.batch, cmd.topic
    count = len(batch)
    now = time.time_ns() // 1000
    stored = batch.wire
    if stored is not None and stored.format == WIRE_FORMAT:
        sends = [_send(cmd, (), stored.data)]  # the fast path: the producer's batch as it came
    else:
        sends = [_send(cmd, run, b"") for run in _runs(_outgoing(d, batch.messages, now))]
    base = -1
    for send in sends:
        body = await d.call(topic, cmd.partition, send, safe=False)
        confirmed = body.confirmations if isinstance(body, wire.SendMessagesResponse) else ()
        if base < 0 and confirmed:
            base = confirmed[0].base_offset
    if base < 0:  # a server that confirms nothing
        d.unconfirmed = True
        base = (await d.partition(topic, cmd.partition))[1] - count
    key = (topic.stream, topic.name, cmd.partition)
    return AppendResult(
        base_offset=base,
        count=count,
        log_append_time_us=now,
        log_start_offset=d.log_starts.get(key, 0),
    )


def _send(cmd: Append, messages: Sequence[wire.Message], batch: bytes) -> wire.SendMessages:
    return wire.SendMessages(
        stream_id=cmd.topic.stream,
        topic_id=cmd.topic.name,
        partitioning=PartitionId(id=max(0, cmd.partition)),
        messages=tuple(messages),
        batch=batch,
    )


def _outgoing(d: Data, messages: Sequence[Message], now: int) -> list[wire.Message]:
    for m in messages:
        if not m.value:
            raise InvalidRequest("an iggy message needs a payload (EmptyMessagePayload, 4024)")
        if message_bytes(m) > d.max_message_bytes:
            raise MessageTooLarge(f"a message of {message_bytes(m)} bytes")
    # As the SDK does, a message without a timestamp gets the time it is sent at.
    stamped = [m if m.timestamp_us > 0 else m._replace(timestamp_us=now) for m in messages]
    return to_iggy(stamped, d.lossy)


def _runs(messages: list[wire.Message]) -> list[list[wire.Message]]:
    """Consecutive runs that fit one Iggy batch: a frame's timestamp delta from its batch's
    earliest origin timestamp is a u32 of µs (§6.1, about 71 minutes). Messages whose times
    span more go out as several batches, one SendMessages each: not atomic, and another
    producer's messages may land in between."""
    runs: list[list[wire.Message]] = []
    low = high = 0
    for m in messages:
        t = m.origin_timestamp
        if runs and max(high, t) - min(low, t) <= U32_MAX:
            runs[-1].append(m)
            low, high = min(low, t), max(high, t)
        else:
            runs.append([m])
            low = high = t
    return runs


# --- read -----------------------------------------------------------------------------------------


async def read(d: Data, cmd: Read) -> ReadResult:
    topic, p = cmd.topic, cmd.partition
    key = (topic.stream, topic.name, p)
    deadline = trio.current_time() + max(0, cmd.max_wait_ms) / 1000
    pause, waited, checked = FIRST_PAUSE_S, 0.0, False
    high = -1
    while True:
        kept, polled, polled_high = await _poll(d, cmd)
        if polled:
            high = polled_high
            if polled[0].offset > cmd.offset:  # the server started at its oldest message
                raise OffsetOutOfRange(
                    f"offset {cmd.offset} is below the log start {polled[0].offset}",
                    log_start=polled[0].offset,
                    log_end=high,
                )
        elif not checked:
            log_start, high = await d.partition(topic, p)
            if not log_start <= cmd.offset <= high:
                raise OffsetOutOfRange(
                    f"offset {cmd.offset} is outside {log_start}..{high}",
                    log_start=log_start,
                    log_end=high,
                )
            checked = True
            if cmd.offset < high:
                continue  # messages came between the poll and the check
        # What is there counts, not what the limits let through: a read with max_messages=0
        # (the Kafka listener's wait for data) ends as soon as there is data.
        size = sum(message_bytes(m) for m in polled)
        now = trio.current_time()
        if (size >= cmd.min_bytes if polled else cmd.min_bytes <= 0) or now >= deadline:
            start = min(d.log_starts.get(key, 0), polled[0].offset if polled else cmd.offset)
            return ReadResult(
                batches=(MessageBatch(kept),) if kept else (),
                high_watermark=max(high, 0),
                log_start_offset=start,
                waited_s=waited,
            )
        step = min(pause, deadline - now)
        await trio.sleep(step)
        waited += step
        pause = min(pause * 2, LAST_PAUSE_S)


async def _poll(d: Data, cmd: Read) -> tuple[list[Message], list[Message], int]:
    """(the messages from ``cmd.offset`` within its limits, at least one unless max_messages is
    0; every message the poll brought from ``cmd.offset`` on; the high watermark)."""
    key = (cmd.topic.stream, cmd.topic.name, cmd.partition)
    mean = d.sizes.get(key, _GUESS_BYTES)
    count = int(max(1, min(cmd.max_messages, cmd.max_bytes // max(1.0, mean), MAX_POLL_COUNT)))
    while True:
        try:
            polled = await _poll_messages(d, cmd.topic, cmd.partition, cmd.offset, count)
            break
        except MessageTooLarge:
            if count == 1:
                raise
            count = max(1, count // 8)
    got = [m for m in from_polled(polled.messages) if m.offset >= cmd.offset]
    if got:
        d.sizes[key] = sum(message_bytes(m) for m in got) / len(got)
    kept: list[Message] = []
    size = 0
    for m in got[: cmd.max_messages]:
        size += message_bytes(m)
        if kept and size > cmd.max_bytes:
            break
        kept.append(m)
    return kept, got, polled.current_offset + 1


async def _poll_messages(
    d: Data, topic: Topic, p: int, value: int, count: int, kind: PollingKind = PollingKind.OFFSET
) -> wire.PolledMessages:
    poll = wire.PollMessages(
        consumer=READER,
        stream_id=topic.stream,
        topic_id=topic.name,
        partition_id=max(0, p),
        strategy=PollingStrategy(kind=kind, value=value),
        count=count,
        auto_commit=False,
    )
    return admin.expect(await d.call(topic, p, poll, safe=True), wire.PolledMessages)


# --- offsets --------------------------------------------------------------------------------------


async def list_offsets(d: Data, cmd: ListOffsets) -> ListOffsetsResult:
    topic, p = cmd.topic, cmd.partition
    if cmd.spec is OffsetSpec.TIMESTAMP:
        # Iggy polls by timestamp (§6.2; a real server compares its append time, a chained
        # streamgate the message's own).
        polled = await _poll_messages(
            d, topic, p, max(0, cmd.timestamp_us), 1, PollingKind.TIMESTAMP
        )
        found = from_polled(polled.messages[:1])
        if not found:
            return ListOffsetsResult(offset=None)
        return ListOffsetsResult(offset=found[0].offset, timestamp_us=found[0].timestamp_us)
    log_start, end = await d.partition(topic, p)
    if cmd.spec is OffsetSpec.EARLIEST:
        return ListOffsetsResult(offset=log_start)
    if cmd.spec is OffsetSpec.LATEST:
        return ListOffsetsResult(offset=end)
    return await _max_timestamp(d, topic, p, log_start, end)


async def _max_timestamp(d: Data, topic: Topic, p: int, start: int, end: int) -> ListOffsetsResult:
    """Iggy keeps no such index: a scan of the partition (the first of equal maxima wins)."""
    best: Message | None = None
    offset = start
    while offset < end:
        polled = await _poll_messages(d, topic, p, offset, SCAN_COUNT)
        got = [m for m in from_polled(polled.messages) if m.offset >= offset]
        if not got:
            break
        for m in got:
            if best is None or m.timestamp_us > best.timestamp_us:
                best = m
        offset = got[-1].offset + 1
    if best is None:
        return ListOffsetsResult(offset=None)
    return ListOffsetsResult(offset=best.offset, timestamp_us=best.timestamp_us)


async def commit_offset(d: Data, cmd: CommitOffset) -> None:
    if cmd.offset < 0:
        raise InvalidRequest(f"a committed offset must be >= 0, not {cmd.offset}")
    last = stored_offset(cmd.offset)
    if last is None:  # nothing consumed: Iggy has no stored offset for that
        delete = DeleteOffset(group=cmd.group, topic=cmd.topic, partition=cmd.partition)
        await delete_offset(d, delete)
        return
    store = wire.StoreConsumerOffset(
        consumer=consumer_of(cmd.group),
        stream_id=cmd.topic.stream,
        topic_id=cmd.topic.name,
        partition_id=max(0, cmd.partition),
        offset=last,
    )
    await d.call(cmd.topic, cmd.partition, store, safe=False)


async def fetch_offset(d: Data, cmd: FetchOffset) -> FetchOffsetResult:
    get = wire.GetConsumerOffset(
        consumer=consumer_of(cmd.group),
        stream_id=cmd.topic.stream,
        topic_id=cmd.topic.name,
        partition_id=max(0, cmd.partition),
    )
    body = await d.call(cmd.topic, cmd.partition, get, safe=True)
    if body is None:
        return FetchOffsetResult(offset=None)  # §5.7: nothing stored
    return FetchOffsetResult(offset=admin.expect(body, wire.ConsumerOffsetInfo).stored_offset + 1)


async def delete_offset(d: Data, cmd: DeleteOffset) -> None:
    delete = wire.DeleteConsumerOffset(
        consumer=consumer_of(cmd.group),
        stream_id=cmd.topic.stream,
        topic_id=cmd.topic.name,
        partition_id=max(0, cmd.partition),
    )
    try:
        await d.call(cmd.topic, cmd.partition, delete, safe=False)
    except NotFound as exc:
        if type(exc) is not NotFound:
            raise  # the stream or topic is missing
        # ConsumerOffsetNotFound: nothing was stored, which is what was asked for.


__all__ = [
    "Data",
    "append",
    "commit_offset",
    "delete_offset",
    "fetch_offset",
    "list_offsets",
    "read",
]
