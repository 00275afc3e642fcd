"""rstream 1.1.1 publishing through the gateway (rabbitmq-stream.md §5 Publishing, §8): confirms
for send_wait / send_batch / send, AMQP 1.0 messages read back exactly, big and binary bodies,
sub-entry batches (gzip and uncompressed), deduplication by publisher name and the publisher
sequence across a gateway restart."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from rstream import (
    AMQPMessage,
    CompressionType,
    Consumer,
    OffsetType,
    Producer,
    Properties,
    RawMessage,
    StreamDoesNotExist,
    amqp_decoder,
)
from rstream.exceptions import PreconditionFailed

from gateway.app import Running
from gateway.model import Read, Topic
from gateway.translate.rabbitmq_stream.chunks import WIRE_FORMAT, wire_entries
from protocols.rabbitmq_stream.chunk import SubEntryBatch

from .conftest import rstream_kwargs, run_client
from .rstream_support import Confirms, Inbox, amqp, first, gateway_on, low_level, spec

KIB = 1024


async def read_all(port: int, stream: str, count: int, *, decode: bool = True) -> Inbox:
    """Every message of ``stream`` from the first, once ``count`` have come."""
    inbox = Inbox()
    consumer = Consumer(**rstream_kwargs(port))
    try:
        await consumer.subscribe(
            stream, inbox, decoder=amqp_decoder if decode else None, offset_specification=first()
        )
        await inbox.until(count)
    finally:
        await consumer.close()
    return inbox


async def test_confirmed_messages_read_back_exactly(gateway: Running) -> None:
    binary = bytes(range(256)) * 4
    big = bytes((i * 31 + 7) % 256 for i in range(500 * KIB))
    app_props = {
        "text": "héllo",
        "count": 42,
        "negative": -7,
        "large": 2**40,
        "on": True,
        "off": False,
    }
    created = 1_700_000_000_123
    typed = amqp(
        binary,
        application_properties=app_props,
        properties=Properties(message_id="id-1", creation_time=created, content_type="x/bin"),
    )
    batch = [amqp(f"b{i}".encode(), application_properties={"i": i}) for i in range(3)]

    async def scenario(host: str, port: int) -> None:
        confirms = Confirms()
        async with Producer(**rstream_kwargs(port)) as producer:
            await producer.create_stream("s")
            assert await producer.send_wait("s", typed, publisher_name="pub") == 1
            ids = await producer.send_batch(
                "s", batch, publisher_name="pub", on_publish_confirm=confirms
            )
            assert sorted(ids) == [2, 3, 4]
            assert await confirms.until(3) == [(2, True, 0), (3, True, 0), (4, True, 0)]
            assert await producer.send_wait("s", amqp(big), publisher_name="pub") == 5
            # send() buffers and publishes from rstream's timer; the callback still fires.
            await producer.send("s", amqp(b"later"), on_publish_confirm=confirms)
            assert await confirms.until(4) == [(i, True, 0) for i in range(2, 7) if i != 5]

        inbox = await read_all(port, "s", 6)
        assert inbox.offsets == [0, 1, 2, 3, 4, 5]
        assert inbox.bodies == [binary, b"b0", b"b1", b"b2", big, b"later"]
        got: AMQPMessage = inbox.items[0].message
        # rstream's decoder gives AMQP strings back as bytes.
        assert got.application_properties == {
            k.encode(): v.encode() if isinstance(v, str) else v for k, v in app_props.items()
        }
        assert type(got.application_properties[b"on"]) is bool
        assert got.properties.message_id == b"id-1"
        assert got.properties.creation_time == created
        assert got.properties.content_type == b"x/bin"
        assert [g.message.application_properties for g in inbox.items[1:4]] == [
            {b"i": i} for i in range(3)
        ]

    await run_client(gateway, scenario)


async def test_raw_entries_are_stored_verbatim(gateway: Running) -> None:
    # Entries that are not AMQP messages at all (§8: the stream protocol treats them as opaque).
    payloads = [b"", b"\x00", b"\xff" * 300, b"raw-3"]

    async def scenario(host: str, port: int) -> None:
        async with Producer(**rstream_kwargs(port)) as producer:
            await producer.create_stream("raw")
            for payload in payloads:
                await producer.send_wait("raw", RawMessage(payload))
        inbox = await read_all(port, "raw", len(payloads), decode=False)
        assert inbox.bodies == payloads

    await run_client(gateway, scenario)


async def test_duplicates_are_confirmed_but_not_stored(gateway: Running) -> None:
    async def scenario(host: str, port: int) -> None:
        confirms = Confirms()
        async with Producer(**rstream_kwargs(port)) as producer:
            await producer.create_stream("s")
            first_five = [RawMessage(f"p{i}".encode(), publishing_id=i) for i in range(1, 6)]
            await producer.send_batch(
                "s", first_five, publisher_name="dedup", on_publish_confirm=confirms
            )
            assert await confirms.until(5) == [(i, True, 0) for i in range(1, 6)]
            # 3..5 again (different bodies, same ids) and a new 6: all four confirmed.
            again = [RawMessage(f"dup{i}".encode(), publishing_id=i) for i in (3, 4, 5)]
            await producer.send_batch(
                "s",
                [*again, RawMessage(b"p6", publishing_id=6)],
                publisher_name="dedup",
                on_publish_confirm=confirms,
            )
            assert await confirms.until(9) == [(i, True, 0) for i in (1, 2, 3, 3, 4, 4, 5, 5, 6)]
            # A lone old id is confirmed too (send_wait waits for exactly that confirm).
            assert (
                await producer.send_wait(
                    "s", RawMessage(b"dup1", publishing_id=1), publisher_name="dedup"
                )
                == 1
            )
            # The same reference cannot have two live publishers on one stream. (Through a
            # Producer the refusal surfaces as PublisherDoesNotExist: rstream deletes the
            # publisher it failed to declare and raises the answer to that instead.)
            async with low_level(host, port) as rival:
                with pytest.raises(PreconditionFailed):
                    await rival.declare_publisher("s", "dedup", publisher_id=0)

        async with low_level(host, port) as client:
            assert await client.query_publisher_sequence("s", "dedup") == 6
            assert await client.query_publisher_sequence("s", "unknown-ref") == 0

        # A new producer under the same name goes on after the stored sequence.
        async with Producer(**rstream_kwargs(port)) as producer:
            assert await producer.send_wait("s", RawMessage(b"p7"), publisher_name="dedup") == 7

        # Had any duplicate been stored, it would come before p7.
        inbox = await read_all(port, "s", 7, decode=False)
        assert inbox.bodies == [b"p1", b"p2", b"p3", b"p4", b"p5", b"p6", b"p7"]
        assert inbox.offsets == list(range(7))

    await run_client(gateway, scenario)


async def test_publisher_sequence_survives_a_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"

    async def before(host: str, port: int) -> None:
        async with Producer(**rstream_kwargs(port)) as producer:
            await producer.create_stream("kept")
            ids = await producer.send_batch(
                "kept", [RawMessage(f"p{i}".encode()) for i in range(1, 5)], publisher_name="ref"
            )
            assert sorted(ids) == [1, 2, 3, 4]
            assert await producer.send_wait("kept", RawMessage(b"p5"), publisher_name="ref") == 5

    async def after(host: str, port: int) -> None:
        async with low_level(host, port) as client:
            assert await client.query_publisher_sequence("kept", "ref") == 5
        async with Producer(**rstream_kwargs(port)) as producer:
            # An old id is still recognised as a duplicate; a fresh one continues at 6.
            assert (
                await producer.send_wait(
                    "kept", RawMessage(b"dup3", publishing_id=3), publisher_name="ref"
                )
                == 3
            )
            assert await producer.send_wait("kept", RawMessage(b"p6"), publisher_name="ref") == 6
        inbox = await read_all(port, "kept", 6, decode=False)
        assert inbox.bodies == [b"p1", b"p2", b"p3", b"p4", b"p5", b"p6"]

    async with gateway_on(data) as running:
        await run_client(running, before)
    async with gateway_on(data) as running:
        await run_client(running, after)


async def test_publishing_to_a_missing_stream_fails(gateway: Running) -> None:
    async def scenario(host: str, port: int) -> None:
        async with Producer(**rstream_kwargs(port)) as producer:
            with pytest.raises(StreamDoesNotExist):
                await producer.send_wait("missing", RawMessage(b"x"))

    await run_client(gateway, scenario)


async def test_sub_entry_batches_are_delivered_record_by_record(gateway: Running) -> None:
    gzipped = [amqp(f"g{i}".encode(), application_properties={"i": i}) for i in range(5)]
    plain = [amqp(f"n{i}".encode()) for i in range(3)]

    async def scenario(host: str, port: int) -> None:
        confirms = Confirms()
        async with Producer(**rstream_kwargs(port)) as producer:
            await producer.create_stream("sub")
            await producer.send_sub_entry(
                "sub",
                gzipped,
                CompressionType.Gzip,
                publisher_name="sub",
                on_publish_confirm=confirms,
            )
            await producer.send_sub_entry(
                "sub", plain, CompressionType.No, publisher_name="sub", on_publish_confirm=confirms
            )
            # One confirm per sub-entry batch, for its last publishing id.
            assert await confirms.until(2) == [(5, True, 0), (8, True, 0)]
            assert await producer.send_wait("sub", amqp(b"single"), publisher_name="sub") == 9

        inbox = await read_all(port, "sub", 9)
        assert inbox.offsets == list(range(9))
        assert inbox.bodies == [b"g0", b"g1", b"g2", b"g3", b"g4", b"n0", b"n1", b"n2", b"single"]
        assert [g.message.application_properties for g in inbox.items[:5]] == [
            {b"i": i} for i in range(5)
        ]

        # From an offset inside the gzip batch: the chunk starts at the batch (it is stored as
        # sent) and rstream drops the records before the offset asked for (§6).
        middle = Inbox()
        consumer = Consumer(**rstream_kwargs(port))
        try:
            await consumer.subscribe(
                "sub", middle, decoder=amqp_decoder, offset_specification=spec(OffsetType.OFFSET, 3)
            )
            await middle.until(6)
        finally:
            await consumer.close()
        assert middle.offsets == [3, 4, 5, 6, 7, 8]
        assert middle.bodies == [b"g3", b"g4", b"n0", b"n1", b"n2", b"single"]

    await run_client(gateway, scenario)
    # Stored as published: the gzip batch is kept compressed, one entry holding five records.
    assert gateway.backend is not None
    read = await gateway.backend.read(
        Read(topic=Topic("default", "sub"), partition=0, offset=0, whole_batches=True)
    )
    stored = read.batches[0].wire
    assert stored is not None and (stored.format, stored.count) == (WIRE_FORMAT, 5)
    (entry,) = wire_entries(stored)
    assert isinstance(entry, SubEntryBatch)
    assert (entry.compression, entry.record_count) == (CompressionType.Gzip.value, 5)
    records = b"".join(len(bytes(m)).to_bytes(4, "big") + bytes(m) for m in gzipped)
    assert entry.data[:2] == b"\x1f\x8b" and gzip.decompress(entry.data) == records
