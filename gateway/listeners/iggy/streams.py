"""Iggy stream, topic and partition commands (iggy.md §5.3-§5.5; classic layouts §9).

An Iggy stream is a canonical stream and a topic a canonical topic (DESIGN.md §3), with the
backend's numeric ids. Every change drops the identifier cache, and the consumer groups of a
deleted or resized topic follow it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Final

from gateway.listeners.iggy.catalog import ResolvedTopic
from gateway.listeners.iggy.session import CommandHandler, Session, handles
from gateway.model import (
    CreatePartitions,
    CreateStream,
    CreateTopic,
    DeletePartitions,
    DeleteStream,
    DeleteTopic,
    InvalidPartitions,
    ListStreams,
    NotFound,
    PurgeStream,
    PurgeTopic,
    StreamInfo,
    Topic,
    UpdateStream,
    UpdateTopic,
    is_internal,
)
from gateway.translate.iggy import topics as tt
from gateway.translate.iggy.errors import IggyStatus
from protocols.iggy import Command
from protocols.iggy import frames_streams as f
from protocols.iggy.status import Status

# A real server's MAX_PARTITIONS_COUNT (iggy.md §5.5): more in one topic is TooManyPartitions.
MAX_PARTITIONS: Final = 1000


def _check_total(total: int) -> None:
    if total > MAX_PARTITIONS:
        raise IggyStatus(
            Status.TOO_MANY_PARTITIONS,
            f"a topic has at most {MAX_PARTITIONS} partitions on Iggy, not {total}",
        )


def _check_count(count: int) -> None:
    """Create/DeletePartitions: 0 or more than the cap is TooManyPartitions (2015) on a real
    server, for both commands; more than the topic has is InvalidPartitionsCount (2019)."""
    if not 1 <= count <= MAX_PARTITIONS:
        raise IggyStatus(
            Status.TOO_MANY_PARTITIONS, f"partitions count must be in 1..{MAX_PARTITIONS}"
        )


async def create_stream(s: Session, cmd: f.CreateStream) -> f.StreamDetails:
    s.require("manage_streams")
    tt.check_no_options(cmd.options, "stream")
    s.catalog.invalidate()
    result = await s.router.execute(CreateStream(stream=cmd.name, id=cmd.stream_id or None), s.ctx)
    return tt.stream_details(result.info, legacy=s.legacy)


async def get_stream(s: Session, cmd: f.GetStream) -> f.StreamDetails | None:
    try:
        info = await s.catalog.stream(cmd.stream_id, s.ctx)
    except NotFound:
        return None  # §3.7: "not found" is an empty OK body
    s.require("read_streams", info.id)
    return tt.stream_details(_shown(info), legacy=s.legacy)


def _shown(info: StreamInfo) -> StreamInfo:
    """A stream as a listing shows it: without the gateways' internal topics (a stream of their
    own, reached by name, shows all of its topics)."""
    if is_internal(info.name) or not any(is_internal(t.topic.name) for t in info.topics):
        return info
    return dataclasses.replace(
        info, topics=tuple(t for t in info.topics if not is_internal(t.topic.name))
    )


async def get_streams(s: Session, cmd: f.GetStreams) -> f.Streams:
    s.require("read_streams")
    streams = (await s.router.execute(ListStreams(), s.ctx)).streams
    return f.Streams(streams=tuple(tt.stream_frame(i) for i in sorted(streams, key=_id)))


def _id(info: Any) -> int:
    return int(info.id)


async def update_stream(s: Session, cmd: f.UpdateStream) -> None:
    tt.check_no_options(cmd.options, "stream")
    info = await s.catalog.stream(cmd.stream_id, s.ctx)
    s.require("manage_streams", info.id)
    s.catalog.invalidate()
    if cmd.name != info.name:
        await s.router.execute(UpdateStream(stream=info.name, new_name=cmd.name), s.ctx)
        await s.groups.rename_stream(info.name, cmd.name)


async def delete_stream(s: Session, cmd: f.DeleteStream) -> None:
    info = await s.catalog.stream(cmd.stream_id, s.ctx)
    s.require("manage_streams", info.id)
    s.catalog.invalidate()
    await s.router.execute(DeleteStream(stream=info.name), s.ctx)
    await s.groups.drop_stream(info.name)


async def purge_stream(s: Session, cmd: f.PurgeStream) -> None:
    info = await s.catalog.stream(cmd.stream_id, s.ctx)
    s.require("manage_streams", info.id)
    await s.router.execute(PurgeStream(stream=info.name), s.ctx)


# --- topics ---------------------------------------------------------------------------------------


async def create_topic(s: Session, cmd: f.CreateTopic) -> f.TopicDetails:
    stream = await s.catalog.stream(cmd.stream_id, s.ctx)
    s.require("manage_topics", stream.id)
    if s.legacy:
        options = tt.legacy_topic_options(
            cmd.compression_algorithm, cmd.message_expiry, cmd.max_topic_size
        )
    else:
        options = tt.options_of(cmd.options)
    if cmd.partitions_count < 0:
        raise InvalidPartitions("partitions count must not be negative")
    _check_total(cmd.partitions_count)
    config = tt.topic_config(options, partitions=max(1, cmd.partitions_count))
    tt.check_topic_size(config, s.router.backend.capabilities.segment_bytes)
    s.catalog.invalidate()
    result = await s.router.execute(
        CreateTopic(
            topic=Topic(stream.name, cmd.name),
            # Iggy allows a topic without partitions; the canonical model needs one to exist.
            partitions=max(1, cmd.partitions_count),
            config=config,
            id=cmd.topic_id or None,
            create_stream=False,
        ),
        s.ctx,
    )
    return tt.topic_details(result.info, legacy=s.legacy, shift=s.partition_shift)


async def resolve(s: Session, stream: Any, topic: Any) -> ResolvedTopic:
    return await s.catalog.topic(stream, topic, s.ctx, fresh=True)


async def get_topic(s: Session, cmd: f.GetTopic) -> f.TopicDetails | None:
    try:
        found = await resolve(s, cmd.stream_id, cmd.topic_id)
    except NotFound:
        return None
    s.require("read_topics", found.stream.id, found.topic.id)
    return tt.topic_details(found.topic, legacy=s.legacy, shift=s.partition_shift)


async def get_topics(s: Session, cmd: f.GetTopics) -> f.Topics:
    try:
        stream = await s.catalog.stream(cmd.stream_id, s.ctx)
    except NotFound:
        return f.Topics(topics=())  # as the real server: a missing stream has no topics
    s.require("read_topics", stream.id)
    topics = sorted(_shown(stream).topics, key=_id)
    return f.Topics(topics=tuple(tt.topic_frame(t, legacy=s.legacy) for t in topics))


async def update_topic(s: Session, cmd: f.UpdateTopic) -> None:
    found = await resolve(s, cmd.stream_id, cmd.topic_id)
    s.require("manage_topics", found.stream.id, found.topic.id)
    if s.legacy:
        options = tt.legacy_topic_options(
            cmd.compression_algorithm, cmd.message_expiry, cmd.max_topic_size
        )
    else:
        options = tt.options_of(cmd.options)
        tt.check_updatable(options)
    info = found.topic
    config = tt.topic_config(options, partitions=info.partition_count, base=info.config)
    tt.check_topic_size(config, info.config.segment_bytes or info.defaults.segment_bytes)
    s.catalog.invalidate()
    new_name = cmd.name if cmd.name != info.topic.name else None
    await s.router.execute(UpdateTopic(topic=info.topic, config=config, new_name=new_name), s.ctx)
    if new_name is not None:
        await s.groups.rename_topic(info.topic.stream, info.topic.name, new_name)


async def delete_topic(s: Session, cmd: f.DeleteTopic) -> None:
    found = await resolve(s, cmd.stream_id, cmd.topic_id)
    s.require("manage_topics", found.stream.id, found.topic.id)
    s.catalog.invalidate()
    await s.router.execute(DeleteTopic(topic=found.name), s.ctx)
    await s.groups.drop_topic(found.name.stream, found.name.name)


async def purge_topic(s: Session, cmd: f.PurgeTopic) -> None:
    found = await resolve(s, cmd.stream_id, cmd.topic_id)
    s.require("manage_topics", found.stream.id, found.topic.id)
    await s.router.execute(PurgeTopic(topic=found.name), s.ctx)


async def create_partitions(s: Session, cmd: f.CreatePartitions) -> None:
    found = await resolve(s, cmd.stream_id, cmd.topic_id)
    s.require("manage_topics", found.stream.id, found.topic.id)
    _check_count(cmd.partitions_count)
    total = found.topic.partition_count + cmd.partitions_count
    _check_total(total)
    s.catalog.invalidate()
    await s.router.execute(CreatePartitions(topic=found.name, total=total), s.ctx)
    s.groups.resize(found.name.stream, found.name.name, total)


async def delete_partitions(s: Session, cmd: f.DeletePartitions) -> None:
    found = await resolve(s, cmd.stream_id, cmd.topic_id)
    s.require("manage_topics", found.stream.id, found.topic.id)
    _check_count(cmd.partitions_count)
    total = found.topic.partition_count - cmd.partitions_count
    if total < 1:
        raise InvalidPartitions("a topic keeps at least one partition here")
    s.catalog.invalidate()
    await s.router.execute(DeletePartitions(topic=found.name, total=total), s.ctx)
    s.groups.resize(found.name.stream, found.name.name, total)


HANDLERS: dict[type[Command], CommandHandler[Command]] = dict(
    [
        handles(f.CreateStream, create_stream),
        handles(f.GetStream, get_stream),
        handles(f.GetStreams, get_streams),
        handles(f.UpdateStream, update_stream),
        handles(f.DeleteStream, delete_stream),
        handles(f.PurgeStream, purge_stream),
        handles(f.CreateTopic, create_topic),
        handles(f.GetTopic, get_topic),
        handles(f.GetTopics, get_topics),
        handles(f.UpdateTopic, update_topic),
        handles(f.DeleteTopic, delete_topic),
        handles(f.PurgeTopic, purge_topic),
        handles(f.CreatePartitions, create_partitions),
        handles(f.DeletePartitions, delete_partitions),
    ]
)
