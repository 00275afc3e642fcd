"""apache-iggy 0.9.0: sending (partitioning, ids, typed user headers, binary and large
payloads), polling with every strategy, and consumer offsets (iggy.md §5.7, §6)."""

from __future__ import annotations

import time
from collections import Counter

import trio
from apache_iggy import (
    Consumer,
    HeaderKey,
    HeaderValue,
    Partitioning,
    PollingStrategy,
    SendMessage,
)
from xxhash import xxh32_intdigest

from gateway.app import Running
from protocols.iggy import CreateStream, CreateTopic, Era, PurgeTopic, SendMessages
from protocols.iggy.frames_messages import Message
from protocols.iggy.identifiers import PartitionId, PollingKind
from protocols.iggy.identifiers import PollingStrategy as WireStrategy
from tests.helpers.iggy_wire import IggyWire

from .conftest import (
    GROUP,
    SINGLE,
    Clients,
    StoredOffset,
    consumer_target,
    delete_offset,
    get_offset,
    offsets,
    payloads,
    poll,
    run_iggy,
    store_offset,
    texts,
    with_topic,
)

MIB = 1 << 20


async def test_ids_headers_and_payloads_round_trip(gateway: Running) -> None:
    scalars: dict[str, str | int | bool | bytes | float] = {
        "text": "héllo wörld",
        "count": 123456789,
        "negative": -5,
        "flag": True,
        "off": False,
        "raw": b"\x00\xff\x10",
        "ratio": 2.5,
    }
    typed = {
        "big": HeaderValue.UnsignedInt128(2**100 + 7),
        "signed": HeaderValue.Int64(-(1 << 40)),
        "precise": HeaderValue.Float64(1 / 3),
        "small": HeaderValue.UnsignedInt16(65535),
    }
    binary = bytes(range(256)) * 3
    big = bytes((i * 7 + 3) % 256 for i in range(MIB))
    sent = [
        SendMessage(b"plain", id=1),
        SendMessage(binary, user_headers=dict(scalars), id=2**128 - 1),
        SendMessage("text payload", user_headers=dict(typed), id=0xDEADBEEF),
        SendMessage(big, user_headers={"size": MIB}, id=4),
    ]

    async def scenario(clients: Clients) -> None:
        client = await with_topic(clients, partitions=3)
        confirmed = await client.send_messages("s", "t", Partitioning.partition_id(2), sent)
        assert [(c.partition_id, c.base_offset) for c in confirmed.confirmations] == [(2, 0)]
        got = await poll(client, "s", "t", PollingStrategy.First(), partition=2)
        assert offsets(got) == [0, 1, 2, 3]
        assert [m.partition_id() for m in got] == [2] * 4
        assert [m.id() for m in got] == [1, 2**128 - 1, 0xDEADBEEF, 4]
        assert payloads(got) == [b"plain", binary, b"text payload", big]
        assert [m.length() for m in got] == [5, len(binary), 12, MIB]
        assert got[0].user_headers() is None
        headers = got[1].user_headers()
        assert headers is not None and headers.to_scalar_dict() == scalars
        headers = got[2].user_headers()
        assert headers is not None
        assert dict(headers) == {HeaderKey.String(k): v for k, v in typed.items()}
        headers = got[3].user_headers()
        assert headers is not None and headers.to_scalar_dict() == {"size": MIB}
        # Nothing landed anywhere else.
        for partition in (0, 1):
            assert await poll(client, "s", "t", PollingStrategy.First(), partition=partition) == []

    await run_iggy(gateway, scenario)


async def test_typed_header_keys_round_trip(gateway: Running) -> None:
    # HeaderKey has the same kinds as HeaderValue; a key's kind is part of the header.
    keyed = {
        HeaderKey.Int32(7): HeaderValue.String("seven"),
        HeaderKey.Raw(b"\x01\x02"): HeaderValue.Bool(True),
        HeaderKey.UnsignedInt64(2**40): HeaderValue.Int8(-1),
    }

    async def scenario(clients: Clients) -> None:
        client = await with_topic(clients)
        await client.send_messages("s", "t", 0, [SendMessage(b"k", user_headers=dict(keyed))])
        (got,) = await poll(client, "s", "t", PollingStrategy.First())
        headers = got.user_headers()
        assert headers is not None and dict(headers) == keyed

    await run_iggy(gateway, scenario)


async def test_balanced_and_keyed_partitioning(gateway: Running) -> None:
    async def scenario(clients: Clients) -> None:
        client = await with_topic(clients, partitions=3)
        balanced: list[int] = []
        for i in range(6):
            confirmed = await client.send_messages(
                "s", "t", Partitioning.balanced(), [SendMessage(f"b{i}")]
            )
            balanced.extend(c.partition_id for c in confirmed.confirmations)
        assert Counter(balanced) == {0: 2, 1: 2, 2: 2}  # round-robin over every partition

        keyed: dict[str | bytes, set[int]] = {}
        for key in ("user-42", "user-7", b"\x00binary-key"):
            for i in range(4):
                confirmed = await client.send_messages(
                    "s", "t", Partitioning.messages_key(key), [SendMessage(f"{key!r}-{i}")]
                )
                keyed.setdefault(key, set()).update(c.partition_id for c in confirmed.confirmations)
        for key, partitions in keyed.items():
            raw = key.encode() if isinstance(key, str) else key
            assert partitions == {xxh32_intdigest(raw) % 3}, key  # the same partition each time

        found = await client.get_topic("s", "t")
        assert found is not None
        assert sum(p.messages_count for p in found.partitions) == 6 + 12
        for partition in range(3):
            got = await poll(client, "s", "t", PollingStrategy.First(), partition=partition)
            expected = [f"b{i}".encode() for i, p in enumerate(balanced) if p == partition]
            expected += [
                f"{key!r}-{i}".encode()
                for key, ps in keyed.items() if ps == {partition} for i in range(4)
            ]  # fmt: skip
            assert payloads(got) == expected
            assert offsets(got) == list(range(len(expected)))

    await run_iggy(gateway, scenario)


async def test_polling_strategies_and_counts(gateway: Running) -> None:
    async def scenario(clients: Clients) -> None:
        client = await with_topic(clients)
        await client.send_messages("s", "t", 0, texts(10))

        async def at(strategy: PollingStrategy, count: int = 100) -> list[int]:
            return offsets(await poll(client, "s", "t", strategy, count=count))

        assert await at(PollingStrategy.Offset(3), count=4) == [3, 4, 5, 6]
        assert await at(PollingStrategy.Offset(8)) == [8, 9]
        assert await at(PollingStrategy.Offset(10)) == []
        assert await at(PollingStrategy.First(), count=3) == [0, 1, 2]
        assert await at(PollingStrategy.First()) == list(range(10))
        assert await at(PollingStrategy.Last(), count=3) == [7, 8, 9]
        assert await at(PollingStrategy.Last(), count=1) == [9]
        assert await at(PollingStrategy.Next(), count=2) == [0, 1]  # nothing stored: from 0
        assert await at(PollingStrategy.Next(), count=2) == [0, 1]  # without auto-commit

        got = await poll(client, "s", "t", PollingStrategy.Offset(5), count=1)
        assert payloads(got) == [b"m5"]

    await run_iggy(gateway, scenario)


async def test_poll_by_timestamp(gateway: Running) -> None:
    async def scenario(clients: Clients) -> None:
        client = await with_topic(clients)
        await client.send_messages("s", "t", 0, texts(4, "a"))
        boundary_us = time.time_ns() // 1000
        await client.send_messages("s", "t", 0, texts(3, "b"))
        after_us = time.time_ns() // 1000

        everything = await poll(client, "s", "t", PollingStrategy.First())
        stamps = [m.timestamp() for m in everything]
        assert all(s < boundary_us for s in stamps[:4])
        assert all(boundary_us <= s <= after_us for s in stamps[4:])

        got = await poll(client, "s", "t", PollingStrategy.Timestamp(boundary_us))
        assert payloads(got) == [b"b0", b"b1", b"b2"]
        assert offsets(got) == [4, 5, 6]
        got = await poll(client, "s", "t", PollingStrategy.Timestamp(boundary_us), count=2)
        assert offsets(got) == [4, 5]
        assert await poll(client, "s", "t", PollingStrategy.Timestamp(after_us + 1)) == []
        got = await poll(client, "s", "t", PollingStrategy.Timestamp(stamps[0]))
        assert offsets(got) == list(range(7))

    await run_iggy(gateway, scenario)


async def test_auto_commit_and_next_resume(gateway: Running) -> None:
    async def scenario(clients: Clients) -> None:
        client = await with_topic(clients)
        await client.send_messages("s", "t", 0, texts(10))
        me = Consumer.Single("resumer")

        async def next_batch(count: int) -> list[int]:
            got = await poll(
                client, "s", "t", PollingStrategy.Next(), count=count, consumer=me,
                auto_commit=True,
            )  # fmt: skip
            return offsets(got)

        assert await next_batch(4) == [0, 1, 2, 3]
        assert await next_batch(4) == [4, 5, 6, 7]
        stored = await get_offset(client, consumer_target(SINGLE, "resumer", "s", "t", 0))
        assert stored == StoredOffset(partition_id=0, current_offset=9, stored_offset=7)
        assert await next_batch(100) == [8, 9]
        assert await next_batch(100) == []
        await client.send_messages("s", "t", 0, texts(2, "late"))
        assert await next_batch(100) == [10, 11]
        # Another consumer has its own position.
        other = await poll(client, "s", "t", PollingStrategy.Next(), count=3, auto_commit=True)
        assert offsets(other) == [0, 1, 2]

    await run_iggy(gateway, scenario)


async def test_single_consumer_offsets(gateway: Running) -> None:
    async def scenario(clients: Clients) -> None:
        client = await with_topic(clients, partitions=2)
        await client.send_messages("s", "t", 1, texts(10))
        target = consumer_target(SINGLE, "keeper", "s", "t", 1)
        me = Consumer.Single("keeper")

        assert await get_offset(client, target) is None  # nothing stored yet: empty body
        await store_offset(client, target, 5)
        assert await get_offset(client, target) == StoredOffset(1, 9, 5)
        got = await poll(client, "s", "t", PollingStrategy.Next(), partition=1, consumer=me)
        assert offsets(got) == [6, 7, 8, 9]  # Next resumes after the stored offset
        # Partition 0 of the same consumer is separate.
        assert await get_offset(client, consumer_target(SINGLE, "keeper", "s", "t", 0)) is None

        await delete_offset(client, target)
        assert await get_offset(client, target) is None
        got = await poll(client, "s", "t", PollingStrategy.Next(), partition=1, consumer=me)
        assert offsets(got) == list(range(10))

    await run_iggy(gateway, scenario)


async def test_consumer_group_offsets(gateway: Running) -> None:
    async def scenario(clients: Clients) -> None:
        client = await with_topic(clients, partitions=2)
        await client.send_messages("s", "t", 0, texts(6))
        await client.create_consumer_group("s", "t", "offset-group")
        await client.join_consumer_group("s", "t", "offset-group")
        target = consumer_target(GROUP, "offset-group", "s", "t", 0)
        group = Consumer.Group("offset-group")

        assert await get_offset(client, target) is None
        got = await poll(
            client, "s", "t", PollingStrategy.Next(), count=2, consumer=group, auto_commit=True
        )
        assert offsets(got) == [0, 1]
        assert await get_offset(client, target) == StoredOffset(0, 5, 1)
        await store_offset(client, target, 3)
        assert await get_offset(client, target) == StoredOffset(0, 5, 3)
        got = await poll(client, "s", "t", PollingStrategy.Next(), consumer=group)
        assert offsets(got) == [4, 5]
        # The group's offset is not a single consumer's of the same name.
        single = consumer_target(SINGLE, "offset-group", "s", "t", 0)
        assert await get_offset(client, single) is None

        await delete_offset(client, target)
        assert await get_offset(client, target) is None

        # The high-level consumer's own offset calls land on the same group offset.
        await client.send_messages("s", "t", 1, texts(4))
        consumer = await client.consumer_group(
            "offset-group", "s", "t", create_consumer_group_if_not_exists=False
        )
        on_one = consumer_target(GROUP, "offset-group", "s", "t", 1)
        await consumer.store_offset(2, 1)
        assert await get_offset(client, on_one) == StoredOffset(1, 3, 2)
        await consumer.delete_offset(1)
        assert await get_offset(client, on_one) is None

    await run_iggy(gateway, scenario)


async def test_poll_replies_carry_the_partition_s_current_offset(gateway: Running) -> None:
    """Whatever a poll finds, its reply's current_offset is the partition's last offset (§6.3):
    a poll that finds messages is answered from its read alone, one that finds none (at or past
    the end, below the log start after a purge) from the partition's end."""

    def strategy(kind: PollingKind, value: int = 0) -> WireStrategy:
        return WireStrategy(kind=kind, value=value)

    with trio.fail_after(20):
        wire = await IggyWire.logged_in(gateway, Era.C)
        await wire.ok(CreateStream(name="current"))
        await wire.ok(CreateTopic(stream_id="current", name="t", partitions_count=1))
        messages = tuple(Message(id=i + 1, payload=b"m%d" % i) for i in range(10))
        await wire.ok(SendMessages(stream_id="current", topic_id="t",
                                   partitioning=PartitionId(id=0), messages=messages))  # fmt: skip

        async def polled(
            kind: PollingKind, value: int = 0, count: int = 4
        ) -> tuple[int, list[int]]:
            body = await wire.poll("current", "t", 0, strategy=strategy(kind, value), count=count)
            return body.current_offset, [m.offset for m in body.messages]

        assert await polled(PollingKind.OFFSET, 3) == (9, [3, 4, 5, 6])
        assert await polled(PollingKind.FIRST) == (9, [0, 1, 2, 3])
        assert await polled(PollingKind.NEXT) == (9, [0, 1, 2, 3])  # nothing stored
        assert await polled(PollingKind.LAST, count=2) == (9, [8, 9])
        assert await polled(PollingKind.OFFSET, 9) == (9, [9])
        assert await polled(PollingKind.OFFSET, 10) == (9, [])  # at the end
        assert await polled(PollingKind.OFFSET, 500) == (9, [])  # past it
        assert await polled(PollingKind.OFFSET, 3, count=0) == (9, [])

        await wire.ok(PurgeTopic(stream_id="current", topic_id="t"))
        assert await polled(PollingKind.FIRST) == (9, [])  # below the log start, nothing after
        more = tuple(Message(id=20 + i, payload=b"n%d" % i) for i in range(2))
        await wire.ok(SendMessages(stream_id="current", topic_id="t",
                                   partitioning=PartitionId(id=0), messages=more))  # fmt: skip
        assert await polled(PollingKind.FIRST) == (11, [10, 11])
        assert await polled(PollingKind.OFFSET, 0) == (11, [10, 11])
        await wire.aclose()
