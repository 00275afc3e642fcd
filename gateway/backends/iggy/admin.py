"""Streams, topics, partitions and stats on an Iggy server (iggy.md §5.1, §5.3-§5.5).

Canonical names travel as string identifiers (kind 2, §2), so a stream called "7" is never
taken for id 7. Answers become canonical infos through ``gateway.translate.iggy.topic_settings``. A
topic's partitions (offsets, sizes) come only with GetTopic, so listing streams or topics asks
for each topic's details, a few at a time.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import TypeVar

import trio

from gateway.backends.iggy.pool import Pool
from gateway.model import (
    CreatePartitions,
    CreateStream,
    CreateTopic,
    DeletePartitions,
    GatewayError,
    InvalidPartitions,
    InvalidRequest,
    PartitionInfo,
    StatsResult,
    StreamExists,
    StreamInfo,
    Topic,
    TopicInfo,
    UnknownPartition,
    UnknownStream,
    UnknownTopic,
    Unsupported,
    UpdateTopic,
    check_name,
)
from gateway.translate.iggy.errors import error_of
from gateway.translate.iggy.topic_settings import (
    OPTION_KINDS,
    stream_info,
    topic_info,
    topic_options,
)
from protocols import iggy as wire
from protocols.iggy.status import Status

T = TypeVar("T")
_CONCURRENCY = 4  # GetTopic requests in flight while listing


async def request(pool: Pool, command: wire.Command, *, safe: bool = False) -> object:
    """One command; a failure status becomes its canonical error. Returns the reply body
    (None: an empty OK body, which Get* use for "not found", §3.7)."""
    reply = await pool.call(command, safe=safe)
    if reply.status != Status.OK:
        raise error_of(reply.status, type(command).__name__)
    return reply.body


def expect(body: object, cls: type[T]) -> T:
    if not isinstance(body, cls):
        raise GatewayError(f"iggy server answered {type(body).__name__}, not {cls.__name__}")
    return body


# --- reading ------------------------------------------------------------------------------------


async def describe(pool: Pool, topic: Topic) -> TopicInfo:
    get = wire.GetTopic(stream_id=topic.stream, topic_id=topic.name)
    body = await request(pool, get, safe=True)
    if body is None:
        await stream_details(pool, topic.stream)  # UnknownStream when that is what is missing
        raise UnknownTopic(f"topic {topic} does not exist")
    return topic_info(topic.stream, expect(body, wire.TopicDetails))


async def partition(pool: Pool, topic: Topic, p: int) -> PartitionInfo:
    info = await describe(pool, topic)
    if not 0 <= p < info.partition_count:
        raise unknown_partition(topic, p, info.partition_count)
    return info.partitions[p]


def unknown_partition(topic: Topic, p: int, partitions: int) -> UnknownPartition:
    return UnknownPartition(
        f"partition {p} does not exist in {topic} ({partitions} partitions)", partitions=partitions
    )


async def with_partitions(pool: Pool, topic: Topic, p: int) -> GatewayError:
    """Iggy's PartitionNotFound says nothing about how many there are; the canonical error
    does (Kafka clients refresh their metadata with it). Or the topic itself is gone."""
    try:
        info = await describe(pool, topic)
    except GatewayError as other:
        return other
    return unknown_partition(topic, p, info.partition_count)


async def stream_details(pool: Pool, stream: str) -> wire.StreamDetails:
    body = await request(pool, wire.GetStream(stream_id=stream), safe=True)
    if body is None:
        raise UnknownStream(f"stream {stream!r} does not exist")
    return expect(body, wire.StreamDetails)


async def _topics(pool: Pool, stream: str, headers: Sequence[wire.Topic]) -> list[TopicInfo]:
    """Each topic's details, ``_CONCURRENCY`` at a time; one deleted meanwhile is left out."""
    found: dict[int, TopicInfo] = {}
    limiter = trio.CapacityLimiter(_CONCURRENCY)

    async def one(header: wire.Topic) -> None:
        async with limiter:
            with contextlib.suppress(UnknownTopic, UnknownStream):  # deleted meanwhile
                found[header.id] = await describe(pool, Topic(stream, header.name))

    async with trio.open_nursery() as nursery:
        for header in headers:
            nursery.start_soon(one, header)
    return [found[k] for k in sorted(found)]


async def stream(pool: Pool, name: str) -> StreamInfo:
    details = await stream_details(pool, name)
    return stream_info(details.stream, await _topics(pool, name, details.topics))


async def streams(pool: Pool) -> list[StreamInfo]:
    body = await request(pool, wire.GetStreams(), safe=True)
    listed = expect(body, wire.Streams).streams if body is not None else ()
    out = []
    for header in sorted(listed, key=lambda s: s.id):
        with contextlib.suppress(UnknownStream):  # deleted meanwhile
            out.append(await stream(pool, header.name))
    return out


async def stats(pool: Pool) -> StatsResult:
    s = expect(await request(pool, wire.GetStats(), safe=True), wire.Stats)
    return StatsResult(
        streams=s.streams_count,
        topics=s.topics_count,
        partitions=s.partitions_count,
        messages=s.messages_count,
        size_bytes=s.messages_size_bytes,
        consumer_groups=s.consumer_groups_count,
    )


# --- changing -----------------------------------------------------------------------------------


async def create_stream(pool: Pool, cmd: CreateStream) -> StreamInfo:
    check_name("stream", cmd.stream)
    if cmd.id is not None:
        taken = await request(pool, wire.GetStream(stream_id=cmd.id), safe=True)
        if taken is not None:
            raise StreamExists(f"stream id {cmd.id} is taken")
    body = await request(pool, wire.CreateStream(name=cmd.stream))
    created = expect(body, wire.StreamDetails).stream
    if cmd.id is not None and created.id != cmd.id:
        # The current framing has no stream id to ask for (§5.3): undo what the server chose.
        await request(pool, wire.DeleteStream(stream_id=created.id))
        raise Unsupported(f"the iggy server chooses stream ids: it would give {created.id}")
    return stream_info(created)


async def create_topic(pool: Pool, cmd: CreateTopic) -> TopicInfo:
    check_name("stream", cmd.topic.stream)
    check_name("topic", cmd.topic.name)
    if cmd.partitions < 1:
        raise InvalidPartitions(f"a topic needs at least one partition, not {cmd.partitions}")
    create = wire.CreateTopic(
        stream_id=cmd.topic.stream,
        name=cmd.topic.name,
        partitions_count=cmd.partitions,
        options=topic_options(cmd.config, cmd.partitions),
    )
    try:
        body = await request(pool, create)
    except UnknownStream:
        if not cmd.create_stream:
            raise
        with contextlib.suppress(StreamExists):  # created meanwhile
            await request(pool, wire.CreateStream(name=cmd.topic.stream))
        body = await request(pool, create)
    info = topic_info(cmd.topic.stream, expect(body, wire.TopicDetails))
    if cmd.id is not None and info.id != cmd.id:
        await request(pool, wire.DeleteTopic(stream_id=cmd.topic.stream, topic_id=info.id))
        raise Unsupported(f"the iggy server chooses topic ids: it would give {info.id}")
    return info


async def update_topic(pool: Pool, cmd: UpdateTopic) -> TopicInfo:
    info = await describe(pool, cmd.topic)
    _check_kept(cmd, info)
    new_name = cmd.new_name or cmd.topic.name
    check_name("topic", new_name)
    update = wire.UpdateTopic(
        stream_id=cmd.topic.stream,
        topic_id=cmd.topic.name,
        name=new_name,
        options=topic_options(cmd.config, info.partition_count, create=False),
    )
    await request(pool, update)
    return await describe(pool, Topic(cmd.topic.stream, new_name))


def _check_kept(cmd: UpdateTopic, info: TopicInfo) -> None:
    """An Iggy server keeps its own topic options only, and has no way back to a default: a
    setting it would drop (another protocol's, e.g. Kafka's ``cleanup.policy``) or a reset is
    refused rather than answered with a success that keeps nothing."""
    if cmd.reset:
        names = ", ".join(sorted(cmd.reset))
        raise InvalidRequest(
            f"the Iggy backend cannot reset topic settings to the default: {names}"
        )
    dropped = sorted(
        k for k, v in cmd.config.extra.items()
        if k not in OPTION_KINDS and info.config.extra.get(k) != v
    )  # fmt: skip
    if dropped:
        raise InvalidRequest(
            f"the Iggy backend cannot keep the topic settings {', '.join(dropped)}: an Iggy "
            f"server keeps only its own options ({', '.join(sorted(OPTION_KINDS))})"
        )


async def create_partitions(pool: Pool, cmd: CreatePartitions) -> TopicInfo:
    current = (await describe(pool, cmd.topic)).partition_count
    if cmd.total <= current:
        raise InvalidPartitions(f"{cmd.topic} has {current} partitions; {cmd.total} is not more")
    await request(
        pool,
        wire.CreatePartitions(
            stream_id=cmd.topic.stream,
            topic_id=cmd.topic.name,
            partitions_count=cmd.total - current,
        ),
    )
    return await describe(pool, cmd.topic)


async def delete_partitions(pool: Pool, cmd: DeletePartitions) -> TopicInfo:
    current = (await describe(pool, cmd.topic)).partition_count
    if not 1 <= cmd.total < current:
        raise InvalidPartitions(
            f"{cmd.topic} has {current} partitions; the new total must be in 1..{current - 1}"
        )
    await request(
        pool,
        wire.DeletePartitions(
            stream_id=cmd.topic.stream,
            topic_id=cmd.topic.name,
            partitions_count=current - cmd.total,
        ),
    )
    return await describe(pool, cmd.topic)


__all__ = [
    "create_partitions",
    "create_stream",
    "create_topic",
    "delete_partitions",
    "describe",
    "expect",
    "partition",
    "request",
    "stats",
    "stream",
    "stream_details",
    "streams",
    "unknown_partition",
    "update_topic",
    "with_partitions",
]
