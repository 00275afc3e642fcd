"""RabbitMQ Stream publishing (rabbitmq-stream.md §5 Publishing): DeclarePublisher, Publish with
PublishConfirm / PublishError, QueryPublisherSequence, DeletePublisher.

A Publish frame is appended as canonical batches of at most ``CHUNK_ENTRIES`` entries (one
stored batch = one chunk, as RabbitMQ's writer cuts a big frame into several), its entries stored
as sent (wire format ``rabbitmq_stream``: simple entries and sub-entry batches, still
compressed) with the chunk's notes (``translate.rabbitmq_stream.notes``: the publisher reference,
and Publish v2's filter values), and confirmed only once the backend accepted them. A sub-entry
batch is inflated once to check it (bad input is refused, nothing stored) but stored compressed.

Deduplication (§5): a publisher with a reference has its publishing ids tracked per partition
stream; an entry whose id is not above the highest one stored is confirmed but not stored.
Where the backend's broker deduplicates (``capabilities.publisher_dedup``: RabbitMQ), the
entries go to it with the reference and their ids, and it decides, atomically with the append
and for every gateway in front of it; QueryPublisherSequence asks it. Elsewhere the gateway
decides: the highest id is kept as a committed offset of the internal group
``__rabbitmq_publisher.<ref>`` (id + 1, the canonical NEXT convention), written after the append
and before the confirm, so a gateway restart keeps it (QueryPublisherSequence answers it,
clients resume after it); that holds for one gateway only (README, "Running many gateways").
"""

from __future__ import annotations

import itertools
import time

from gateway.listeners.rabbitmq_stream.catalog import Target
from gateway.listeners.rabbitmq_stream.session import (
    FailureReply,
    FrameHandler,
    Publisher,
    Session,
    code_reply,
    fails,
    handles,
)
from gateway.model import (
    Append,
    CommitOffset,
    FetchOffset,
    GatewayError,
    MessageBatch,
    PublisherSequence,
)
from gateway.translate.rabbitmq_stream import chunks as trm
from gateway.translate.rabbitmq_stream import requests as tr
from gateway.translate.rabbitmq_stream.notes import notes_for
from protocols import rabbitmq_stream as rs
from protocols._wire import RemoteProtocolError
from protocols.rabbitmq_stream import ResponseCode
from protocols.rabbitmq_stream.chunk import Entry, SimpleEntry, SubEntryBatch

PUBLISHER_GROUP = "__rabbitmq_publisher."
# Entries per stored chunk. RabbitMQ writes a Publish frame's entries one by one
# (rabbit_stream_reader: one osiris:write each) and its Osiris writer makes a chunk of each batch
# it takes from its mailbox, so a big Publish becomes several chunks (``last`` delivers only the
# last of them); the gateway cuts a frame into chunks of this many entries.
CHUNK_ENTRIES = 1000


def _broker_dedups(s: Session) -> bool:
    return s.router.supports(PublisherSequence)


async def stored_sequence(s: Session, target: Target, reference: str) -> int:
    if _broker_dedups(s):
        sequence = await s.router.execute(
            PublisherSequence(topic=target.topic, partition=target.partition,
                              publisher=reference),
            s.ctx,
        )  # fmt: skip
        return sequence.sequence
    found = await s.router.execute(
        FetchOffset(group=PUBLISHER_GROUP + reference, topic=target.topic,
                    partition=target.partition),
        s.ctx,
    )  # fmt: skip
    return max(0, (found.offset or 0) - 1)


async def declare(s: Session, f: rs.DeclarePublisher) -> rs.Frame:
    if f.publisher_id in s.publishers:
        raise tr.RabbitCode(ResponseCode.PRECONDITION_FAILED,
                            f"publisher id {f.publisher_id} is in use")  # fmt: skip
    target = await s.catalog.target(s.stream, f.stream, s.ctx)
    s.require("send_messages", target.info.id)
    publisher = Publisher(f.publisher_id, f.reference, target)
    references = s.service.references
    if f.reference and not _broker_dedups(s) and not s.service.settings.gateway_dedup:
        raise tr.RabbitCode(
            ResponseCode.PRECONDITION_FAILED,
            "publisher deduplication is kept in each gateway process on this backend, and this "
            "one shares its port with other workers (--workers)",
        )
    if f.reference:
        if publisher.key in references:
            raise tr.RabbitCode(ResponseCode.PRECONDITION_FAILED,
                                f"reference {f.reference!r} already has a publisher")  # fmt: skip
        references[publisher.key] = publisher  # taken before the await: no double declare
        try:
            publisher.last = await stored_sequence(s, target, f.reference)
        except BaseException:
            references.pop(publisher.key, None)
            raise
    s.publishers[f.publisher_id] = publisher
    return rs.DeclarePublisherResponse(correlation_id=f.correlation_id, code=ResponseCode.OK)


def _entry(item: rs.PublishedMessage | rs.PublishedSubBatch) -> Entry:
    if isinstance(item, rs.PublishedMessage):
        return SimpleEntry(item.data)
    batch = SubEntryBatch(
        compression=item.compression,
        record_count=item.record_count,
        uncompressed_length=item.uncompressed_length,
        data=item.data,
    )
    batch.records()  # refused here (RemoteProtocolError) rather than by every later reader
    return batch


def _all_new(ids: list[int], last: int) -> bool:
    """Every id above ``last`` and above the ids before it in the frame: no entry of it is a
    duplicate. A frame may repeat ids (1,2,3,1,2,3): RabbitMQ stores the first of each and
    confirms the repeats unstored (§5 Deduplication), as it does for ids at or below ``last``."""
    if ids[0] <= last:
        return False
    return all(a < b for a, b in itertools.pairwise(ids))


def _errors(publisher_id: int, ids: list[int], code: int) -> rs.PublishError:
    return rs.PublishError(
        publisher_id=publisher_id,
        errors=tuple(rs.PublishingError(publishing_id=i, code=code) for i in ids),
    )


def _pieces(n: int) -> list[tuple[int, int]]:
    """(start, stop) of the stored chunks ``n`` entries make (at most CHUNK_ENTRIES each)."""
    return [(i, min(i + CHUNK_ENTRIES, n)) for i in range(0, n, CHUNK_ENTRIES)]


async def publish(s: Session, f: rs.Publish) -> rs.Frame | None:
    simple = f.messages
    ids = (
        list(simple.ids)
        if isinstance(simple, rs.SimpleEntries)
        else [m.publishing_id for m in f.messages]
    )
    publisher = s.publishers.get(f.publisher_id)
    if publisher is None:
        return _errors(f.publisher_id, ids, ResponseCode.PUBLISHER_DOES_NOT_EXIST)
    try:
        s.require("send_messages", publisher.target.info.id)
    except GatewayError as exc:
        return _errors(f.publisher_id, ids, tr.response_code(exc))
    if publisher.reference and _broker_dedups(s):
        return await _publish_deduplicated(s, publisher, f, ids)
    now_us = time.time_ns() // 1000
    if (
        isinstance(simple, rs.SimpleEntries)
        and ids
        and (not publisher.reference or _all_new(ids, publisher.last))
    ):
        # The hot path: every entry is new and simple; the frame's entries are stored as they are.
        notes = notes_for(publisher.reference)
        pieces = [
            (MessageBatch(wire=trm.stored_batch(simple.stored_range(a, b), b - a,
                                                timestamp_us=now_us, notes=notes)), ids[a:b])
            for a, b in _pieces(len(ids))
        ]  # fmt: skip
        return await _append(s, publisher, f, pieces, [])
    fresh: list[Entry] = []
    fresh_ids: list[int] = []
    values: list[str | None] = []
    duplicate_ids: list[int] = []
    last = publisher.last
    for item in f.messages:
        if publisher.reference and item.publishing_id <= last:
            duplicate_ids.append(item.publishing_id)
            continue
        try:
            fresh.append(_entry(item))
        except RemoteProtocolError as exc:
            s.conn.log.info("malformed sub-entry batch", error=str(exc))
            return _errors(f.publisher_id, ids, ResponseCode.PRECONDITION_FAILED)
        fresh_ids.append(item.publishing_id)
        values.append(item.filter_value if isinstance(item, rs.PublishedMessage) else None)
        last = max(last, item.publishing_id)
    if not fresh:
        return rs.PublishConfirm(publisher_id=f.publisher_id, publishing_ids=tuple(ids))
    pieces = [
        (MessageBatch(wire=trm.wire_batch(fresh[a:b], timestamp_us=now_us,
                                          notes=notes_for(publisher.reference, values[a:b]))),
         fresh_ids[a:b])
        for a, b in _pieces(len(fresh))
    ]  # fmt: skip
    return await _append(s, publisher, f, pieces, duplicate_ids)


async def _publish_deduplicated(
    s: Session, publisher: Publisher, f: rs.Publish, ids: list[int]
) -> rs.Frame:
    """Every entry to the backend with its publishing id: its broker drops (and confirms) those
    it stored before for this reference, through whichever gateway."""
    if not ids:
        return rs.PublishConfirm(publisher_id=f.publisher_id, publishing_ids=())
    simple = f.messages
    if isinstance(simple, rs.SimpleEntries):
        now_us = time.time_ns() // 1000
        frame = simple.as_sent()
        if frame is not None and trm.PUBLISHED_FORMAT in s.router.backend.capabilities.wire_formats:
            # The frame as it came: the broker takes its items as they are (no copy, no scan).
            wire = trm.published_batch(frame, len(simple), timestamp_us=now_us)
        else:
            wire = trm.stored_batch(simple.stored, len(simple), timestamp_us=now_us)
    else:
        try:
            entries = [_entry(item) for item in f.messages]
        except RemoteProtocolError as exc:
            s.conn.log.info("malformed sub-entry batch", error=str(exc))
            return _errors(f.publisher_id, ids, ResponseCode.PRECONDITION_FAILED)
        wire = trm.wire_batch(entries, timestamp_us=time.time_ns() // 1000)
    target = publisher.target
    try:
        await s.router.execute(
            Append(topic=target.topic, partition=target.partition,
                   batch=MessageBatch(wire=wire), offset_needed=False,
                   publisher=publisher.reference, publishing_ids=tuple(ids)),
            s.ctx,
        )  # fmt: skip
    except GatewayError as exc:
        s.conn.log.info("publish refused", error=exc.message)
        return _errors(f.publisher_id, ids, tr.response_code(exc))
    publisher.last = max(publisher.last, max(ids))
    return rs.PublishConfirm(publisher_id=f.publisher_id, publishing_ids=tuple(ids))


async def _append(
    s: Session,
    publisher: Publisher,
    f: rs.Publish,
    pieces: list[tuple[MessageBatch, list[int]]],
    duplicate_ids: list[int],
) -> rs.Frame:
    """Store each piece (a chunk: a batch and its entries' publishing ids) in order, keep the
    sequence, confirm every id stored or a duplicate; after a refusal the rest is refused."""
    target = publisher.target
    stored: list[int] = []
    failed: GatewayError | None = None
    for batch, piece_ids in pieces:
        try:
            # A PublishConfirm names publishing ids, never offsets: no need to learn them.
            append = Append(topic=target.topic, partition=target.partition, batch=batch,
                            offset_needed=False)  # fmt: skip
            await s.router.execute(append, s.ctx)
        except GatewayError as exc:
            s.conn.log.info("publish refused", error=exc.message)
            failed = exc
            break
        stored += piece_ids
    last = max(stored, default=0)
    if publisher.reference and last > publisher.last:
        publisher.last = last
        await _keep_sequence(s, publisher)
    if failed is None:
        return rs.PublishConfirm(
            publisher_id=f.publisher_id, publishing_ids=(*duplicate_ids, *stored)
        )
    if duplicate_ids or stored:
        await s.send(rs.PublishConfirm(publisher_id=f.publisher_id,
                                       publishing_ids=(*duplicate_ids, *stored)))  # fmt: skip
    refused = [i for _, piece_ids in pieces for i in piece_ids][len(stored) :]
    return _errors(f.publisher_id, refused, tr.response_code(failed))


async def _keep_sequence(s: Session, publisher: Publisher) -> None:
    target = publisher.target
    try:
        await s.router.execute(
            CommitOffset(group=PUBLISHER_GROUP + publisher.reference, topic=target.topic,
                         partition=target.partition, offset=publisher.last + 1),
            s.ctx,
        )  # fmt: skip
    except GatewayError as exc:  # the messages are stored: confirm them anyway
        s.conn.log.warning("publisher sequence not kept", reference=publisher.reference,
                           error=exc.message)  # fmt: skip


async def query_sequence(s: Session, f: rs.QueryPublisherSequence) -> rs.Frame:
    target = await s.catalog.target(s.stream, f.stream, s.ctx)
    live = s.service.references.get((target.topic.stream, target.name, f.reference))
    if live is not None and not _broker_dedups(s):
        sequence = live.last
    else:  # the broker's answer covers every gateway's publishers
        sequence = await stored_sequence(s, target, f.reference)
    return rs.QueryPublisherSequenceResponse(
        correlation_id=f.correlation_id, code=ResponseCode.OK, sequence=sequence
    )


async def delete(s: Session, f: rs.DeletePublisher) -> rs.Frame:
    publisher = s.publishers.pop(f.publisher_id, None)
    if publisher is None:
        raise tr.RabbitCode(ResponseCode.PUBLISHER_DOES_NOT_EXIST,
                            f"publisher {f.publisher_id} does not exist")  # fmt: skip
    s.forget(publisher)
    return rs.DeletePublisherResponse(correlation_id=f.correlation_id, code=ResponseCode.OK)


HANDLERS: dict[type[rs.Frame], FrameHandler[rs.Frame]] = dict(
    [
        handles(rs.DeclarePublisher, declare),
        handles(rs.Publish, publish),
        handles(rs.QueryPublisherSequence, query_sequence),
        handles(rs.DeletePublisher, delete),
    ]
)

FAILURES: dict[type[rs.Frame], FailureReply[rs.Frame]] = dict(
    [
        fails(rs.DeclarePublisher, code_reply(rs.DeclarePublisherResponse)),
        fails(
            rs.QueryPublisherSequence,
            lambda f, code: rs.QueryPublisherSequenceResponse(
                correlation_id=f.correlation_id, code=code, sequence=0
            ),
        ),
        fails(rs.DeletePublisher, code_reply(rs.DeletePublisherResponse)),
    ]
)

__all__ = ["FAILURES", "HANDLERS", "PUBLISHER_GROUP", "stored_sequence"]
