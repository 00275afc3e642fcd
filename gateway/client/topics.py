"""``streamgate topics list|create|delete``: the kafka-topics / ``iggy topic`` verbs on any
backend URL, as canonical ``list_topics``, ``create_topic`` and ``delete_topic`` commands."""

from __future__ import annotations

import argparse

from gateway.backends.base import Backend
from gateway.model import (
    DEFAULT_STREAM,
    AlreadyExists,
    CreateTopic,
    DeleteTopic,
    DescribeTopic,
    ListTopics,
    NotFound,
    Topic,
    TopicConfig,
    TopicInfo,
    UnknownStream,
)

from .session import ClientError


def describe(info: TopicInfo) -> str:
    """One ``topics list`` line: the name, then ``key=value`` fields, tab-separated (the
    retention fields only when the backend knows them; -1 = unlimited)."""
    fields = [
        info.topic.name,
        f"partitions={info.partition_count}",
        f"messages={info.message_count}",
    ]
    config = info.config
    if config.retention_ms is not None:
        fields.append(f"retention.ms={config.retention_ms}")
    if config.retention_bytes is not None:
        fields.append(f"retention.bytes={config.retention_bytes}")
    return "\t".join(fields)


async def list_topics(backend: Backend, args: argparse.Namespace) -> int:
    try:
        topics = (await backend.list_topics(ListTopics(stream=args.stream))).topics
    except UnknownStream:
        topics = ()  # nothing was ever created in it: an empty list, as for an empty stream
    for info in sorted(topics, key=lambda t: t.topic.name):
        print(describe(info))
    return 0


async def create_topic(backend: Backend, args: argparse.Namespace) -> int:
    topic = Topic(args.stream, args.name)
    if args.partitions < 1:
        raise ClientError(f"--partitions must be at least 1, not {args.partitions}")
    config = TopicConfig(retention_ms=args.retention_ms, retention_bytes=args.retention_bytes)
    try:
        result = await backend.create_topic(
            CreateTopic(topic=topic, partitions=args.partitions, config=config)
        )
    except AlreadyExists:
        if args.if_not_exists:
            return 0
        raise ClientError(f"topic {_shown(topic)} already exists") from None
    count = result.info.partition_count
    print(f"created topic {_shown(topic)} ({count} partition{'' if count == 1 else 's'})")
    return 0


async def delete_topic(backend: Backend, args: argparse.Namespace) -> int:
    topic = Topic(args.stream, args.name)
    try:
        await backend.delete_topic(DeleteTopic(topic=topic))
    except NotFound:
        if args.if_exists:
            return 0
        raise ClientError(f"topic {_shown(topic)} does not exist") from None
    print(f"deleted topic {_shown(topic)}")
    return 0


async def topic_info(backend: Backend, topic: Topic) -> TopicInfo:
    """``describe_topic``; a missing stream is told as the missing topic (a Kafka user never
    made the ``default`` stream, a fresh embedded store does not have it yet)."""
    try:
        return (await backend.describe_topic(DescribeTopic(topic=topic))).info
    except UnknownStream:
        raise ClientError(f"topic {_shown(topic)} does not exist") from None


def check_partition(info: TopicInfo, partition: int) -> None:
    if not 0 <= partition < info.partition_count:
        raise ClientError(
            f"topic {_shown(info.topic)} has partitions 0..{info.partition_count - 1}, "
            f"not {partition}"
        )


def _shown(topic: Topic) -> str:
    """The topic as a user named it: ``'t'`` in the default stream, ``'s/t'`` elsewhere."""
    return repr(topic.name) if topic.stream == DEFAULT_STREAM else repr(str(topic))
