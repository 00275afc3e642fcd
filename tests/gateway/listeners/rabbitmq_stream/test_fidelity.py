"""Answers as a real RabbitMQ gives them, where rstream 1.1.1's own suite told the gateway apart
(issue 19): repeated publishing ids inside one Publish frame, chunk sizes and the publisher
trailer length in the chunk header, server-side filtering (Publish v2 filter values,
Subscribe's ``filter.N`` / ``match-unfiltered``). Raw frames where rstream cannot express the
case, rstream itself where it can."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
from rstream import (
    AMQPMessage,
    Consumer,
    FilterConfiguration,
    OffsetType,
    Producer,
    RawMessage,
    amqp_decoder,
    schema,
)

from gateway.app import Running
from gateway.backends.embedded.backend import EmbeddedBackend
from gateway.model import Read, ReadResult, Topic
from protocols import rabbitmq_stream as rs
from protocols.rabbitmq_stream import OffsetSpec, ResponseCode
from protocols.rabbitmq_stream import OffsetType as WireOffset
from protocols.rabbitmq_stream.chunk import decode_chunk
from tests.helpers.rabbitmq_stream_wire import RabbitWire, delivered

from .conftest import rstream_kwargs, run_client
from .rstream_support import Inbox, first, gateway_on, low_level, spec

OK = ResponseCode.OK
LIMIT_S = 20


async def _declare(wire: RabbitWire, stream: str, reference: str, pid: int = 1) -> None:
    reply = await wire.call(rs.DeclarePublisher(correlation_id=wire.corr(), publisher_id=pid,
                                                reference=reference, stream=stream))  # fmt: skip
    assert reply.code == OK, reply  # type: ignore[attr-defined]


async def _subscribe(
    wire: RabbitWire,
    stream: str,
    *,
    sid: int = 1,
    spec: OffsetSpec | None = None,
    credit: int = 100,
    properties: tuple[tuple[str, str], ...] | None = None,
) -> None:
    reply = await wire.call(rs.Subscribe(
        correlation_id=wire.corr(), subscription_id=sid, stream=stream,
        offset=spec or OffsetSpec(type=WireOffset.FIRST), credit=credit, properties=properties,
    ))  # fmt: skip
    assert reply.code == OK, reply  # type: ignore[attr-defined]


async def _create(wire: RabbitWire, stream: str) -> None:
    reply = await wire.call(rs.Create(correlation_id=wire.corr(), stream=stream))
    assert reply.code == OK, reply  # type: ignore[attr-defined]


# --- 1. deduplication inside one Publish frame ----------------------------------------------------


async def test_repeated_ids_in_one_frame_are_confirmed_and_stored_once(gateway: Running) -> None:
    with trio.fail_after(LIMIT_S):
        wire = await RabbitWire.connected(gateway)
        await _create(wire, "dup")
        await _declare(wire, "dup", "ref")
        ids = (1, 2, 3, 1, 2, 3)
        await wire.send(rs.Publish(publisher_id=1, messages=tuple(
            rs.PublishedMessage(publishing_id=i, data=f"m{i}-{n}".encode())
            for n, i in enumerate(ids)
        )))  # fmt: skip
        confirm = await wire.expect(rs.PublishConfirm)
        assert sorted(confirm.publishing_ids) == sorted(ids)  # every id, the repeats too (§5)
        sequence = await wire.call(rs.QueryPublisherSequence(
            correlation_id=wire.corr(), reference="ref", stream="dup"))  # fmt: skip
        assert sequence.sequence == 3  # type: ignore[attr-defined]
        await _subscribe(wire, "dup")
        deliver = await wire.expect(rs.Deliver)
        assert delivered(deliver) == [(0, b"m1-0"), (1, b"m2-1"), (2, b"m3-2")]
        await wire.aclose()


async def test_publish_deduplication_async_with_rstream(gateway: Running) -> None:
    """rstream's ``send`` gathers messages into one Publish frame: 1,2,3,1,2,3 in one frame."""

    async def scenario(host: str, port: int) -> list[bytes]:
        inbox = Inbox()
        async with Producer(**rstream_kwargs(port)) as producer:
            await producer.create_stream("dedup-async")
            consumer = Consumer(**rstream_kwargs(port))
            try:
                await consumer.subscribe("dedup-async", inbox, offset_specification=first())
                for _ in range(2):
                    for i in (1, 2, 3):
                        await producer.send("dedup-async", RawMessage(f"test_{i}".encode(), i),
                                            publisher_name="p")  # fmt: skip
                await inbox.until(3)
                for i in (2, 3, 4):
                    await producer.send("dedup-async", RawMessage(f"test_{i}".encode(), i),
                                        publisher_name="p")  # fmt: skip
                await inbox.until(4)
                # 1..3 again, waited for: confirmed, not stored; a fifth message would show here
                for i in (1, 2, 3):
                    await producer.send_wait("dedup-async", RawMessage(b"again", i),
                                             publisher_name="p")  # fmt: skip
                await producer.send_wait("dedup-async", RawMessage(b"test_5", 5),
                                         publisher_name="p")  # fmt: skip
                await inbox.until(5)
            finally:
                await consumer.close()
        return inbox.bodies

    bodies = await run_client(gateway, scenario)
    assert bodies == [b"test_1", b"test_2", b"test_3", b"test_4", b"test_5"]


# --- 3. chunks: a big Publish is several, and the header states RabbitMQ's trailer ---------------


async def test_a_big_publish_is_several_chunks_and_last_gets_the_last(gateway: Running) -> None:
    with trio.fail_after(LIMIT_S):
        wire = await RabbitWire.connected(gateway)
        await _create(wire, "big")
        await _declare(wire, "big", "")
        await wire.send(rs.Publish(publisher_id=1, messages=tuple(
            rs.PublishedMessage(publishing_id=i, data=str(i).encode()) for i in range(1, 5000)
        )))  # fmt: skip
        confirm = await wire.expect(rs.PublishConfirm)
        assert sorted(confirm.publishing_ids) == list(range(1, 5000))
        await _subscribe(wire, "big", spec=OffsetSpec(type=WireOffset.LAST), credit=1)
        last = decode_chunk((await wire.expect(rs.Deliver)).chunk)
        assert 0 < len(last.entries) < 4999  # RabbitMQ: `assert 4999 < 4999` was the gateway
        assert last.chunk_id + last.num_records == 4999
        assert last.entries[-1].data == b"4999"
        stats = await wire.call(rs.StreamStats(correlation_id=wire.corr(), stream="big"))
        assert dict(stats.stats)["last_chunk_id"] == last.chunk_id  # type: ignore[attr-defined]
        await wire.aclose()


async def test_offset_type_last_with_rstream(gateway: Running) -> None:
    """rstream's own ``test_offset_type_last``: a 4,999-message send_batch, then LAST."""

    async def scenario(host: str, port: int) -> tuple[int, bytes]:
        inbox = Inbox()
        async with Producer(**rstream_kwargs(port)) as producer:
            await producer.create_stream("last")
            await producer.send_batch("last", [str(i).encode() for i in range(1, 5000)])
        consumer = Consumer(**rstream_kwargs(port))
        try:
            await consumer.subscribe("last", inbox, offset_specification=spec(OffsetType.LAST),
                                     subscriber_name="test-subscriber")  # fmt: skip
            await inbox.until_offset(4998)
        finally:
            await consumer.close()
        return len(inbox.items), inbox.bodies[-1]

    count, last = await run_client(gateway, scenario)
    assert last == b"4999"
    assert count < 4999


async def test_deliver_header_states_the_publisher_trailer(gateway: Running) -> None:
    """rstream's own ``test_deliver`` (client level): reference ``test-reference`` -> RabbitMQ's
    trailer of one publisher-sequence record, 1 + 1 + 14 + 8 = 24 bytes (not sent, but stated)."""

    async def scenario(host: str, port: int) -> schema.Deliver:
        async with low_level(host, port) as client:
            await client.create_stream("deliver")
            await client.declare_publisher("deliver", "test-reference", 1)
            await client.subscribe("deliver", 1)
            waiter = client.wait_frame(schema.Deliver)
            await client.publish(
                [schema.Message(publishing_id=1, filter_value=None, data=b"test message")], 1
            )
            return await waiter

    got = await run_client(gateway, scenario)
    assert (got.subscription_id, got.magic_version, got.chunk_type) == (1, 80, 0)
    assert (got.num_entries, got.num_records, got.epoch, got.chunk_first_offset) == (1, 1, 1, 0)
    assert (got.chunk_crc, got.data_length, got.trailer_length) == (307778378, 16, 24)
    assert got.data == b"\x00\x00\x00\x0ctest message"


async def test_an_offset_past_the_end_starts_at_the_end(gateway: Running) -> None:
    """Osiris clamps a Subscribe offset past the last one to ``next`` (an empty stream: 0); a
    single active consumer's ConsumerUpdate answer "offset 10" on a new partition then still
    gets every message written after it (the client skips those below 10 itself)."""
    with trio.fail_after(LIMIT_S):
        wire = await RabbitWire.connected(gateway)
        await _create(wire, "past")
        await _declare(wire, "past", "")
        await wire.send(rs.Publish(publisher_id=1, messages=(
            rs.PublishedMessage(publishing_id=1, data=b"a"),
            rs.PublishedMessage(publishing_id=2, data=b"b"),
        )))  # fmt: skip
        await wire.expect(rs.PublishConfirm)
        await _subscribe(wire, "past", spec=OffsetSpec.offset(10))
        await wire.send(rs.Publish(publisher_id=1, messages=(
            rs.PublishedMessage(publishing_id=3, data=b"c"),
        )))  # fmt: skip
        assert delivered(await wire.expect(rs.Deliver)) == [(2, b"c")]
        await wire.aclose()


# --- 2. filtering (RabbitMQ 3.13) ----------------------------------------------------------------


async def _publish_v2(wire: RabbitWire, first_id: int, values: list[str | None]) -> None:
    await wire.send(rs.Publish(publisher_id=1, publish_version=2, messages=tuple(
        rs.PublishedMessage(publishing_id=first_id + i, data=f"{v}-{first_id + i}".encode(),
                            filter_value=v)
        for i, v in enumerate(values)
    )))  # fmt: skip
    confirm = await wire.expect(rs.PublishConfirm)
    assert len(confirm.publishing_ids) == len(values)


async def _entries_for(
    gateway: Running, stream: str, properties: tuple[tuple[str, str], ...]
) -> list[bytes]:
    """The entries of the chunks a subscriber with ``properties`` gets, up to the last one."""
    wire = await RabbitWire.connected(gateway)
    await _subscribe(wire, stream, properties=properties)
    chunks: list[bytes] = []
    while True:
        chunk = decode_chunk((await wire.expect(rs.Deliver)).chunk)
        chunks += [e.data for e in chunk.entries]
        if chunk.chunk_id + chunk.num_records >= 5:
            break
    await wire.aclose()
    return chunks


async def test_filter_values_choose_the_chunks_a_subscriber_gets(gateway: Running) -> None:
    with trio.fail_after(LIMIT_S):
        wire = await RabbitWire.connected(gateway)
        await _create(wire, "f")
        await _declare(wire, "f", "")
        await _publish_v2(wire, 1, ["eu", "eu"])  # offsets 0, 1
        await _publish_v2(wire, 3, ["us"])  # 2
        await _publish_v2(wire, 4, [None])  # 3: no value
        await _publish_v2(wire, 5, ["us", None])  # 4, 5 (the last chunk: ends the waits)
        await wire.aclose()
        # whole chunks, as RabbitMQ's bloom filter lets them through (the client filters the
        # entries); a chunk that holds none of the values is not sent
        assert await _entries_for(gateway, "f", (("filter.0", "us"),)) == [
            b"us-3",
            b"us-5",
            b"None-6",
        ]
        assert await _entries_for(
            gateway, "f", (("filter.0", "eu"), ("match-unfiltered", "true"))
        ) == [b"eu-1", b"eu-2", b"None-4", b"us-5", b"None-6"]
        assert await _entries_for(gateway, "f", ()) == [
            b"eu-1",
            b"eu-2",
            b"us-3",
            b"None-4",
            b"us-5",
            b"None-6",
        ]


async def test_filter_values_stay_out_of_other_protocols(gateway: Running) -> None:
    with trio.fail_after(LIMIT_S):
        wire = await RabbitWire.connected(gateway)
        await _create(wire, "fx")
        await _declare(wire, "fx", "ref")
        await _publish_v2(wire, 1, ["eu", None])
        await wire.aclose()
    assert gateway.backend is not None
    read = await gateway.backend.read(Read(topic=Topic("default", "fx"), partition=0, offset=0))
    messages = [m for b in read.batches for m in b.messages]
    assert [(m.value, m.headers) for m in messages] == [(b"eu-1", ()), (b"None-2", ())]


async def test_consume_filtering_with_rstream(gateway: Running) -> None:
    """rstream's ``test_consume_filtering`` and ``..._match_unfiltered``: a filtering producer's
    ten batches of ids 0..49 give a consumer of ``1`` ten messages; a plain producer's give it
    none (no value, and match-unfiltered false), while match-unfiltered true gets them all."""

    async def extract(message: AMQPMessage) -> str:
        return str(message.application_properties["id"])

    def batch() -> list[AMQPMessage]:
        return [AMQPMessage(body=f"hello: {i}".encode(), application_properties={"id": str(i)})
                for i in range(50)]  # fmt: skip

    async def scenario(host: str, port: int) -> tuple[int, int, int]:
        filtered, strict, loose = Inbox(), Inbox(), Inbox()
        others: list[Consumer] = []
        consumer = Consumer(**rstream_kwargs(port))
        await consumer.start()
        try:
            async with Producer(**rstream_kwargs(port), filter_value_extractor=extract) as p:
                await p.create_stream("filtered")
                await consumer.subscribe(
                    "filtered", filtered, decoder=amqp_decoder, offset_specification=first(),
                    filter_input=FilterConfiguration(
                        values_to_filter=["1"], match_unfiltered=False,
                        predicate=lambda m: m.application_properties[b"id"] == b"1",
                    ),
                )  # fmt: skip
                for _ in range(10):
                    await p.send_batch("filtered", batch())
                await filtered.until(10)
            async with Producer(**rstream_kwargs(port)) as plain:
                await plain.create_stream("plain")
                for _ in range(10):
                    await plain.send_batch("plain", batch())
            # one subscription per stream and Consumer in rstream: a Consumer each. All is
            # stored before they subscribe, and a Subscribe is answered once what it may get
            # of that was sent: the strict one's count is final when its subscribe returns.
            for inbox, unfiltered in ((strict, False), (loose, True)):
                other = Consumer(**rstream_kwargs(port))
                others.append(other)
                await other.start()
                await other.subscribe(
                    "plain", inbox, decoder=amqp_decoder, offset_specification=first(),
                    filter_input=FilterConfiguration(values_to_filter=["1"],
                                                     match_unfiltered=unfiltered),
                )  # fmt: skip
            await loose.until(500)
        finally:
            await consumer.close()
            for other in others:
                await other.close()
        return len(filtered.items), len(strict.items), len(loose.items)

    assert await run_client(gateway, scenario) == (10, 0, 500)


# --- 4. order on one connection: an answer never overtakes chunks already read -----------------


async def test_query_offset_comes_after_the_chunks_a_subscribe_sends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The RabbitMQ backend's barrier: Subscribe and QueryOffset sent together, the answer must
    come after the Deliver of what was there. A backend read that takes a while (a loaded
    machine, a remote backend) must not let the answer overtake it; each round reads slowly
    once (3 s, beyond what the listener used to wait), several rounds."""
    original = EmbeddedBackend.read
    slow: set[str] = set()

    async def read(self: EmbeddedBackend, cmd: Read) -> ReadResult:
        if cmd.topic.name in slow and cmd.max_wait_ms == 0:
            slow.discard(cmd.topic.name)
            await trio.sleep(3)
        return await original(self, cmd)

    monkeypatch.setattr(EmbeddedBackend, "read", read)
    with trio.fail_after(60):
        async with gateway_on(tmp_path / "data") as running:
            wire = await RabbitWire.connected(running)
            for n in range(3):
                stream = f"order-{n}"
                await _create(wire, stream)
                await _declare(wire, stream, "", pid=n)
                await wire.send(rs.Publish(publisher_id=n, messages=tuple(
                    rs.PublishedMessage(publishing_id=i, data=b"x") for i in range(1, 5)
                )))  # fmt: skip
                await wire.expect(rs.PublishConfirm)
                slow.add(stream)
                await wire.send(rs.Subscribe(
                    correlation_id=wire.corr(), subscription_id=n, stream=stream,
                    offset=OffsetSpec(type=WireOffset.FIRST), credit=1,
                ))  # fmt: skip
                await wire.send(rs.QueryOffset(correlation_id=wire.corr(), reference="barrier",
                                               stream=stream))  # fmt: skip
                answer = await wire.expect(rs.QueryOffsetResponse)
                before = [f for f in wire.received if isinstance(f, rs.Deliver)]
                assert [f.subscription_id for f in before] == [n], wire.received
                wire.received.clear()
                assert answer.code == ResponseCode.NO_OFFSET
            await wire.aclose()
