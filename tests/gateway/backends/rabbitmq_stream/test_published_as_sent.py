"""A deduplicating client's Publish frame published on as it came (``PUBLISHED_FORMAT``), on a
real RabbitMQ 3.10.8: the broker stores the entries and deduplicates by the client's ids
(unordered and repeated ids too); a frame above RabbitMQ's frame_max and entries above the
topic's message size limit take the stored form's path (cut into frames, refused).
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
import trio

from gateway.backends.rabbitmq_stream.backend import open_rabbitmq_stream
from gateway.backends.rabbitmq_stream.publisher import Publisher
from gateway.model import (
    Append,
    CreateTopic,
    MessageBatch,
    MessageTooLarge,
    PublisherSequence,
    Topic,
    TopicConfig,
)
from gateway.translate.rabbitmq_stream.messages import (
    PUBLISHED_FORMAT,
    decode_wire,
    published_batch,
    stored_of_published,
)
from protocols import rabbitmq_stream as rs
from tests.helpers.rstream_direct import read_until

from .conftest import Broker, in_asyncio

pytestmark = pytest.mark.slow

LIMIT_S = 30
REFERENCE = "orders-app"


def frame_of(items: Sequence[tuple[int, bytes]]) -> bytes:
    """A client's Publish v1 frame (after its size prefix) of these (id, entry) items."""
    messages = [rs.PublishedMessage(publishing_id=i, data=data) for i, data in items]
    return rs.RabbitStreamClientCodec().send(rs.Publish(publisher_id=9, messages=messages))[4:]


def append_of(topic: Topic, items: Sequence[tuple[int, bytes]]) -> Append:
    wire = published_batch(frame_of(items), len(items), timestamp_us=1)
    return Append(topic=topic, partition=0, batch=MessageBatch(wire=wire), offset_needed=False,
                  publisher=REFERENCE, publishing_ids=tuple(i for i, _ in items))  # fmt: skip


@pytest.fixture
def as_sent(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many entries went to RabbitMQ in frames as their client sent them."""
    calls: list[int] = []
    original = Publisher.send_as_sent

    async def counted(self: Publisher, frame: bytes, ids: Sequence[int]):  # type: ignore[no-untyped-def]
        calls.append(len(ids))
        return await original(self, frame, ids)

    monkeypatch.setattr(Publisher, "send_as_sent", counted)
    return calls


def test_the_published_form_decodes_as_the_stored_form() -> None:
    items = [(5, b"a"), (3, b""), (2**64 - 1, b"\x80" * 600)]
    wire = published_batch(frame_of(items), 3, timestamp_us=7)
    assert wire.format == PUBLISHED_FORMAT
    stored = stored_of_published(wire)
    assert [m.value for m in decode_wire(stored)] == [b"a", b"", b"\x80" * 600]
    assert [m.value for m in PUBLISHED_FORMAT.decode(wire)] == [b"a", b"", b"\x80" * 600]


async def test_a_publish_frame_goes_as_sent_and_rabbitmq_deduplicates(
    broker: Broker, as_sent: list[int]
) -> None:
    topic = Topic("default", "as-sent")
    first = [(i, b"entry %d" % i) for i in range(1, 6)]
    again = [(i, b"entry %d" % i) for i in range(4, 9)]  # a retry: 4 and 5 are stored already
    odd = [(20, b"entry 20"), (12, b"older"), (30, b"entry 30"), (30, b"repeat")]
    with trio.fail_after(LIMIT_S):
        async with open_rabbitmq_stream(broker.url) as backend:
            assert PUBLISHED_FORMAT in backend.capabilities.wire_formats
            await backend.create_topic(CreateTopic(topic=topic, partitions=1))
            for items in (first, again, odd):
                result = await backend.append(append_of(topic, items))
                assert result.count == len(items)
            sequence = await backend.publisher_sequence(
                PublisherSequence(topic=topic, partition=0, publisher=REFERENCE)
            )
            assert sequence.sequence == 30
    assert as_sent == [5, 5, 4]
    got = await in_asyncio(
        lambda: read_until(broker.rstream(), "as-sent", lambda got: len(got) >= 10, strict=False)
    )
    want = [b"entry %d" % i for i in (*range(1, 9), 20, 30)]
    assert [entry for _, entry, _ in got] == want


async def test_a_frame_above_rabbitmqs_frame_max_is_cut(broker: Broker, as_sent: list[int]) -> None:
    topic = Topic("default", "as-sent-cut")
    items = [(i, bytes([i]) * 1000) for i in range(1, 21)]  # 20 KB: three frames of 8 KiB
    with trio.fail_after(LIMIT_S):
        async with open_rabbitmq_stream(broker.url + "?frame_max=8192") as backend:
            await backend.create_topic(CreateTopic(topic=topic, partitions=1))
            result = await backend.append(append_of(topic, items))
            assert result.count == 20
    assert as_sent == []
    stream, enough = "as-sent-cut", lambda got: len(got) >= 20
    got = await in_asyncio(lambda: read_until(broker.rstream(), stream, enough, strict=False))
    assert [entry for _, entry, _ in got] == [data for _, data in items]


async def test_an_entry_above_the_topics_limit_is_refused(
    broker: Broker, as_sent: list[int]
) -> None:
    topic = Topic("default", "as-sent-limit")
    items = [(1, b"x" * 10), (2, b"y" * 300), (3, b"z")]
    with trio.fail_after(LIMIT_S):
        async with open_rabbitmq_stream(broker.url) as backend:
            config = TopicConfig(max_message_bytes=200)
            await backend.create_topic(CreateTopic(topic=topic, partitions=1, config=config))
            with pytest.raises(MessageTooLarge):
                await backend.append(append_of(topic, items))
            small = [(4, b"x" * 150), (5, b"y" * 150)]  # each within 200, 300 together
            assert (await backend.append(append_of(topic, small))).count == 2
    assert as_sent == []
