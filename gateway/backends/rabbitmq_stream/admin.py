"""Streams, topics and partitions on RabbitMQ: the RabbitMQ streams are created and deleted
(Create/Delete, rabbitmq-stream.md §5), everything else is a catalog record
(``rabbitmq_stream_catalog``), written under one lock so this gateway's changes do not race.

A topic's partitions are created with RabbitMQ's retention arguments: ``max-length-bytes``
(retention_bytes), ``max-age`` (retention_ms, in whole seconds, rounded up) and
``stream-max-segment-size-bytes`` (segment_bytes). RabbitMQ fixes them at creation: an
update_topic changes the catalog's config (max_message_bytes applies at once) but not the
arguments of existing streams. Purging is logical: the partition's first offset moves to its
end in the catalog and reads below it fail as out of range; RabbitMQ's retention frees the space.

Discovery: a topic of the ``default`` stream that the catalog does not know is looked up on the
broker (Metadata, then Partitions for a super stream made with ``rabbitmq-streams
add_super_stream``) and adopted into the catalog, so streams made by RabbitMQ clients are topics
too. Other canonical streams only hold what was made through a gateway.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time
from collections.abc import Awaitable, Callable
from typing import Final

import trio

from gateway.backends.rabbitmq_stream import fetch
from gateway.backends.rabbitmq_stream.catalog import (
    MAX_PARTITIONS,
    Catalog,
    TopicEntry,
    base_name,
    partition_name,
)
from gateway.backends.rabbitmq_stream.catalog_log import CatalogLog, new_rid
from gateway.backends.rabbitmq_stream.conn import check, gathering
from gateway.backends.rabbitmq_stream.link import Link
from gateway.model import (
    DEFAULT_STREAM,
    CreateStream,
    CreateTopic,
    InvalidPartitions,
    InvalidRequest,
    PartitionInfo,
    StreamExists,
    StreamInfo,
    Topic,
    TopicConfig,
    TopicExists,
    TopicInfo,
    UnknownStream,
    UnknownTopic,
    check_name,
)
from protocols import rabbitmq_stream as rs
from protocols.rabbitmq_stream import ResponseCode

PROBES_AT_ONCE: Final = 16


def now_us() -> int:
    return time.time_ns() // 1000


def arguments(config: TopicConfig, defaults: TopicConfig) -> tuple[tuple[str, str], ...]:
    def pick(value: int | None, default: int | None) -> int | None:
        value = default if value is None else value
        return value if value is not None and value > 0 else None

    args: list[tuple[str, str]] = []
    retention_bytes = pick(config.retention_bytes, defaults.retention_bytes)
    if retention_bytes is not None:
        args.append(("max-length-bytes", str(retention_bytes)))
    retention_ms = pick(config.retention_ms, defaults.retention_ms)
    if retention_ms is not None:
        args.append(("max-age", f"{math.ceil(retention_ms / 1000)}s"))
    segment_bytes = pick(config.segment_bytes, None)
    if segment_bytes is not None:
        args.append(("stream-max-segment-size-bytes", str(segment_bytes)))
    return tuple(args)


def merge_config(
    old: TopicConfig, new: TopicConfig, reset: frozenset[str] = frozenset()
) -> TopicConfig:
    """UpdateTopic changes the settings it names (None = leave as it is); ``reset`` names the
    fields and ``extra`` keys that go back to the default (UpdateTopic.reset)."""
    names = ("retention_ms", "retention_bytes", "segment_bytes", "max_message_bytes", "compression")
    values = {k: getattr(new, k) if getattr(new, k) is not None else getattr(old, k) for k in names}
    for k in reset & values.keys():
        values[k] = None
    extra = {k: v for k, v in old.extra.items() if k not in reset}
    return TopicConfig(**values, extra={**extra, **new.extra})


def check_config(config: TopicConfig) -> None:
    for key in ("retention_ms", "retention_bytes", "segment_bytes", "max_message_bytes"):
        value = getattr(config, key)
        if value is not None and value < -1:
            raise InvalidRequest(f"{key} must be -1 (unlimited) or >= 0, not {value}")
    if config.max_message_bytes == 0:
        raise InvalidRequest("max_message_bytes must be > 0")


class Admin:
    def __init__(
        self,
        link: Link,
        sub_link: Link,
        catalog: Catalog,
        log: CatalogLog,
        defaults: TopicConfig,
        dropped: Callable[[list[str]], None],
    ) -> None:
        self.link = link  # Create, Delete, Metadata, Partitions
        self.sub_link = sub_link  # probes (subscriptions)
        self.catalog = catalog
        self.log = log
        self.defaults = defaults
        self.dropped = dropped  # RabbitMQ streams deleted: close what this gateway holds on them
        self.lock = trio.Lock()
        self.bounds: Callable[[str], Awaitable[fetch.Bounds]] = self._probe

    async def loaded(self) -> Catalog:
        """The catalog, once it was read at least once."""
        if not self.catalog.next_offset:
            await self.log.wait_ready()
        return self.catalog

    # --- RabbitMQ streams -------------------------------------------------------------------------

    async def _create(self, name: str, config: TopicConfig) -> None:
        conn = await self.link.connection()
        args = arguments(config, self.defaults)
        reply = await conn.call(lambda c: rs.Create(correlation_id=c, stream=name, arguments=args))
        if getattr(reply, "code", None) == ResponseCode.STREAM_ALREADY_EXISTS:
            raise TopicExists(
                f"RabbitMQ stream {name!r} exists already (made outside this catalog)"
            )
        check(reply, f"Create of {name!r}")

    async def _delete(self, names: list[str]) -> None:
        conn = await self.link.connection()
        for name in names:

            def delete(correlation_id: int, name: str = name) -> rs.Delete:
                return rs.Delete(correlation_id=correlation_id, stream=name)

            check(
                await conn.call(delete), f"Delete of {name!r}", ResponseCode.STREAM_DOES_NOT_EXIST
            )
        self.dropped(names)

    async def _create_all(self, names: list[str], config: TopicConfig) -> None:
        done: list[str] = []
        try:
            for name in names:
                await self._create(name, config)
                done.append(name)
        except BaseException:
            with trio.CancelScope(shield=True), self.link.watchdog.bound(10):
                await self._delete(done)
            raise

    # --- canonical streams -----------------------------------------------------------------------

    async def create_stream(self, cmd: CreateStream) -> StreamInfo:
        check_name("stream", cmd.stream)
        catalog = await self.loaded()
        async with self.lock:
            if cmd.stream in catalog.streams:
                raise StreamExists(f"stream {cmd.stream!r} already exists")
            await self._new_stream(cmd.stream, cmd.id)
        return await self.stream_info(cmd.stream)

    async def _new_stream(self, name: str, wanted: int | None) -> None:
        sid = self.catalog.free_stream_id(wanted)
        if sid is None:
            raise StreamExists(f"stream id {wanted} is taken")
        await self.log.write({"op": "stream", "name": name, "id": sid, "ts": now_us()})

    async def delete_stream(self, name: str) -> None:
        catalog = await self.loaded()
        async with self.lock:
            if name not in catalog.streams:
                raise UnknownStream(f"stream {name!r} does not exist")
            for topic in catalog.stream_topics(name):
                await self._delete(topic.partitions)
            await self.log.write({"op": "stream-delete", "name": name})

    async def rename_stream(self, name: str, new_name: str) -> StreamInfo:
        check_name("stream", new_name)
        catalog = await self.loaded()
        async with self.lock:
            if name not in catalog.streams:
                raise UnknownStream(f"stream {name!r} does not exist")
            if new_name != name and new_name in catalog.streams:
                raise StreamExists(f"stream {new_name!r} already exists")
            await self.log.write({"op": "stream-rename", "name": name, "new": new_name})
        return await self.stream_info(new_name)

    async def stream_info(self, name: str) -> StreamInfo:
        catalog = await self.loaded()
        entry = catalog.stream(name)
        topics = await self.infos(catalog.stream_topics(name))
        return StreamInfo(name=entry.name, id=entry.id, created_at_us=entry.created_us,
                          topics=tuple(topics))  # fmt: skip

    # --- topics ----------------------------------------------------------------------------------

    async def resolve(self, topic: Topic) -> TopicEntry:
        """The catalog's topic; in the default stream, one adopted from the broker if it has a
        stream (or super stream) of that name."""
        catalog = await self.loaded()
        try:
            return catalog.topic(topic)
        except UnknownTopic:
            if topic.stream != DEFAULT_STREAM or topic.name in catalog.owners:
                raise
        partitions = await self._on_broker(topic.name)
        if not partitions:
            raise UnknownTopic(f"topic {topic} does not exist")
        async with self.lock:
            if (topic.stream, topic.name) not in catalog.topics:
                catalog.check_free(partitions)
                base = topic.name if partitions == [topic.name] else _base(partitions)
                # Another gateway (or process) adopting it at the same moment may come first:
                # then its record is the topic, the same broker streams, and that is fine.
                with contextlib.suppress(TopicExists):
                    await self._put_new(topic, None, partitions, TopicConfig(), base)
        return catalog.topic(topic)

    async def _on_broker(self, name: str) -> list[str]:
        async def look() -> list[str]:
            conn = await self.link.connection()
            reply = await conn.call(lambda c: rs.Metadata(correlation_id=c, streams=(name,)))
            assert isinstance(reply, rs.MetadataResponse)
            if reply.streams and reply.streams[0].code != ResponseCode.STREAM_DOES_NOT_EXIST:
                return [name]
            parts = await conn.call(lambda c: rs.Partitions(correlation_id=c, super_stream=name))
            if isinstance(parts, rs.PartitionsResponse) and parts.code == ResponseCode.OK:
                return list(parts.streams)
            return []

        return await self.link.retry(look)

    async def _put_new(
        self,
        topic: Topic,
        wanted: int | None,
        partitions: list[str],
        config: TopicConfig,
        base: str,
    ) -> None:
        """The topic's record, written until it is the one the log keeps: another gateway's
        create of the same name that came first means TopicExists (and the caller drops its
        streams); one that took the same free id first means another id."""
        catalog = self.catalog
        if topic.stream not in catalog.streams:
            await self._new_stream(topic.stream, None)
        while True:
            if (topic.stream, topic.name) in catalog.topics:
                raise TopicExists(f"topic {topic} already exists (created at the same time)")
            tid = catalog.free_topic_id(topic.stream, wanted)
            if tid is None:
                raise TopicExists(f"topic id {wanted} is taken in stream {topic.stream!r}")
            rid = new_rid()
            entry = TopicEntry(stream=topic.stream, name=topic.name, id=tid, uid=rid,
                               partitions=partitions, config=config, created_us=now_us(),
                               starts=[0] * len(partitions), base=base)  # fmt: skip
            await self.log.write(entry.record(rid))
            kept = catalog.topics.get((topic.stream, topic.name))
            if kept is not None and kept.uid == rid:
                return

    async def create_topic(self, cmd: CreateTopic) -> TopicEntry:
        topic = cmd.topic
        check_name("stream", topic.stream)
        check_name("topic", topic.name)
        check_config(cmd.config)
        if not 1 <= cmd.partitions <= MAX_PARTITIONS:
            raise InvalidPartitions(f"partitions must be in 1..{MAX_PARTITIONS}")
        catalog = await self.loaded()
        async with self.lock:
            missing = topic.stream not in catalog.streams and topic.stream != DEFAULT_STREAM
            if missing and not cmd.create_stream:
                raise UnknownStream(f"stream {topic.stream!r} does not exist")
            if (topic.stream, topic.name) in catalog.topics:
                raise TopicExists(f"topic {topic} already exists")
            if catalog.free_topic_id(topic.stream, cmd.id) is None:
                raise TopicExists(f"topic id {cmd.id} is taken in stream {topic.stream!r}")
            base = base_name(topic.stream, topic.name)
            names = [partition_name(base, i, cmd.partitions) for i in range(cmd.partitions)]
            catalog.check_free(names)
            await self._create_all(names, cmd.config)
            try:
                await self._put_new(topic, cmd.id, names, cmd.config, base)
            except TopicExists:  # lost to another gateway's create: its streams stay
                with trio.CancelScope(shield=True), self.link.watchdog.bound(10):
                    await self._delete(names)
                raise
        return catalog.topic(topic)

    async def delete_topic(self, topic: Topic) -> None:
        entry = await self.resolve(topic)
        async with self.lock:
            await self._delete(entry.partitions)
            await self.log.write({"op": "topic-delete", "stream": entry.stream, "id": entry.id})

    async def _rewrite(self, entry: TopicEntry) -> TopicEntry:
        await self.log.write(entry.record(new_rid()))
        return self.catalog.topic(entry.topic)

    async def update_topic(
        self,
        topic: Topic,
        config: TopicConfig,
        new_name: str | None,
        reset: frozenset[str] = frozenset(),
    ) -> TopicEntry:
        check_config(config)
        if new_name is not None:
            check_name("topic", new_name)
        entry = await self.resolve(topic)
        async with self.lock:
            target = new_name or entry.name
            if target != entry.name and (entry.stream, target) in self.catalog.topics:
                raise TopicExists(f"topic {Topic(entry.stream, target)} already exists")
            config = merge_config(entry.config, config, reset)
            return await self._rewrite(dataclasses.replace(entry, name=target, config=config))

    async def create_partitions(self, topic: Topic, total: int) -> TopicEntry:
        entry = await self.resolve(topic)
        async with self.lock:
            have = len(entry.partitions)
            if not have < total <= MAX_PARTITIONS:
                raise InvalidPartitions(f"topic {topic} has {have} partitions; asked for {total}")
            names = [f"{entry.base}-{i}" for i in range(have, total)]
            self.catalog.check_free(names, entry)
            await self._create_all(names, entry.config)
            starts = [entry.start(p) for p in range(have)] + [0] * len(names)
            grown = dataclasses.replace(entry, partitions=entry.partitions + names, starts=starts)
            return await self._rewrite(grown)

    async def delete_partitions(self, topic: Topic, total: int) -> TopicEntry:
        entry = await self.resolve(topic)
        async with self.lock:
            have = len(entry.partitions)
            if not 1 <= total < have:
                raise InvalidPartitions(f"topic {topic} has {have} partitions; asked for {total}")
            await self._delete(entry.partitions[total:])
            shrunk = dataclasses.replace(
                entry, partitions=entry.partitions[:total], starts=entry.starts[:total]
            )
            return await self._rewrite(shrunk)

    async def purge_topics(self, topics: list[TopicEntry]) -> None:
        async with self.lock:
            for entry in topics:
                ends = [(await self.bounds(name)).end for name in entry.partitions]
                starts = [max(end, entry.start(p)) for p, end in enumerate(ends)]
                await self._rewrite(dataclasses.replace(entry, starts=starts))

    # --- descriptions ----------------------------------------------------------------------------

    async def _probe(self, name: str) -> fetch.Bounds:
        async def once() -> fetch.Bounds:
            return await fetch.probe(await self.sub_link.connection(), name)

        return await self.sub_link.retry(once)

    async def info(self, entry: TopicEntry) -> TopicInfo:
        bounds: dict[int, fetch.Bounds] = {}
        async with gathering() as nursery:
            for p, name in enumerate(entry.partitions):

                async def one(p: int = p, name: str = name) -> None:
                    bounds[p] = await self.bounds(name)

                nursery.start_soon(one)
        parts = []
        for p in range(len(entry.partitions)):
            b = bounds[p]
            start = max(b.start, entry.start(p))
            end = max(b.end, start)
            size = round((end - start) * b.record_bytes)
            parts.append(PartitionInfo(partition=p, log_start_offset=start, next_offset=end,
                                       size_bytes=size))  # fmt: skip
        return TopicInfo(topic=entry.topic, id=entry.id, partitions=tuple(parts),
                         config=entry.config, created_at_us=entry.created_us)  # fmt: skip

    async def infos(self, entries: list[TopicEntry]) -> list[TopicInfo]:
        out: dict[int, TopicInfo] = {}
        limit = trio.CapacityLimiter(PROBES_AT_ONCE)
        async with gathering() as nursery:
            for i, entry in enumerate(entries):

                async def one(i: int = i, entry: TopicEntry = entry) -> None:
                    async with limit:
                        out[i] = await self.info(entry)

                nursery.start_soon(one)
        return [out[i] for i in range(len(entries))]


def _base(partitions: list[str]) -> str:
    """The name new partitions are numbered under: ``t`` for ``t-0``, ``t-1``..."""
    stem, _, index = partitions[0].rpartition("-")
    return stem if stem and index.isdigit() else partitions[0]


__all__ = ["Admin", "arguments", "check_config", "merge_config"]
