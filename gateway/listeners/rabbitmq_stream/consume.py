"""RabbitMQ Stream consuming (rabbitmq-stream.md §5 Consuming, §6): Subscribe with every offset
specification, Deliver chunks under credit flow, Credit, StoreOffset / QueryOffset, Unsubscribe,
single active consumer with ConsumerUpdate.

Each subscription delivers from a task of its own: it waits for credit (one credit = one chunk),
long-polls the backend from its position and sends what came back as one Osiris chunk (stored
RabbitMQ entries as published, sub-entry batches still compressed; other protocols' messages as
AMQP 1.0 simple entries). Delivery is chunk-granular as on RabbitMQ: a chunk may start below the
requested offset and clients skip those records (§6). As on RabbitMQ, a Subscribe (and a Credit
to a subscription that had none) is followed by what the credit allows of what is there before
the connection's next frame is handled: clients take the answer to a request sent after it as a
barrier behind those Deliver frames. A QueryOffset (the RabbitMQ backend's barrier) also waits for
every chunk a delivery has already read to be written, however long the read took.

Filtering (RabbitMQ 3.13): a Subscribe with ``filter.N`` properties gets only the stored chunks
holding one of those values (Publish v2 filter values, kept in the chunk's notes), and with
``match-unfiltered=true`` also those holding an entry without a value; the chunk goes whole, as
RabbitMQ's bloom filter lets it through, and the client filters its entries.

Offsets: StoreOffset(reference, stream, n) commits n + 1 for the canonical group named by the
reference (DESIGN.md §3), so a Kafka consumer group of that name sees the same position.
"""

from __future__ import annotations

import contextlib

import trio

from gateway.listeners.rabbitmq_stream.catalog import Target
from gateway.listeners.rabbitmq_stream.session import (
    FailureReply,
    FrameHandler,
    Session,
    Subscription,
    code_reply,
    fails,
    handles,
)
from gateway.model import (
    CommitOffset,
    FetchOffset,
    Forbidden,
    GatewayError,
    ListOffsets,
    MessageBatch,
    NotFound,
    OffsetOutOfRange,
    OffsetSpec,
    Read,
    Unauthorized,
)
from gateway.router import RequestContext
from gateway.translate.rabbitmq_stream import chunks as trm
from gateway.translate.rabbitmq_stream import requests as tr
from gateway.translate.rabbitmq_stream.notes import filter_of
from protocols import rabbitmq_stream as rs
from protocols.rabbitmq_stream import OffsetType, ResponseCode

READ_WAIT_MS = 5_000  # one long poll; the task polls again until unsubscribed
MAX_CHUNK_BYTES = 1 << 20
ACTIVATION_WAIT_S = 30.0  # for the client's ConsumerUpdate answer; then the Subscribe's spec


def set_active(sub: Subscription, active: bool) -> None:
    """What the single-active-consumer groups call: tell the client, then deliver (or stop)."""
    sub.active = active
    sub.generation += 1
    if active:
        sub.session.spawn(_activate, sub, sub.generation)
        return
    if sub.scope is not None:
        sub.scope.cancel()
    sub.session.spawn(_consumer_update, sub, False)


async def resolve(s: Session, target: Target, spec: rs.OffsetSpec) -> int:
    """The first offset to deliver for an offset specification (§4)."""
    start = tr.start_at(spec)
    if start.spec is None:
        return start.offset
    if start.last:
        return await last_chunk(s, target) or 0  # empty: the first message to come

    async def listed(kind: OffsetSpec, timestamp_us: int = 0) -> int | None:
        found = await s.router.execute(
            ListOffsets(topic=target.topic, partition=target.partition, spec=kind,
                        timestamp_us=timestamp_us),
            s.ctx,
        )  # fmt: skip
        return found.offset

    first = await listed(start.spec, start.timestamp_us)
    latest = (await listed(OffsetSpec.LATEST) or 0) if first is None else 0
    return start.resolve(first, latest=latest)


async def last_chunk(s: Session, target: Target) -> int | None:
    """The first offset of the stored batch holding the last message: RabbitMQ's last chunk
    (LAST delivers all of it, §6); None on an empty stream."""
    end = await s.router.execute(
        ListOffsets(topic=target.topic, partition=target.partition, spec=OffsetSpec.LATEST), s.ctx
    )
    if not end.offset:
        return None
    last = await s.router.execute(
        Read(topic=target.topic, partition=target.partition, offset=end.offset - 1, max_bytes=1,
             whole_batches=True),
        s.ctx,
    )  # fmt: skip
    return last.batches[0].base_offset if last.batches else end.offset - 1


async def subscribe(s: Session, f: rs.Subscribe) -> None:
    if f.subscription_id in s.subscriptions:
        raise tr.RabbitCode(ResponseCode.SUBSCRIPTION_ID_ALREADY_EXISTS,
                            f"subscription {f.subscription_id} exists")  # fmt: skip
    target = await s.catalog.target(s.stream, f.stream, s.ctx)
    s.require("poll_messages", target.info.id)
    props = dict(f.properties or ())
    sac = props.get("single-active-consumer", "").lower() == "true"
    name = props.get("name", "")
    if sac and not name:
        raise tr.RabbitCode(ResponseCode.PRECONDITION_FAILED,
                            "a single active consumer needs a name")  # fmt: skip
    tr.start_at(f.offset)  # an unknown offset type fails here, before the response
    sub = Subscription(
        s, f.subscription_id, target, f.offset, f.credit, name=name, sac=sac,
        super_stream=props.get("super-stream", ""), only=filter_of(f.properties or ()),
    )  # fmt: skip
    offset = 0 if sac else await resolve(s, target, f.offset)  # "next" = at Subscribe time
    s.subscriptions[sub.id] = sub
    await s.send(rs.SubscribeResponse(correlation_id=f.correlation_id, code=ResponseCode.OK))
    if sac:
        s.service.active.join(sub)
    else:
        sub.delivering = True  # from now: the next frame waits for its first chunks
        s.spawn(deliver, sub, offset)
        await sub.caught_up()


async def _consumer_update(sub: Subscription, active: bool) -> rs.OffsetSpec | None:
    """ConsumerUpdate to the client; its answer's offset spec (None: none came in time)."""
    s = sub.session
    correlation = s.next_correlation()
    send, receive = trio.open_memory_channel[rs.ConsumerUpdateResponse](1)
    s.pending[correlation] = send
    try:
        await s.send(rs.ConsumerUpdate(correlation_id=correlation, subscription_id=sub.id,
                                       active=int(active)))  # fmt: skip
        with trio.move_on_after(ACTIVATION_WAIT_S):
            answer = await receive.receive()
            return answer.offset
        s.conn.log.info("no ConsumerUpdate answer", subscription=sub.id)
        return None
    finally:
        s.pending.pop(correlation, None)


async def _activate(sub: Subscription, generation: int) -> None:
    s = sub.session
    spec = await _consumer_update(sub, True)
    if not (sub.active and sub.live and sub.generation == generation):
        return  # deactivated or gone while the client answered
    if spec is None or spec.type == OffsetType.NONE:
        spec = sub.spec
    try:
        offset = await resolve(s, sub.target, spec)
    except GatewayError as exc:
        s.conn.log.info("cannot activate consumer", subscription=sub.id, error=str(exc))
        return
    await deliver(sub, offset)


async def consumer_update_answer(s: Session, f: rs.ConsumerUpdateResponse) -> None:
    waiting = s.pending.get(f.correlation_id)
    if waiting is not None:
        with contextlib.suppress(trio.WouldBlock, trio.BrokenResourceError):
            waiting.send_nowait(f)


def _end_of(batches: tuple[MessageBatch, ...], default: int) -> int:
    if not batches:
        return default
    last = batches[-1]
    return last.base_offset + len(last)


async def deliver(sub: Subscription, offset: int) -> None:
    """Deliver chunks from ``offset`` while there is credit, until cancelled."""
    sub.delivering = True
    try:
        await _deliver(sub, offset)
    finally:
        sub.delivering = False
        sub.settled.set()


async def _deliver(sub: Subscription, offset: int) -> None:
    s = sub.session
    count_lossy = s.conn.metrics.lossy(tr.PROTOCOL)

    with trio.CancelScope() as scope:
        sub.scope = scope
        read_at = offset
        ctx = RequestContext(tr.PROTOCOL, "deliver", client=s.conn.client)
        # reads on behalf of the subscriber (a revoked permission stops the delivery)
        ctx.user = None if s.user is None else s.user.username
        while True:
            while sub.credit <= 0:
                sub.settled.set()  # sent all the credit allows
                sub.wake = trio.Event()
                await sub.wake.wait()
            # Unsettled (after a Subscribe, or new credit after none): what is there now, at
            # once; settled: a long poll for what comes.
            wait_ms = READ_WAIT_MS if sub.settled.is_set() else 0
            budget = max(4096, min(MAX_CHUNK_BYTES, s.codec.max_frame_size - 128))
            read = Read(topic=sub.target.topic, partition=sub.target.partition, offset=read_at,
                        max_bytes=budget, max_wait_ms=wait_ms, whole_batches=True)  # fmt: skip
            try:
                result = await s.router.execute(read, ctx)
            except OffsetOutOfRange as exc:
                if read_at < exc.log_start:  # retention dropped it: from the oldest kept
                    offset = read_at = exc.log_start
                else:  # past the end: from the end, as Osiris clamps such an offset to `next`
                    offset = read_at = exc.log_end
                    sub.settled.set()
                continue
            except NotFound:
                # Deleted (maybe through another protocol): ``stream_gone`` ends this
                # subscription, cancelling this scope, so it runs outside it to send the
                # MetadataUpdate.
                s.spawn(s.stream_gone, sub.target.name)
                return
            except (Forbidden, Unauthorized):
                # the permission was revoked (or the user deleted) since the Subscribe: nothing
                # more is delivered (the router logged and counted the refusal)
                return
            batches = result.batches
            if batches:
                sub.unsettle()  # read: written before the answer to any later request
            chunk = trm.chunk_for(batches, offset, lossy=count_lossy, only=sub.only)
            if chunk is None:
                if not batches:
                    sub.settled.set()  # at the end: nothing more to send now
                read_at = _end_of(batches, read_at)
                continue
            # Every chunk the read brought while credit lasts: a read may hold several (a gap in
            # the offsets ends a chunk: on a RabbitMQ backend each stored chunk is one).
            while chunk is not None:
                sub.credit -= 1
                # gathered: the stored entries go out without a copy into the frame
                committed = chunk.chunk_id if s.deliver_v2 else None
                await s.conn.send(rs.deliver_frame(sub.id, chunk.pieces, committed))
                offset = read_at = chunk.chunk_id + chunk.records
                batches = tuple(b for b in batches if b.base_offset + len(b) > offset)
                if sub.credit <= 0 or not batches:
                    break
                chunk = trm.chunk_for(batches, offset, lossy=count_lossy, only=sub.only)


async def credit(s: Session, f: rs.Credit) -> rs.Frame | None:
    sub = s.subscriptions.get(f.subscription_id)
    if sub is None:
        return rs.CreditResponse(code=ResponseCode.SUBSCRIPTION_ID_DOES_NOT_EXIST,
                                 subscription_id=f.subscription_id)  # fmt: skip
    if f.credit > 0:
        if sub.credit <= 0:
            sub.unsettle()  # it was waiting for credit: its next chunks come before any answer
        sub.add_credit(f.credit)
        await sub.caught_up()
    return None


async def unsubscribe(s: Session, f: rs.Unsubscribe) -> rs.Frame:
    sub = s.subscriptions.pop(f.subscription_id, None)
    if sub is None:
        raise tr.RabbitCode(ResponseCode.SUBSCRIPTION_ID_DOES_NOT_EXIST,
                            f"subscription {f.subscription_id} does not exist")  # fmt: skip
    sub.stop()
    return rs.UnsubscribeResponse(correlation_id=f.correlation_id, code=ResponseCode.OK)


async def store_offset(s: Session, f: rs.StoreOffset) -> None:
    """Never answered, even on error (§5): a failure is only logged and counted."""
    target = await s.catalog.target(s.stream, f.stream, s.ctx)
    s.require("poll_messages", target.info.id)
    await s.router.execute(
        CommitOffset(group=f.reference, topic=target.topic, partition=target.partition,
                     offset=tr.committed_of_stored(f.offset)),
        s.ctx,
    )  # fmt: skip


async def query_offset(s: Session, f: rs.QueryOffset) -> rs.Frame:
    # Clients take this answer as a barrier behind the Deliver frames of what is already read
    # (the RabbitMQ backend's ``barrier``): it waits for them.
    await s.deliveries_written()
    target = await s.catalog.target(s.stream, f.stream, s.ctx)
    s.require("poll_messages", target.info.id)
    found = await s.router.execute(
        FetchOffset(group=f.reference, topic=target.topic, partition=target.partition), s.ctx
    )
    stored = tr.stored_of_committed(found.offset)
    if stored is None:
        return rs.QueryOffsetResponse(correlation_id=f.correlation_id,
                                      code=ResponseCode.NO_OFFSET, offset=0)  # fmt: skip
    return rs.QueryOffsetResponse(correlation_id=f.correlation_id, code=ResponseCode.OK,
                                  offset=stored)  # fmt: skip


HANDLERS: dict[type[rs.Frame], FrameHandler[rs.Frame]] = dict(
    [
        handles(rs.Subscribe, subscribe),
        handles(rs.Credit, credit),
        handles(rs.Unsubscribe, unsubscribe),
        handles(rs.StoreOffset, store_offset),
        handles(rs.QueryOffset, query_offset),
        handles(rs.ConsumerUpdateResponse, consumer_update_answer),
    ]
)

FAILURES: dict[type[rs.Frame], FailureReply[rs.Frame]] = dict(
    [
        fails(rs.Subscribe, code_reply(rs.SubscribeResponse)),
        fails(rs.Unsubscribe, code_reply(rs.UnsubscribeResponse)),
        fails(
            rs.QueryOffset,
            lambda f, code: rs.QueryOffsetResponse(
                correlation_id=f.correlation_id, code=code, offset=0
            ),
        ),
    ]
)

__all__ = [
    "FAILURES", "HANDLERS", "deliver", "last_chunk", "resolve", "set_active",
]  # fmt: skip
