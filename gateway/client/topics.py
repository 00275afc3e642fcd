"""``streamgate topics list|create|delete|configs|delete-records``: the kafka-topics,
kafka-configs, kafka-delete-records / ``iggy topic`` verbs on any backend URL, as canonical
``list_topics``, ``create_topic``, ``delete_topic``, ``describe_topic``/``update_topic`` and
``delete_records`` commands."""

from __future__ import annotations

import argparse

from gateway.backends.base import Backend, RecordDeletion
from gateway.model import (
    DEFAULT_STREAM,
    AlreadyExists,
    CreateTopic,
    DeleteRecords,
    DeleteTopic,
    DescribeTopic,
    ListTopics,
    NotFound,
    Topic,
    TopicConfig,
    TopicInfo,
    UnknownStream,
    UpdateTopic,
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


# The settings ``configs get|set`` know, by their Kafka names (as ``topics list`` shows them):
# the ones every backend's store applies.
CONFIGS = {
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "segment.bytes": "segment_bytes",
    "max.message.bytes": "max_message_bytes",
}


async def get_configs(backend: Backend, args: argparse.Namespace) -> int:
    """One ``name=value`` line per setting: the topic's own, else the backend's (marked
    ``(default)``); a setting neither names is left out."""
    info = await topic_info(backend, Topic(args.stream, args.name))
    for name, field in CONFIGS.items():
        own, default = getattr(info.config, field), getattr(info.defaults, field)
        if own is not None:
            print(f"{name}={own}")
        elif default is not None:
            print(f"{name}={default}\t(default)")
    return 0


async def set_configs(backend: Backend, args: argparse.Namespace) -> int:
    topic = Topic(args.stream, args.name)
    values: dict[str, int] = {}
    for setting in args.settings:
        name, eq, value = setting.partition("=")
        field = CONFIGS.get(name)
        if not eq or field is None:
            raise ClientError(
                f"expected one of {', '.join(CONFIGS)} as NAME=VALUE, not {setting!r}"
            )
        try:
            values[field] = int(value)
        except ValueError:
            raise ClientError(f"{name} must be an integer (-1: unlimited), not {value!r}") from None
    await topic_info(backend, topic)  # a missing topic is told as such
    await backend.update_topic(UpdateTopic(topic=topic, config=TopicConfig(**values)))  # type: ignore[arg-type]
    print(f"updated topic {_shown(topic)}: {' '.join(args.settings)}")
    return 0


async def delete_records(backend: Backend, args: argparse.Namespace) -> int:
    """Messages below ``--before`` (default: all) go; prints the new start of each partition."""
    topic = Topic(args.stream, args.name)
    info = await topic_info(backend, topic)
    if not isinstance(backend, RecordDeletion):
        raise ClientError(f"the {backend.name} backend cannot delete records below an offset")
    partitions = range(info.partition_count) if args.partition is None else [args.partition]
    for n in partitions:
        check_partition(info, n)
        cmd = DeleteRecords(topic=topic, partition=n, offset=args.before)
        start = (await backend.delete_records(cmd)).log_start_offset
        print(f"{info.topic.name}[{n}]\tlog_start={start}")
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
