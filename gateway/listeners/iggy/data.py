"""Iggy messages and consumer offsets (iggy.md §5.6, §5.7, §6; classic §9).

SendMessages is appended as one canonical batch and confirmed only after the backend stored it.
PollMessages reads from where the polling strategy says (offset, timestamp, first, last, next)
and, with auto-commit, stores the last returned offset. Iggy keeps the LAST consumed offset per
consumer, the canonical store the NEXT one to read; ``tr.stored_offset`` converts.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from xxhash import xxh32_intdigest

from gateway.listeners.iggy.catalog import ResolvedTopic
from gateway.listeners.iggy.group_store import GroupView
from gateway.listeners.iggy.session import CommandHandler, Session, handles
from gateway.model import (
    Append,
    CommitOffset,
    DeleteOffset,
    FetchOffset,
    InvalidRequest,
    ListOffsets,
    MessageBatch,
    NotFound,
    OffsetOutOfRange,
    OffsetSpec,
    Read,
    ReadResult,
    Topic,
    UnknownPartition,
)
from gateway.translate.iggy import requests as tr
from gateway.translate.iggy.requests import IggyStatus
from protocols import iggy as wire
from protocols.iggy import Command
from protocols.iggy import frames_groups as fg
from protocols.iggy import frames_messages as fm
from protocols.iggy.batch import encode_polled
from protocols.iggy.identifiers import (
    Balanced,
    Consumer,
    ConsumerKind,
    MessagesKey,
    PartitionId,
    PollingKind,
)
from protocols.iggy.status import Status

_balanced = itertools.count()


async def _topic(s: Session, stream: Any, topic: Any) -> ResolvedTopic:
    return await s.catalog.topic(stream, topic, s.ctx)


def _partition(s: Session, partition: int | None, found: ResolvedTopic) -> int:
    """A wire partition id (None = 0, §4) -> the canonical partition, range-checked."""
    p = 0 if partition is None else partition - s.partition_shift
    if not 0 <= p < found.topic.partition_count:
        raise UnknownPartition(
            f"partition {partition} does not exist in {found.name}",
            partitions=found.topic.partition_count,
        )
    return p


async def send_messages(s: Session, cmd: fm.SendMessages) -> fm.SendMessagesResponse | None:
    found = await _topic(s, cmd.stream_id, cmd.topic_id)
    s.require("send_messages", found.stream.id, found.topic.id)
    if not cmd.messages:
        raise IggyStatus(Status.INVALID_MESSAGES_COUNT, "no messages to send")
    if tr.empty_payload(cmd.messages):
        raise IggyStatus(Status.EMPTY_MESSAGE_PAYLOAD, "a message has an empty payload")
    n = found.topic.partition_count
    key = None
    p = cmd.partitioning
    if isinstance(p, PartitionId):
        partition = _partition(s, p.id, found)
    elif isinstance(p, MessagesKey):
        # What the client does itself in the current framing (§2), done here for older ones.
        key = p.key
        partition = xxh32_intdigest(p.key) % n
    else:
        assert isinstance(p, Balanced)
        partition = next(_balanced) % n
    stored = tr.wire_batch(cmd)
    batch = (
        MessageBatch(wire=stored)
        if stored is not None
        else MessageBatch(tr.to_canonical(cmd.messages, key=key, assign_ids=s.legacy))
    )
    try:
        result = await s.router.execute(
            Append(topic=found.name, partition=partition, batch=batch), s.ctx
        )
    except NotFound:
        s.catalog.invalidate()
        raise
    if s.legacy:
        return None  # the classic reply is empty (§9.2)
    return fm.SendMessagesResponse(
        confirmations=(
            fm.SendMessagesConfirmation(
                stream_id=found.stream.id,
                topic_id=found.topic.id,
                partition_id=partition,
                base_offset=result.base_offset,
            ),
        )
    )


# --- consumers ------------------------------------------------------------------------------------


def _group_name(s: Session, consumer: Consumer, found: ResolvedTopic) -> str:
    if consumer.kind == ConsumerKind.CONSUMER_GROUP:
        return s.groups.get(found.name.stream, found.name.name, consumer.id).name
    return tr.consumer_group_name(consumer.id)


def _group_partition(
    s: Session, group: GroupView | None, partition: int | None, found: ResolvedTopic
) -> int | None:
    """The partition a consumer's request is about. A group member names one it owns (the
    current framing syncs its assignment first); a classic group poll leaves it to the server,
    which hands the member's partitions out in turn (None: the member has none)."""
    if group is None:
        return _partition(s, partition, found)
    if group.partitions != found.topic.partition_count:
        s.groups.resize(found.name.stream, found.name.name, found.topic.partition_count)
    if partition is None:
        return group.next_partition(s.client.client_id)
    p = _partition(s, partition, found)
    if group.is_member(s.client.client_id) and p not in group.partitions_of(s.client.client_id):
        raise IggyStatus(
            Status.CONSUMER_GROUP_PARTITION_NOT_OWNED,
            f"partition {partition} is not assigned to client {s.client.client_id}",
        )
    return p


async def poll_messages(s: Session, cmd: fm.PollMessages) -> fm.PolledMessages:
    found = await _topic(s, cmd.stream_id, cmd.topic_id)
    s.require("poll_messages", found.stream.id, found.topic.id)
    if cmd.consumer.kind != ConsumerKind.CONSUMER_GROUP:
        return await _poll(s, cmd, found, None)
    await s.groups.settled()
    view = s.groups.get(found.name.stream, found.name.name, cmd.consumer.id)
    # Held from choosing the partition to the commit: a rebalance hands the partition on only
    # after this poll ended, and the commit names the member's generation (a stale one fails).
    with view.lease(s.client.client_id):
        return await _poll(s, cmd, found, view)


async def _poll(
    s: Session, cmd: fm.PollMessages, found: ResolvedTopic, view: GroupView | None
) -> fm.PolledMessages:
    group = view.name if view is not None else tr.consumer_group_name(cmd.consumer.id)
    partition = _group_partition(s, view, cmd.partition_id, found)
    if partition is None:
        # A group member without partitions: the empty shape; the sentinel id makes the
        # current client re-sync its assignment (§5.8).
        return fm.PolledMessages(partition_id=tr.NO_PARTITION, current_offset=0)
    wire_partition = partition + s.partition_shift
    topic = found.name
    first: int | None = None  # the start, when found before the partition's end
    if cmd.count and cmd.strategy.kind in _START_WITHOUT_END:
        # Read first: a poll that finds messages needs no ListOffsets (the read's high
        # watermark is the current offset); any other outcome is answered as below.
        first = await _start(s, cmd, group, found, partition, 0)
        assert first is not None  # (only TIMESTAMP may find no start)
        try:
            result = await s.router.execute(_read(s, topic, partition, first, cmd.count), s.ctx)
        except OffsetOutOfRange:
            result = None
        if result is not None and result.batches:
            reply, last = await _reply(s, cmd, view, group, topic, partition, first, result)
            if last is not None:
                return reply
    latest = await s.router.execute(
        ListOffsets(topic=topic, partition=partition, spec=OffsetSpec.LATEST), s.ctx
    )
    end = latest.offset or 0
    current = tr.current_offset(end)
    start = first if first is not None else await _start(s, cmd, group, found, partition, end)
    if start is None or cmd.count == 0 or start >= end:
        return fm.PolledMessages(partition_id=wire_partition, current_offset=current)
    read = _read(s, topic, partition, start, cmd.count)
    try:
        result = await s.router.execute(read, s.ctx)
    except OffsetOutOfRange as exc:
        if start >= exc.log_start:
            return fm.PolledMessages(partition_id=wire_partition, current_offset=current)
        start = exc.log_start
        result = await s.router.execute(replace(read, offset=start), s.ctx)
    reply, _ = await _reply(s, cmd, view, group, topic, partition, start, result)
    return reply


# Polling strategies whose start does not depend on the partition's end (LAST counts back from
# it; TIMESTAMP is looked up).
_START_WITHOUT_END = frozenset((PollingKind.OFFSET, PollingKind.FIRST, PollingKind.NEXT))


def _read(s: Session, topic: Topic, partition: int, start: int, count: int) -> Read:
    return Read(
        topic=topic,
        partition=partition,
        offset=start,
        max_messages=count,
        max_bytes=s.service.settings.max_poll_bytes,
        whole_batches=True,  # stored Iggy batches are trimmed by restamping, not decoding
    )


async def _reply(
    s: Session,
    cmd: fm.PollMessages,
    view: GroupView | None,
    group: str,
    topic: Topic,
    partition: int,
    start: int,
    result: ReadResult,
) -> tuple[fm.PolledMessages, int | None]:
    """The reply with what ``result`` read from ``start``, and the offset of its last message
    (None: it has none), auto-committed when asked."""
    reply, last = _polled(s, result.batches, start, cmd.count, partition + s.partition_shift)
    if cmd.auto_commit and last is not None:
        generation, member = view.fence(s.client.client_id) if view is not None else (-1, "")
        await s.router.execute(
            CommitOffset(group=group, topic=topic, partition=partition, offset=last + 1,
                         generation=generation, member_id=member),
            s.ctx,
        )  # fmt: skip
    return replace(reply, current_offset=tr.current_offset(result.high_watermark)), last


def _polled(
    s: Session, batches: Iterable[MessageBatch], start: int, count: int, partition_id: int
) -> tuple[fm.PolledMessages, int | None]:
    """The poll reply for ``count`` messages from ``start`` and the offset of the last one.

    One stored batch is one Iggy batch. A batch an Iggy producer sent goes back as it was
    stored, only restamped (current framing); others are translated. The messages of a batch
    share an append time (Iggy stamps a batch once): the earliest timestamp in it, so polling
    by a timestamp read from a message returns that message's whole batch onward.
    """
    count_lossy = s.conn.metrics.lossy(tr.PROTOCOL)

    fast = not s.legacy
    encoded: list[bytes | memoryview] = []
    messages: list[wire.Message] = []
    left, last = count, None
    for batch in batches:
        if left <= 0:
            break
        stored = batch.wire
        if fast and stored is not None and stored.format == tr.WIRE_FORMAT:
            skip = max(0, start - stored.base_offset)
            pieces, n, batch_last = tr.serve_batch(
                stored, partition_id=partition_id, skip=skip, limit=left
            )
            if n:
                encoded += pieces  # the stored frames as views: not copied on their way out
                left, last = left - n, batch_last
            continue
        taken = [m for m in batch.messages if m.offset >= start][:left]
        if not taken:
            continue
        stamp = min(m.timestamp_us for m in batch.messages)
        converted = tr.to_iggy(taken, count_lossy, append_timestamp=stamp)
        if fast:
            encoded += encode_polled(converted, partition_id)
        else:
            messages += converted
        left, last = left - len(taken), taken[-1].offset
    reply = fm.PolledMessages(
        partition_id=partition_id,
        current_offset=0,
        messages=tuple(messages),
        batches=tuple(encoded),
        batches_count=count - left - len(messages),
    )
    return reply, last


async def _start(
    s: Session, cmd: fm.PollMessages, group: str, found: ResolvedTopic, partition: int, end: int
) -> int | None:
    kind, topic = cmd.strategy.kind, found.name
    if kind == PollingKind.OFFSET:
        return cmd.strategy.value
    if kind == PollingKind.FIRST:
        return 0  # below the log start: the read starts at the oldest message kept
    if kind == PollingKind.LAST:
        return max(0, end - max(1, cmd.count))
    if kind == PollingKind.NEXT:
        committed = await s.router.execute(
            FetchOffset(group=group, topic=topic, partition=partition), s.ctx
        )
        return committed.offset or 0
    if kind == PollingKind.TIMESTAMP:
        found_at = await s.router.execute(
            ListOffsets(topic=topic, partition=partition, spec=OffsetSpec.TIMESTAMP,
                        timestamp_us=cmd.strategy.value),
            s.ctx,
        )  # fmt: skip
        return found_at.offset
    raise InvalidRequest(f"unknown polling strategy {kind}")


async def _offset_target(
    s: Session, consumer: Consumer, stream: Any, topic: Any, partition: int | None
) -> tuple[ResolvedTopic, str, int]:
    found = await _topic(s, stream, topic)
    s.require("poll_messages", found.stream.id, found.topic.id)
    if consumer.kind == ConsumerKind.CONSUMER_GROUP:
        await s.groups.settled()
    group = _group_name(s, consumer, found)
    return found, group, _partition(s, partition, found)


async def get_offset(s: Session, cmd: fg.GetConsumerOffset) -> fg.ConsumerOffsetInfo | None:
    found, group, partition = await _offset_target(
        s, cmd.consumer, cmd.stream_id, cmd.topic_id, cmd.partition_id
    )
    committed = await s.router.execute(
        FetchOffset(group=group, topic=found.name, partition=partition), s.ctx
    )
    stored = tr.stored_offset(committed.offset)
    if stored is None:
        return None  # §5.7: nothing stored is an empty body
    latest = await s.router.execute(
        ListOffsets(topic=found.name, partition=partition, spec=OffsetSpec.LATEST), s.ctx
    )
    return fg.ConsumerOffsetInfo(
        partition_id=partition + s.partition_shift,
        current_offset=tr.current_offset(latest.offset or 0),
        stored_offset=stored,
    )


async def store_offset(s: Session, cmd: fg.StoreConsumerOffset) -> None:
    found, group, partition = await _offset_target(
        s, cmd.consumer, cmd.stream_id, cmd.topic_id, cmd.partition_id
    )
    await s.router.execute(
        CommitOffset(group=group, topic=found.name, partition=partition, offset=cmd.offset + 1),
        s.ctx,
    )


async def delete_offset(s: Session, cmd: fg.DeleteConsumerOffset) -> None:
    found, group, partition = await _offset_target(
        s, cmd.consumer, cmd.stream_id, cmd.topic_id, cmd.partition_id
    )
    committed = await s.router.execute(
        FetchOffset(group=group, topic=found.name, partition=partition), s.ctx
    )
    if tr.stored_offset(committed.offset) is None:
        # The real server refuses to delete what was never stored (§8: 3021).
        raise IggyStatus(
            Status.CONSUMER_OFFSET_NOT_FOUND, f"no offset stored for {group!r} in {found.name}"
        )
    await s.router.execute(DeleteOffset(group=group, topic=found.name, partition=partition), s.ctx)


async def flush(s: Session, cmd: fm.FlushUnsavedBuffer) -> None:
    """Nothing is buffered: an append is in the store when it is confirmed, and on disk per the
    backend's fsync policy. The partition is checked so that a typo still fails."""
    found = await _topic(s, cmd.stream_id, cmd.topic_id)
    s.require("send_messages", found.stream.id, found.topic.id)
    _partition(s, cmd.partition_id, found)


HANDLERS: dict[type[Command], CommandHandler[Command]] = dict(
    [
        handles(fm.SendMessages, send_messages),
        handles(fm.PollMessages, poll_messages),
        handles(fm.FlushUnsavedBuffer, flush),
        handles(fg.GetConsumerOffset, get_offset),
        handles(fg.StoreConsumerOffset, store_offset),
        handles(fg.DeleteConsumerOffset, delete_offset),
    ]
)

__all__ = ["HANDLERS"]
