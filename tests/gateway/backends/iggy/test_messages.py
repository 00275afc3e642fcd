"""Messages through the Iggy backend to a chained streamgate: every field Iggy can carry comes
back, and a batch already in Iggy's wire form reaches the server as the same bytes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from gateway.app import Running
from gateway.backends.iggy.backend import IggyBackend
from gateway.listeners.iggy import data as iggy_data
from gateway.model import (
    Append,
    CommitOffset,
    CreateTopic,
    DeleteStream,
    DeleteTopic,
    FetchOffset,
    Header,
    HeaderKind,
    Message,
    MessageBatch,
    Read,
    Topic,
    WireBatch,
)
from gateway.translate.iggy.messages import WIRE_FORMAT
from protocols import iggy as wire
from protocols.iggy import frames_messages as fm
from protocols.iggy.batch import encode_batch
from protocols.iggy.headers import HeaderValue
from tests.helpers.iggy_upstream import started_backend, upstream_gateway

TOPIC = Topic("s", "t")
T0 = 1_700_000_000_000_000


async def read_all(backend: IggyBackend, p: int = 0) -> list[Message]:
    result = await backend.read(Read(topic=TOPIC, partition=p, offset=0))
    return [m for b in result.batches for m in b.messages]


async def test_every_field_iggy_carries_comes_back(tmp_path: Path) -> None:
    sent = [
        Message(value=b"plain"),
        Message(value=b"keyed", key=b"k1"),
        Message(
            value=b"typed",
            headers=(
                Header("a", b"1"),
                Header("s", "héllo".encode(), HeaderKind.STRING),
                Header("a", b"2"),
                Header("n", (7).to_bytes(8, "little"), HeaderKind.UINT64),
            ),
        ),
        Message(value=b"stamped", timestamp_us=T0 + 123_456),
        Message(value=b"id", id=(1 << 128) - 1),
        Message(value=bytes(range(256)) * 4, key=b"\x00\xff", id=42),
    ]
    with trio.fail_after(20):
        async with (
            upstream_gateway(tmp_path / "upstream") as upstream,
            started_backend(upstream.address("iggy")) as backend,
        ):
            await backend.create_topic(CreateTopic(topic=TOPIC, partitions=1))
            result = await backend.append(
                Append(topic=TOPIC, partition=0, batch=MessageBatch(sent))
            )
            assert (result.base_offset, result.count) == (0, len(sent))
            got = await read_all(backend)
    assert [m.offset for m in got] == list(range(len(sent)))
    for s, g in zip(sent, got, strict=True):
        assert (g.value, g.key, g.headers, g.id) == (s.value, s.key, s.headers, s.id)
        assert [h.kind for h in g.headers] == [h.kind for h in s.headers]
    assert got[3].timestamp_us == T0 + 123_456
    assert all(m.timestamp_us > T0 for m in got)  # the others were stamped when sent


def _iggy_batch(n: int) -> tuple[bytes, list[wire.Message]]:
    messages = [
        wire.Message(
            id=1000 + i,
            payload=b"wire %d" % i,
            headers=(wire.Header(key=HeaderValue.string("i"), value=HeaderValue.raw(b"%d" % i)),),
            origin_timestamp=T0 + i,
        )
        for i in range(n)
    ]
    # What a producer sends (iggy.md §6.1): no stamps, offset deltas 0..n-1.
    data = encode_batch(
        messages, partition_id=0, base_offset=0, base_timestamp=0, offset_deltas=range(n)
    )
    return data, messages


async def _upstream_batches(upstream: Running, p: int) -> list[MessageBatch]:
    assert upstream.backend is not None
    return list((await upstream.backend.read(Read(topic=TOPIC, partition=p, offset=0))).batches)


async def test_an_iggy_wire_batch_reaches_the_server_unchanged(tmp_path: Path) -> None:
    data, messages = _iggy_batch(5)
    stored = WireBatch(
        format=WIRE_FORMAT, data=data, count=5, first_timestamp_us=T0, max_timestamp_us=T0 + 4
    )
    batch = MessageBatch(wire=stored)
    with trio.fail_after(20):
        async with (
            upstream_gateway(tmp_path / "upstream") as upstream,
            started_backend(upstream.address("iggy")) as backend,
        ):
            await backend.create_topic(CreateTopic(topic=TOPIC, partitions=2))
            await backend.append(
                Append(topic=TOPIC, partition=1, batch=MessageBatch([Message(b"x")]))
            )
            result = await backend.append(Append(topic=TOPIC, partition=1, batch=batch))
            assert (result.base_offset, result.count) == (1, 5)
            assert not batch.decoded  # forwarded without looking inside
            [_, forwarded] = await _upstream_batches(upstream, 1)
            got = await read_all(backend, p=1)
    assert forwarded.wire is not None and forwarded.wire.format == WIRE_FORMAT
    assert forwarded.wire.data == data  # the very bytes the producer made
    assert [m.offset for m in got] == [0, 1, 2, 3, 4, 5]
    assert [m.value for m in got[1:]] == [m.payload for m in messages]
    assert [m.id for m in got[1:]] == [m.id for m in messages]
    assert [m.timestamp_us for m in got[1:]] == [m.origin_timestamp for m in messages]
    assert [m.headers for m in got[1:]] == [(Header("i", b"%d" % i),) for i in range(5)]


async def test_groups_keep_offsets_in_iggy_consumers(tmp_path: Path) -> None:
    """A canonical group is an Iggy single consumer of its name; ``iggy-consumer-<id>`` (what
    the listener makes of a single consumer) is that consumer again, so chained gateways agree
    on group names. Iggy stores the LAST consumed offset; 0 ("nothing") is no stored offset."""
    with trio.fail_after(20):
        async with (
            upstream_gateway(tmp_path / "upstream") as upstream,
            started_backend(upstream.address("iggy")) as backend,
        ):
            await backend.create_topic(CreateTopic(topic=TOPIC, partitions=1))
            for group, offset in (("kafka-group", 5), ("iggy-consumer-7", 3), ("g0", 0)):
                await backend.commit_offset(
                    CommitOffset(group=group, topic=TOPIC, partition=0, offset=offset)
                )
                fetched = await backend.fetch_offset(
                    FetchOffset(group=group, topic=TOPIC, partition=0)
                )
                assert fetched.offset == (offset or None)
            assert upstream.backend is not None
            upstream_offsets = {
                group: (
                    await upstream.backend.fetch_offset(
                        FetchOffset(group=group, topic=TOPIC, partition=0)
                    )
                ).offset
                for group in ("iggy-consumer-kafka-group", "iggy-consumer-7", "iggy-consumer-g0")
            }
    assert upstream_offsets == {
        "iggy-consumer-kafka-group": 5,
        "iggy-consumer-7": 3,
        "iggy-consumer-g0": None,
    }


async def test_a_server_without_confirmations(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A SendMessages reply may carry no confirmation (iggy.md §6.1; older servers send an
    empty body): base offsets then come from the partition's next offset after each append,
    appends to a partition one at a time, and concurrent appenders still see theirs."""
    send = iggy_data.HANDLERS[fm.SendMessages]

    async def unconfirmed(s: Any, cmd: fm.SendMessages) -> fm.SendMessagesResponse:
        await send(s, cmd)
        return fm.SendMessagesResponse()

    monkeypatch.setitem(iggy_data.HANDLERS, fm.SendMessages, unconfirmed)
    results: list[int] = []
    with trio.fail_after(20):
        async with (
            upstream_gateway(tmp_path / "upstream") as upstream,
            started_backend(upstream.address("iggy")) as backend,
        ):
            await backend.create_topic(CreateTopic(topic=TOPIC, partitions=1))
            # The first append learns that confirmations are missing (appends already in
            # flight by then may report a wrong base; none are here).
            first = await backend.append(
                Append(topic=TOPIC, partition=0, batch=MessageBatch([Message(b"first")]))
            )
            assert first.base_offset == 0

            async def producer(k: int) -> None:
                for j in range(5):
                    batch = MessageBatch([Message(b"%d-%d-%d" % (k, j, i)) for i in range(3)])
                    result = await backend.append(Append(topic=TOPIC, partition=0, batch=batch))
                    results.append(result.base_offset)

            async with trio.open_nursery() as nursery:
                for k in range(4):
                    nursery.start_soon(producer, k)
            got = await read_all(backend)
    by_offset = {m.offset: m.value for m in got}
    assert sorted(results) == list(range(1, 61, 3))
    for base in results:
        head = by_offset[base]
        assert [by_offset[base + i] for i in range(3)] == [head[:-1] + b"%d" % i for i in range(3)]


async def test_deleting_a_topic_forgets_what_was_learned_about_it(tmp_path: Path) -> None:
    """Per-partition knowledge (message sizes, log starts) goes with its topic or stream:
    kept, it would grow with every topic ever used."""
    with trio.fail_after(20):
        async with (
            upstream_gateway(tmp_path / "upstream") as upstream,
            started_backend(upstream.address("iggy")) as backend,
        ):
            other = Topic("s", "other")
            for topic in (TOPIC, other):
                await backend.create_topic(CreateTopic(topic=topic, partitions=2))
                for p in (0, 1):
                    batch = MessageBatch([Message(value=b"v")])
                    await backend.append(Append(topic=topic, partition=p, batch=batch))
                    await backend.read(Read(topic=topic, partition=p, offset=0))
                    await backend.read(Read(topic=topic, partition=p, offset=1))  # the end
            data = backend.data
            assert len(data.sizes) == len(data.log_starts) == 4
            await backend.delete_topic(DeleteTopic(topic=TOPIC))
            assert {k[1] for k in (*data.sizes, *data.log_starts)} == {"other"}
            await backend.delete_stream(DeleteStream(stream="s"))
            assert data.sizes == {} and data.log_starts == {} and data.locks == {}
