"""``streamgate consume``: print a topic's messages (one partition or all of them), from the
earliest, the latest, an offset, or a group's committed position; stop at the end (as it was
when the command started), after ``--count``, or never with ``--follow``. With ``--group`` the
position is committed (the NEXT offset to read, DESIGN.md §3) after each printed batch: what was
printed is what was committed, so a stopped consumer goes on where it stopped (at least once)."""

from __future__ import annotations

import argparse
import functools
import sys
from typing import BinaryIO, Final

import trio

from gateway.backends.base import Backend
from gateway.model import (
    CommitOffset,
    FetchOffset,
    ListOffsets,
    Message,
    OffsetOutOfRange,
    OffsetSpec,
    Read,
    Topic,
)

from .background import background
from .commands import Start
from .progress import Progress, showing, wanted
from .render import render
from .session import ClientError
from .topics import check_partition, topic_info

FOLLOW_WAIT_MS: Final = 1000  # long-poll of one read while following
RETRY_WAIT_MS: Final = 100  # long-poll of one read below the end
GIVE_UP_S: Final = 2.0  # nothing below the end for this long: the partition is done
_IDLE_S: Final = 0.1  # pause after an empty read the backend answered at once
Batch = tuple[int, list[Message]]  # partition, its next messages


async def _offset(backend: Backend, topic: Topic, partition: int, spec: OffsetSpec) -> int:
    found = (await backend.list_offsets(ListOffsets(topic=topic, partition=partition,
                                                    spec=spec))).offset  # fmt: skip
    return 0 if found is None else found


async def first_offset(
    backend: Backend, topic: Topic, partition: int, start: Start | None, group: str | None
) -> int:
    """Where reading ``partition`` begins: ``start`` when given; else the group's committed
    offset, when there is one; else the earliest."""
    if start is None and group is not None:
        committed = await backend.fetch_offset(
            FetchOffset(group=group, topic=topic, partition=partition)
        )
        if committed.offset is not None:
            return committed.offset
    if start is None or start == "earliest":
        return await _offset(backend, topic, partition, OffsetSpec.EARLIEST)
    if start == "latest":
        return await _offset(backend, topic, partition, OffsetSpec.LATEST)
    assert isinstance(start, int)
    if start >= 0:
        return start
    end = await _offset(backend, topic, partition, OffsetSpec.LATEST)
    return max(end + start, await _offset(backend, topic, partition, OffsetSpec.EARLIEST))


async def read_partition(
    backend: Backend,
    topic: Topic,
    partition: int,
    offset: int,
    *,
    end: int | None,
    send: trio.MemorySendChannel[Batch],
) -> None:
    """Send ``partition``'s messages from ``offset`` on, until offset ``end`` (the end as it was
    when the command started; None: follow forever).

    An empty read below ``end`` is asked again: a remote backend may not have the newest
    messages at hand yet. When nothing comes for ``GIVE_UP_S`` the rest is taken as offsets
    without messages (a Kafka transaction marker holds one) and the partition is done."""
    quiet_since: float | None = None
    async with send:
        while end is None or offset < end:
            asked = trio.current_time()
            wait_ms = FOLLOW_WAIT_MS if end is None else RETRY_WAIT_MS
            read = Read(topic=topic, partition=partition, offset=offset, max_wait_ms=wait_ms)
            try:
                result = await backend.read(read)
            except OffsetOutOfRange as exc:
                if offset < exc.log_start:  # retention removed them meanwhile: go on from there
                    offset = exc.log_start
                    continue
                raise
            got = [m for b in result.batches for m in b.messages if m.offset >= offset]
            if got:
                quiet_since = None
                await send.send((partition, got))
                offset = got[-1].offset + 1
                continue
            now = trio.current_time()
            if end is not None:
                quiet_since = now if quiet_since is None else quiet_since
                if now - quiet_since >= GIVE_UP_S:
                    return
            if now - asked < _IDLE_S / 2:
                await trio.sleep(_IDLE_S)  # a backend that answers empty at once: no busy loop


async def consume(backend: Backend, args: argparse.Namespace) -> int:
    topic = Topic(args.stream, args.topic)
    info = await topic_info(backend, topic)
    if args.partition is None:
        partitions = list(range(info.partition_count))
    else:
        check_partition(info, args.partition)
        partitions = [args.partition]
    if args.count is not None and args.count < 1:
        raise ClientError(f"--count must be at least 1, not {args.count}")
    starts = [await first_offset(backend, topic, p, args.start, args.group) for p in partitions]
    ends: list[int | None] = [
        None if args.follow else await _offset(backend, topic, p, OffsetSpec.LATEST)
        for p in partitions
    ]
    out: BinaryIO = sys.stdout.buffer
    left = args.count
    progress = Progress("consumed", enabled=wanted(args.progress))
    send, receive = trio.open_memory_channel[Batch](2 * len(partitions))
    # ``receive`` outlives the readers: on --count they are cancelled first, then it closes
    # (closed first, it would break a reader's send with BrokenResourceError).
    async with receive, background() as nursery, showing(progress):
        async with send:  # each reader holds a clone: the loop ends when the last one returns
            for p, offset, end in zip(partitions, starts, ends, strict=True):
                reader = functools.partial(read_partition, backend, topic, p, offset, end=end,
                                           send=send.clone())  # fmt: skip
                nursery.start_soon(reader)
        async for partition, messages in receive:
            if left is not None:
                messages = messages[:left]
            out.write(render(args.format, topic.name, partition, messages))
            out.flush()
            progress.add(len(messages), sum(len(m.value) for m in messages))
            if args.group is not None:
                await backend.commit_offset(
                    CommitOffset(group=args.group, topic=topic, partition=partition,
                                 offset=messages[-1].offset + 1)
                )  # fmt: skip
            if left is not None:
                left -= len(messages)
                if left == 0:
                    break
    return 0
