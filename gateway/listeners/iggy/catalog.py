"""Iggy identifiers (numeric id or name, iggy.md §2/§4) -> canonical streams and topics.

Resolving a numeric id needs the backend's stream list; doing that for every SendMessages and
PollMessages would cost more than the messages. So resolutions are cached briefly: the cache is
dropped whenever an Iggy admin command changes streams or topics, whenever a command on a
resolved topic fails with "not found", and after ``ttl_s`` (changes made through another
protocol, e.g. a Kafka client adding partitions, are seen within that time).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from gateway.model import (
    ListStreams,
    StreamInfo,
    Topic,
    TopicInfo,
    UnknownStream,
    UnknownTopic,
)
from gateway.router import RequestContext, Router
from protocols.iggy.identifiers import Identifier


@dataclass(frozen=True, slots=True)
class ResolvedTopic:
    stream: StreamInfo  # its ``topics`` may be stale; use ``topic``
    topic: TopicInfo

    @property
    def name(self) -> Topic:
        return self.topic.topic


class Catalog:
    def __init__(
        self, router: Router, *, ttl_s: float = 1.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.router = router
        self.ttl_s = ttl_s
        self._clock = clock
        self._topics: dict[tuple[Identifier, Identifier], tuple[float, ResolvedTopic]] = {}

    def invalidate(self) -> None:
        self._topics.clear()

    async def streams(self, ctx: RequestContext) -> tuple[StreamInfo, ...]:
        # every stream, the gateways' own too: a gateway chained in front keeps its internal
        # streams here through this listener, by name (listings hide them: streams.py)
        return (await self.router.execute(ListStreams(internal=True), ctx)).streams

    async def stream(self, ident: Identifier, ctx: RequestContext) -> StreamInfo:
        for info in await self.streams(ctx):
            if (info.id if isinstance(ident, int) else info.name) == ident:
                return info
        raise UnknownStream(f"stream {ident!r} does not exist")

    async def topic(
        self, stream: Identifier, topic: Identifier, ctx: RequestContext, *, fresh: bool = False
    ) -> ResolvedTopic:
        key = (stream, topic)
        now = self._clock()
        cached = self._topics.get(key)
        if cached is not None and not fresh and now - cached[0] < self.ttl_s:
            return cached[1]
        s = await self.stream(stream, ctx)
        found = _find_topic(s, topic)
        if found is None:
            raise UnknownTopic(f"topic {topic!r} does not exist in stream {s.name!r}")
        resolved = ResolvedTopic(s, found)
        if len(self._topics) > 10_000:
            self._topics.clear()
        self._topics[key] = (now, resolved)
        return resolved


def _find_topic(stream: StreamInfo, ident: Identifier) -> TopicInfo | None:
    for info in stream.topics:
        if (info.id if isinstance(ident, int) else info.topic.name) == ident:
            return info
    return None


__all__ = ["Catalog", "ResolvedTopic"]
