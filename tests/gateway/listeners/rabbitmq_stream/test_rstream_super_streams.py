"""rstream 1.1.1 super streams through the gateway (rabbitmq-stream.md §5 Streams and topology):
CreateSuperStream / DeleteSuperStream, Partitions and Route, hash routing (murmur3 as rstream
computes it) and key routing, and a SuperStreamConsumer reading every partition."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest
from rstream import (
    RouteType,
    StreamDoesNotExist,
    SuperStreamConsumer,
    SuperStreamProducer,
    amqp_decoder,
)
from rstream import schema as rs_schema
from rstream.exceptions import StreamAlreadyExists
from rstream.superstream import HashRoutingMurmurStrategy, Metadata

from gateway.app import Running

from .conftest import rstream_kwargs, run_client
from .rstream_support import (
    Confirms,
    Inbox,
    amqp,
    body_of,
    first,
    hash_partition,
    key_of,
    low_level,
)


def super_producer(
    port: int, name: str, routing: RouteType = RouteType.Hash
) -> SuperStreamProducer:
    return SuperStreamProducer(
        **rstream_kwargs(port), super_stream=name, routing=routing, routing_extractor=key_of
    )


async def create_super_stream(port: int, name: str, **how: Any) -> None:
    """With an instance of its own: rstream closes the locator connection after creating."""
    creator = super_producer(port, name)
    try:
        await creator.create_super_stream(name, **how)
    finally:
        await creator.close()


async def read_super_stream(port: int, name: str, count: int) -> Inbox:
    inbox = Inbox()
    consumer = SuperStreamConsumer(**rstream_kwargs(port), super_stream=name)
    try:
        await consumer.subscribe(inbox, decoder=amqp_decoder, offset_specification=first())
        await inbox.until(count)
    finally:
        await consumer.close()
    return inbox


def per_partition(inbox: Inbox) -> dict[str, list[bytes]]:
    found: dict[str, list[bytes]] = {}
    for g in inbox.items:
        found.setdefault(g.stream, []).append(body_of(g.message))
    return found


async def test_hash_routing_follows_rstreams_murmur3(gateway: Running) -> None:
    keys = [f"customer-{i}" for i in range(12)]
    sent = [(key, f"{key}/{n}".encode()) for n in range(2) for key in keys]
    partitions = ["orders-0", "orders-1", "orders-2"]
    expected: dict[str, list[bytes]] = {}
    for key, body in sent:
        expected.setdefault(partitions[hash_partition(key, 3)], []).append(body)
    assert len(expected) == 3  # the keys spread over every partition

    async def scenario(host: str, port: int) -> None:
        await create_super_stream(port, "orders", n_partitions=3)
        async with low_level(host, port) as client:
            assert await client.partitions("orders") == partitions
            assert await client.route("1", "orders") == ["orders-1"]

        confirms = Confirms()
        async with super_producer(port, "orders") as producer:
            for key, body in sent:
                await producer.send(
                    amqp(body, application_properties={"key": key}), on_publish_confirm=confirms
                )
            statuses = await confirms.until(len(sent))
        assert len(statuses) == len(sent) and all(ok for _, ok, _ in statuses)

        inbox = await read_super_stream(port, "orders", len(sent))
        assert per_partition(inbox) == expected  # and in publishing order within each
        # Every message exactly once: each partition's offsets are 0..n-1, no repeats.
        for stream, bodies in expected.items():
            assert [g.offset for g in inbox.items if g.stream == stream] == list(range(len(bodies)))
        assert len(inbox.items) == len(sent)

    await run_client(gateway, scenario)


async def test_key_routing_with_binding_keys(gateway: Running) -> None:
    regions = ["eu", "us", "ap"]

    async def scenario(host: str, port: int) -> None:
        await create_super_stream(port, "regions", binding_keys=regions)
        async with low_level(host, port) as client:
            assert await client.partitions("regions") == [f"regions-{r}" for r in regions]
            for region in regions:
                assert await client.route(region, "regions") == [f"regions-{region}"]
            assert await client.route("nowhere", "regions") == []

        # rstream 1.1.1 caches the first Route answer and uses it for every later key (one
        # producer sending "us" then "eu" puts both in regions-us): one producer per key.
        confirms = Confirms()
        for i, region in enumerate(("us", "eu")):
            async with super_producer(port, "regions", RouteType.Key) as producer:
                for n in range(3):
                    message = amqp(f"{region}/{n}".encode(), application_properties={"key": region})
                    await producer.send(message, on_publish_confirm=confirms)
                await confirms.until(3 * (i + 1))
        assert all(ok for _, ok, _ in confirms.statuses)

        inbox = await read_super_stream(port, "regions", 6)
        assert per_partition(inbox) == {
            "regions-us": [b"us/0", b"us/1", b"us/2"],
            "regions-eu": [b"eu/0", b"eu/1", b"eu/2"],
        }

    await run_client(gateway, scenario)


async def test_missing_super_stream(gateway: Running) -> None:
    async def scenario(host: str, port: int) -> None:
        async with low_level(host, port) as client:
            partitions = await client.sync_request(
                rs_schema.SuperStreamPartitions(1_000, super_stream="nope"),
                rs_schema.SuperStreamPartitionsResponse,
                raise_exception=False,
            )
            assert (partitions.response_code, partitions.streams) == (2, [])
            route = await client.sync_request(
                rs_schema.SuperStreamRoute(1_001, routing_key="0", super_stream="nope"),
                rs_schema.SuperStreamRouteResponse,
                raise_exception=False,
            )
            assert (route.response_code, route.streams) == (2, [])
        # What an application sees: rstream turns the empty answer into a ValueError.
        consumer = SuperStreamConsumer(**rstream_kwargs(port), super_stream="nope")
        try:
            with pytest.raises(ValueError, match="superstream doesn't probably exist"):
                await consumer.subscribe(Inbox())
        finally:
            await consumer.close()
        deleter = super_producer(port, "nope")
        try:
            with pytest.raises(StreamDoesNotExist):
                await deleter.delete_super_stream("nope")
            await deleter.delete_super_stream("nope", missing_ok=True)
        finally:
            await deleter.close()

    await run_client(gateway, scenario)


async def test_create_and_delete_super_stream(gateway: Running) -> None:
    async def scenario(host: str, port: int) -> None:
        await create_super_stream(port, "gone", n_partitions=2)
        with pytest.raises(StreamAlreadyExists):
            await create_super_stream(port, "gone", n_partitions=2)
        async with low_level(host, port) as client:
            assert await client.stream_exists("gone-0")
            assert await client.stream_exists("gone-1")
            assert not await client.stream_exists("gone")  # a super stream is not a stream
            # A partition's name is taken by the super stream...
            with pytest.raises(StreamAlreadyExists):
                await client.create_stream("gone-1")
            # ...and a plain stream keeps its name, whole or as a would-be partition.
            await client.create_stream("solo-0")
            for name in ("solo", "solo-0"):
                with pytest.raises(StreamAlreadyExists):
                    await client.create_super_stream(name, [f"{name}-0"], ["0"])

        deleter = super_producer(port, "gone")
        try:
            await deleter.delete_super_stream("gone")
        finally:
            await deleter.close()
        async with low_level(host, port) as client:
            assert not await client.stream_exists("gone-0")
            assert not await client.stream_exists("gone-1")
            assert await client.partitions("gone") == []
            assert await client.stream_exists("solo-0")
            # The names are free again.
            await client.create_super_stream(
                "gone", ["gone-a", "gone-b", "gone-c"], ["a", "b", "c"]
            )
            assert await client.partitions("gone") == ["gone-a", "gone-b", "gone-c"]

    await run_client(gateway, scenario)


def test_hash_partition_is_rstreams_choice() -> None:
    # The helper is rstream's formula; pin it against rstream's own strategy object.
    class Fixed(Metadata):
        async def partitions(self) -> list[str]:
            return ["p0", "p1", "p2", "p3", "p4"]

        async def routes(self, routing_key: str) -> list[str]:
            return []

    async def route(key: str) -> list[str]:
        async def extract(_: object) -> str:
            return key

        return await HashRoutingMurmurStrategy(extract).route(b"", Fixed())

    picks = {key: asyncio.run(route(key)) for key in (f"k{i}" for i in range(40))}
    assert all(picks[key] == [f"p{hash_partition(key, 5)}"] for key in picks)
    assert len(Counter(p[0] for p in picks.values())) == 5
