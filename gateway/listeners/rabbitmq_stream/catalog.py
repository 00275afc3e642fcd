"""RabbitMQ stream names -> canonical (topic, partition) within one virtual host (DESIGN.md §3).

A plain RabbitMQ stream is partition 0 of the topic of the same name. A super stream is a topic
with several partitions (or one created by CreateSuperStream): its partition streams are named
``<name>-<i>`` unless CreateSuperStream named them otherwise (the names and binding keys are kept
in the topic's settings). A topic with more than one partition created through another protocol
(a Kafka topic with 3 partitions) is a super stream here, partitions ``<name>-0..2``, binding keys
``"0".."2"``, as ``rabbitmq-streams add_super_stream --partitions 3`` makes them.

Resolving a name needs the virtual host's topic list; it is cached for ``ttl_s`` and dropped
whenever this listener changes topics (changes made through another protocol are seen within that
time).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from gateway.model import ListTopics, Topic, TopicInfo, UnknownStream, UnknownTopic
from gateway.router import RequestContext, Router

SUPER_STREAM = "rabbitmq.super-stream"
PARTITIONS = "rabbitmq.partitions"  # JSON list: the partition streams' names, in order
BINDING_KEYS = "rabbitmq.binding-keys"  # JSON list: each partition's binding (routing) key


@dataclass(frozen=True, slots=True)
class Target:
    """What a RabbitMQ stream name stands for."""

    name: str  # the RabbitMQ stream
    info: TopicInfo
    partition: int

    @property
    def topic(self) -> Topic:
        return self.info.topic


@dataclass(frozen=True, slots=True)
class SuperStream:
    info: TopicInfo
    partitions: tuple[str, ...]
    binding_keys: tuple[str, ...]

    def route(self, routing_key: str) -> tuple[str, ...]:
        return tuple(
            p for p, k in zip(self.partitions, self.binding_keys, strict=False) if k == routing_key
        )


def _names(extra: Mapping[str, str], key: str) -> list[str]:
    try:
        value = json.loads(extra.get(key, "[]"))
    except ValueError:
        return []
    return [str(x) for x in value] if isinstance(value, list) else []


def super_stream_of(info: TopicInfo) -> SuperStream | None:
    """The super stream a topic is, or None for a plain stream."""
    extra = info.config.extra
    n = len(info.partitions)
    if extra.get(SUPER_STREAM) != "true" and n <= 1:
        return None
    name = info.topic.name
    names = _names(extra, PARTITIONS)[:n]
    keys = _names(extra, BINDING_KEYS)[:n]
    # Partitions added later (a Kafka client growing the topic) get the default shape.
    names += [f"{name}-{i}" for i in range(len(names), n)]
    keys += [str(i) for i in range(len(keys), n)]
    return SuperStream(info, tuple(names), tuple(keys))


def super_stream_settings(
    partitions: tuple[str, ...], binding_keys: tuple[str, ...]
) -> dict[str, str]:
    return {
        SUPER_STREAM: "true",
        PARTITIONS: json.dumps(list(partitions)),
        BINDING_KEYS: json.dumps(list(binding_keys)),
    }


@dataclass(slots=True)
class _Snapshot:
    at: float
    streams: dict[str, Target] = field(default_factory=dict)
    supers: dict[str, SuperStream] = field(default_factory=dict)


class Catalog:
    def __init__(
        self, router: Router, *, ttl_s: float = 1.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.router = router
        self.ttl_s = ttl_s
        self._clock = clock
        self._cache: dict[str, _Snapshot] = {}

    def invalidate(self) -> None:
        self._cache.clear()

    async def _snapshot(self, stream: str, ctx: RequestContext, fresh: bool) -> _Snapshot:
        now = self._clock()
        cached = self._cache.get(stream)
        if cached is not None and not fresh and now - cached.at < self.ttl_s:
            return cached
        try:
            topics = (
                await self.router.execute(ListTopics(stream=stream, internal=True), ctx)
            ).topics
        except UnknownStream:
            topics = ()
        snap = _Snapshot(now)
        for info in topics:
            if info.topic.stream != stream:
                continue
            ss = super_stream_of(info)
            if ss is None:
                snap.streams[info.topic.name] = Target(info.topic.name, info, 0)
                continue
            snap.supers[info.topic.name] = ss
        for ss in snap.supers.values():  # a plain stream keeps its name over a partition's
            for i, name in enumerate(ss.partitions):
                snap.streams.setdefault(name, Target(name, ss.info, i))
        self._cache[stream] = snap
        return snap

    async def find(
        self, stream: str, name: str, ctx: RequestContext, *, fresh: bool = False
    ) -> Target | None:
        snap = await self._snapshot(stream, ctx, fresh)
        found = snap.streams.get(name)
        if found is None and not fresh:
            return await self.find(stream, name, ctx, fresh=True)  # maybe created since
        return found

    async def target(self, stream: str, name: str, ctx: RequestContext) -> Target:
        found = await self.find(stream, name, ctx)
        if found is None:
            raise UnknownTopic(f"stream {name!r} does not exist")
        return found

    async def super_stream(self, stream: str, name: str, ctx: RequestContext) -> SuperStream | None:
        snap = await self._snapshot(stream, ctx, False)
        found = snap.supers.get(name)
        if found is None:
            found = (await self._snapshot(stream, ctx, True)).supers.get(name)
        return found

    async def taken(self, stream: str, name: str, ctx: RequestContext) -> bool:
        """Is ``name`` a stream, a super stream or a super stream's partition already?"""
        snap = await self._snapshot(stream, ctx, True)
        return name in snap.streams or name in snap.supers


__all__ = [
    "BINDING_KEYS", "PARTITIONS", "SUPER_STREAM", "Catalog", "SuperStream", "Target",
    "super_stream_of", "super_stream_settings",
]  # fmt: skip
