"""rstream 1.1.1 stream topology through the gateway (rabbitmq-stream.md §5 Streams and
topology): Create with arguments, Delete, stream_exists, and the MetadataUpdate that publishers
and consumers of a deleted stream receive."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from rstream import (
    Consumer,
    OnClosedErrorInfo,
    Producer,
    RawMessage,
    StreamDoesNotExist,
)
from rstream.exceptions import PreconditionFailed, StreamAlreadyExists
from rstream.recovery import BackOffRecoveryStrategy

from gateway.app import Running
from gateway.model import DescribeTopic, Topic, TopicConfig

from .conftest import rstream_kwargs, run_client
from .rstream_support import WAIT_S, Inbox, first

VHOST_STREAM = "default"  # the canonical stream behind the virtual host "/"


async def config_of(running: Running, name: str) -> TopicConfig:
    assert running.backend is not None
    found = await running.backend.describe_topic(DescribeTopic(topic=Topic(VHOST_STREAM, name)))
    return found.info.config


async def test_create_stream_with_arguments(gateway: Running) -> None:
    arguments: dict[str, Any] = {
        "max-length-bytes": 10_000_000,
        "max-age": "1h",
        "stream-max-segment-size-bytes": 1_000_000,
        "initial-cluster-size": 1,  # understood by RabbitMQ, only kept here
    }

    async def scenario(host: str, port: int) -> None:
        async with Producer(**rstream_kwargs(port)) as producer:
            assert not await producer.stream_exists("args")
            await producer.create_stream("args", arguments=arguments)
            assert await producer.stream_exists("args")
            await producer.create_stream("args", arguments=arguments, exists_ok=True)
            with pytest.raises(StreamAlreadyExists):
                await producer.create_stream("args")
            # The stream works as any other.
            assert await producer.send_wait("args", RawMessage(b"x")) == 1

    await run_client(gateway, scenario)
    config = await config_of(gateway, "args")
    assert config.retention_bytes == 10_000_000
    assert config.retention_ms == 3_600_000
    assert config.segment_bytes == 1_000_000
    assert config.extra.get("rabbitmq.initial-cluster-size") == "1"


@pytest.mark.parametrize(
    "arguments",
    [
        {"max-age": "forever"},
        {"max-age": "1w"},
        {"max-length-bytes": "lots"},
        {"max-length-bytes": -1},
        {"stream-max-segment-size-bytes": "1.5"},
    ],
    ids=["max-age-word", "max-age-unit", "length-word", "length-negative", "segment-float"],
)
async def test_bad_argument_values_are_refused(gateway: Running, arguments: dict[str, Any]) -> None:
    async def scenario(host: str, port: int) -> None:
        async with Producer(**rstream_kwargs(port)) as producer:
            with pytest.raises(PreconditionFailed):
                await producer.create_stream("bad", arguments=arguments)
            assert not await producer.stream_exists("bad")

    await run_client(gateway, scenario)


async def test_delete_stream(gateway: Running) -> None:
    async def scenario(host: str, port: int) -> None:
        async with Producer(**rstream_kwargs(port)) as producer:
            await producer.create_stream("doomed")
            await producer.send_wait("doomed", RawMessage(b"old"))
            await producer.delete_stream("doomed")
            assert not await producer.stream_exists("doomed")
            with pytest.raises(StreamDoesNotExist):
                await producer.delete_stream("doomed")
            await producer.delete_stream("doomed", missing_ok=True)
        async with Consumer(**rstream_kwargs(port)) as consumer:
            assert not await consumer.stream_exists("doomed")
            # Created again, it starts empty.
            await consumer.create_stream("doomed")
            assert await consumer.stream_exists("doomed")
        async with Producer(**rstream_kwargs(port)) as producer:
            await producer.send_wait("doomed", RawMessage(b"new"))
        inbox = Inbox()
        async with Consumer(**rstream_kwargs(port)) as consumer:
            await consumer.subscribe("doomed", inbox, offset_specification=first())
            await inbox.until(1)
        assert (inbox.offsets, inbox.bodies) == ([0], [b"new"])

    await run_client(gateway, scenario)


async def test_deleting_a_stream_in_use_tells_its_clients(gateway: Running) -> None:
    async def scenario(host: str, port: int) -> None:
        closed: dict[str, OnClosedErrorInfo] = {}
        events = {"consumer": asyncio.Event(), "producer": asyncio.Event()}

        def on_close(who: str) -> Any:
            def handler(info: OnClosedErrorInfo) -> None:
                closed[who] = info
                events[who].set()

            return handler

        # rstream's recovery (re-subscribe / re-declare after a delay) stays off.
        consumer = Consumer(**rstream_kwargs(port), on_close_handler=on_close("consumer"))
        producer = Producer(
            **rstream_kwargs(port),
            on_close_handler=on_close("producer"),
            recovery_strategy=BackOffRecoveryStrategy(False),
        )
        inbox = Inbox()
        try:
            await producer.create_stream("busy")
            await producer.send_wait("busy", RawMessage(b"m0"))
            await consumer.subscribe("busy", inbox, offset_specification=first())
            await inbox.until(1)
            async with Producer(**rstream_kwargs(port)) as admin:
                await admin.delete_stream("busy")
            for event in events.values():
                await asyncio.wait_for(event.wait(), WAIT_S)
        finally:
            await consumer.close()
            await producer.close()
        # A MetadataUpdate (0x06 stream not available) reached both connections.
        assert closed["consumer"] == OnClosedErrorInfo("Metadata Update", ["busy"])
        assert closed["producer"] == OnClosedErrorInfo("Metadata Update", ["busy"])

    await run_client(gateway, scenario)
