"""What the RabbitMQ backend makes the broker do, on a real RabbitMQ 3.10.8: appends whose offsets
nobody needs open no tail (a tail is a delivery of every chunk back to the gateway), a tail
nobody uses stops following and is reopened with the right end, and a consumer catching up
reads through one kept subscription. Behaviour only; the costs are measured by
``streamgate bench compare``."""

from __future__ import annotations

import pytest
import trio

from gateway.backends.rabbitmq_stream import cursor as rabbitmq_stream_cursor
from gateway.backends.rabbitmq_stream import tail as rabbitmq_stream_tail
from gateway.backends.rabbitmq_stream.backend import RabbitStreamBackend, open_rabbitmq_stream
from gateway.backends.rabbitmq_stream.conn import Connection
from gateway.backends.rabbitmq_stream.cursor import Cursor
from gateway.model import (
    Append,
    CreateTopic,
    ListOffsets,
    Message,
    MessageBatch,
    OffsetSpec,
    Read,
    Topic,
)

from .conftest import Broker

pytestmark = pytest.mark.slow

LIMIT_S = 40


async def _publish(backend: RabbitStreamBackend, topic: Topic, batches: int, tag: bytes) -> None:
    """Appends as a RabbitMQ Stream client's Publish makes them: no offset asked for."""
    for k in range(batches):
        batch = MessageBatch([Message(value=b"%s-%d-%d" % (tag, k, i)) for i in range(3)])
        await backend.append(Append(topic=topic, partition=0, batch=batch, offset_needed=False))


async def _read_all(backend: RabbitStreamBackend, topic: Topic, max_bytes: int) -> list[bytes]:
    values: list[bytes] = []
    offset = 0
    while True:
        r = await backend.read(Read(topic=topic, partition=0, offset=offset, max_bytes=max_bytes))
        got = [m for b in r.batches for m in b.messages]
        if not got:
            return values
        values += [m.value or b"" for m in got]
        offset = got[-1].offset + 1


async def test_appends_without_offsets_open_no_tail(broker: Broker) -> None:
    topic = Topic("default", "untailed")
    with trio.fail_after(LIMIT_S):
        async with open_rabbitmq_stream(broker.url) as backend:
            await backend.create_topic(CreateTopic(topic=topic, partitions=1))
            await _publish(backend, topic, 5, b"p")
            tails = backend.data.tails
            assert tails is None or "untailed" not in tails.items
            assert len(await _read_all(backend, topic, 1 << 20)) == 15


async def test_a_tail_nobody_uses_is_reopened_at_the_end(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Unused, a tail takes what its credit allows and stops; the next use must not answer
    from the end it had then."""
    monkeypatch.setattr(rabbitmq_stream_tail, "TAIL_IDLE_S", 0.0)
    topic = Topic("default", "idle-tail")
    batches = rabbitmq_stream_tail.TAIL_CREDIT + 10  # one chunk each: more than its credit
    with trio.fail_after(LIMIT_S):
        async with open_rabbitmq_stream(broker.url) as backend:
            await backend.create_topic(CreateTopic(topic=topic, partitions=1))
            first = await backend.append(
                Append(topic=topic, partition=0, batch=MessageBatch([Message(value=b"first")]))
            )
            assert first.base_offset == 0  # located by the tail, which nobody uses from now on
            tail = await backend.data.tail("idle-tail")
            await _publish(backend, topic, batches, b"q")
            with trio.fail_after(10):
                while not tail.stale:  # the last of its credit comes, then no more
                    await tail.changed.wait()
            assert tail.end < 1 + 3 * batches
            latest = await backend.list_offsets(
                ListOffsets(topic=topic, partition=0, spec=OffsetSpec.LATEST)
            )
            assert latest.offset == 1 + 3 * batches
            assert (await backend.data.tail("idle-tail")) is not tail
            last = await backend.read(Read(topic=topic, partition=0, offset=3 * batches))
            assert [m.value for b in last.batches for m in b.messages][-1] == b"q-%d-2" % (
                batches - 1
            )


async def test_a_catch_up_reads_through_one_subscription(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = Topic("default", "catch-up")
    opened: list[int] = []
    open_cursor = Cursor.open

    async def counted(conn: Connection, stream: str, offset: int) -> Cursor:
        opened.append(offset)
        return await open_cursor(conn, stream, offset)

    monkeypatch.setattr(Cursor, "open", counted)
    monkeypatch.setattr(rabbitmq_stream_cursor, "CURSOR_CREDIT", 2)  # many rounds of credit
    with trio.fail_after(LIMIT_S):
        async with open_rabbitmq_stream(broker.url) as backend:
            await backend.create_topic(CreateTopic(topic=topic, partitions=1))
            await _publish(backend, topic, 40, b"c")
            # A tail opened at the end now: everything before is read from further back.
            await backend.list_offsets(
                ListOffsets(topic=topic, partition=0, spec=OffsetSpec.LATEST)
            )
            values = await _read_all(backend, topic, 64)  # about a chunk per read
    assert values == [b"c-%d-%d" % (k, i) for k in range(40) for i in range(3)]
    assert opened == [0]
