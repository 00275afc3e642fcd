"""What the RabbitMQ backend knows beyond RabbitMQ itself: canonical streams, topics and how their
partitions map to RabbitMQ streams, kept as JSON records in a stream of its own.

RabbitMQ 3.10 cannot list streams over the stream protocol and has no super-stream command
(rabbitmq-stream.md §10), so the catalog is an append-only log in the backend's virtual host,
``__streamgate_catalog``: one JSON record per change, replayed in order at start and followed
while running (several gateways on one virtual host see each other's changes). ``Catalog`` is
the state those records build; it never does I/O (``rabbitmq_stream_catalog_log`` does).

Names (one backend URL = one virtual host):

* canonical stream ``default``: topic ``t`` with 1 partition is RabbitMQ stream ``t``; with N
  partitions, streams ``t-0`` .. ``t-<N-1>`` (the super-stream partition names rstream and the
  gateway's own listener use, §3);
* any other canonical stream ``s``: the same under the prefix ``s.``: ``s.t``, ``s.t-0``...

A topic's stream names are fixed when its partitions are made and kept in its record: a topic
created with one partition keeps ``t`` as partition 0 when it grows (its new partitions are
``t-1``...), and a renamed topic or stream keeps its RabbitMQ streams. No two topics may map to
the same RabbitMQ stream; the catalog's own name is reserved.

Records (``op``): ``stream`` / ``stream-delete`` / ``stream-rename``; ``topic`` (the whole entry:
create, partitions, config, rename and purge offsets all rewrite it) / ``topic-delete``;
``group`` (a consumer group that committed, for stats); ``offset`` (what RabbitMQ's StoreOffset
cannot hold: the commit metadata string, and a committed NEXT offset of 0, i.e. nothing consumed,
which "last processed" cannot express); ``sync`` (written at start: once it is applied, the
replay is complete). Each carries an ``rid``; a topic's ``uid`` is the rid of its creation, so a
topic deleted and made again under the same name and id starts without offsets.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import structlog

from gateway.model import (
    DEFAULT_STREAM,
    MAX_NAME_LENGTH,
    InvalidRequest,
    Topic,
    TopicConfig,
    TopicExists,
    UnknownStream,
    UnknownTopic,
)

log = structlog.get_logger("streamgate.backend.rabbitmq_stream")

CATALOG_STREAM: Final = "__streamgate_catalog"
# The log that shared consumer groups replicate over (``coordination.shared_groups``).
COORDINATION_STREAM: Final = "__streamgate_coordination"
MAX_PARTITIONS: Final = 1000  # per topic: each partition is a RabbitMQ stream (an Osiris writer)
_CONFIG_FIELDS: Final = (
    "retention_ms", "retention_bytes", "segment_bytes", "max_message_bytes", "compression",
)  # fmt: skip


@dataclass(slots=True)
class StreamEntry:
    name: str
    id: int
    created_us: int = 0


@dataclass(slots=True)
class TopicEntry:
    stream: str
    name: str
    id: int
    uid: str  # unique for each creation (the creating record's rid)
    partitions: list[str]  # the RabbitMQ stream of each partition
    config: TopicConfig = field(default_factory=TopicConfig)
    created_us: int = 0
    starts: list[int] = field(default_factory=list)  # first offset kept (purge), per partition
    base: str = ""  # new partitions are ``<base>-<i>``

    @property
    def topic(self) -> Topic:
        return Topic(self.stream, self.name)

    def start(self, partition: int) -> int:
        return self.starts[partition] if partition < len(self.starts) else 0

    def record(self, rid: str) -> dict[str, Any]:
        return {
            "op": "topic", "rid": rid, "stream": self.stream, "name": self.name, "id": self.id,
            "uid": self.uid, "parts": list(self.partitions), "config": config_json(self.config),
            "ts": self.created_us, "starts": list(self.starts), "base": self.base,
        }  # fmt: skip


def config_json(config: TopicConfig) -> dict[str, Any]:
    out: dict[str, Any] = {k: getattr(config, k) for k in _CONFIG_FIELDS}
    out["extra"] = dict(config.extra)
    return {k: v for k, v in out.items() if v not in (None, {})}


def config_of(raw: Mapping[str, Any]) -> TopicConfig:
    values = {k: raw.get(k) for k in _CONFIG_FIELDS}
    return TopicConfig(**values, extra=dict(raw.get("extra", {})))


# --- names -----------------------------------------------------------------------------------


def base_name(stream: str, topic: str) -> str:
    return topic if stream == DEFAULT_STREAM else f"{stream}.{topic}"


def partition_name(base: str, partition: int, total: int) -> str:
    """The RabbitMQ stream of a new partition of a topic that will have ``total`` partitions."""
    return base if total == 1 else f"{base}-{partition}"


def check_rabbit_name(name: str) -> str:
    if len(name.encode()) > MAX_NAME_LENGTH:
        raise InvalidRequest(
            f"RabbitMQ stream name {name!r} is longer than {MAX_NAME_LENGTH} bytes"
        )
    if name in (CATALOG_STREAM, COORDINATION_STREAM):
        raise InvalidRequest(f"{name!r} is one of the gateway's own streams")
    return name


class Catalog:
    def __init__(self) -> None:
        self.streams: dict[str, StreamEntry] = {}
        self.topics: dict[tuple[str, str], TopicEntry] = {}
        self.groups: set[tuple[str, str]] = set()
        self.offsets: dict[tuple[str, int, str], tuple[bool, str]] = {}  # (uid, p, group)
        self.owners: dict[str, TopicEntry] = {}  # RabbitMQ stream -> the topic holding it
        self.next_offset = 0  # of the catalog stream: the next record to apply

    # --- lookups ---------------------------------------------------------------------------------

    def stream(self, name: str) -> StreamEntry:
        entry = self.streams.get(name)
        if entry is None:
            if name == DEFAULT_STREAM:  # always there for lookups (Kafka and RabbitMQ use it)
                return StreamEntry(DEFAULT_STREAM, -1)
            raise UnknownStream(f"stream {name!r} does not exist")
        return entry

    def topic(self, topic: Topic) -> TopicEntry:
        self.stream(topic.stream)
        entry = self.topics.get((topic.stream, topic.name))
        if entry is None:
            raise UnknownTopic(f"topic {topic} does not exist")
        return entry

    def stream_topics(self, stream: str) -> list[TopicEntry]:
        return sorted((t for t in self.topics.values() if t.stream == stream), key=lambda t: t.id)

    def free_stream_id(self, wanted: int | None) -> int | None:
        return _free_id([s.id for s in self.streams.values()], wanted)

    def free_topic_id(self, stream: str, wanted: int | None) -> int | None:
        return _free_id([t.id for t in self.topics.values() if t.stream == stream], wanted)

    def check_free(self, names: list[str], owner: TopicEntry | None = None) -> None:
        for name in names:
            check_rabbit_name(name)
            holder = self.owners.get(name)
            if holder is not None and holder is not owner:
                raise TopicExists(f"RabbitMQ stream {name!r} already holds topic {holder.topic}")

    def offset_meta(self, uid: str, partition: int, group: str) -> tuple[bool, str]:
        """(committed NEXT is 0, metadata) for a group's partition."""
        return self.offsets.get((uid, partition, group), (False, ""))

    # --- records ---------------------------------------------------------------------------------

    def apply_entry(self, data: bytes, *, offset: int = 0, timestamp_ms: int = 0) -> str | None:
        """Apply one catalog record; its rid (None: not a record this version knows)."""
        try:
            record = json.loads(data)
            if not isinstance(record, dict):
                raise ValueError("not an object")
            self._apply(record)
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("catalog record skipped", error=str(exc), record=data[:200])
            return None
        rid = record.get("rid")
        return rid if isinstance(rid, str) else None

    def _apply(self, r: dict[str, Any]) -> None:
        op = r["op"]
        if op == "stream":
            self.streams[r["name"]] = StreamEntry(r["name"], int(r["id"]), int(r.get("ts", 0)))
        elif op == "stream-delete":
            self.streams.pop(r["name"], None)
            for topic in self.stream_topics(r["name"]):
                self._drop(topic)
            self.groups = {g for g in self.groups if g[0] != r["name"]}
        elif op == "stream-rename":
            self._rename_stream(r["name"], r["new"])
        elif op == "topic":
            self._put_topic(r)
        elif op == "topic-delete":
            found = [t for t in self.topics.values() if (t.stream, t.id) == (r["stream"], r["id"])]
            for topic in found:
                self._drop(topic)
        elif op == "group":
            self.groups.add((r["stream"], r["group"]))
        elif op == "offset":
            key = (r["uid"], int(r["partition"]), r["group"])
            self.offsets[key] = (bool(r.get("zero")), str(r.get("metadata", "")))
        elif op != "sync":
            raise ValueError(f"unknown op {op!r}")

    def _put_topic(self, r: dict[str, Any]) -> None:
        entry = TopicEntry(
            stream=r["stream"],
            name=r["name"],
            id=int(r["id"]),
            uid=r["uid"],
            partitions=[str(p) for p in r["parts"]],
            config=config_of(r.get("config", {})),
            created_us=int(r.get("ts", 0)),
            starts=[int(s) for s in r.get("starts", [])],
            base=str(r.get("base") or r["parts"][0]),
        )
        old = [t for t in self.topics.values() if t.uid == entry.uid]
        if not old and self._taken(entry):
            # Two gateways created the same name (or took the same id) at once: the first
            # record in the log wins, for every gateway alike; the loser finds its topic
            # missing after the write and says so (``admin.create_topic``).
            log.info("catalog: a concurrent create lost", stream=entry.stream, topic=entry.name)
            return
        for topic in old:  # the same topic rewritten: renamed, grown, shrunk, purged...
            del self.topics[(topic.stream, topic.name)]
            for name in topic.partitions:
                self.owners.pop(name, None)
        clash = self.topics.get((entry.stream, entry.name))
        if clash is not None:  # renamed onto a name made meanwhile: the later record wins
            self._drop(clash)
        self.topics[(entry.stream, entry.name)] = entry
        for name in entry.partitions:
            self.owners[name] = entry

    def _taken(self, entry: TopicEntry) -> bool:
        """Whether a new topic's name or id belongs to another topic already."""
        return (entry.stream, entry.name) in self.topics or any(
            t.stream == entry.stream and t.id == entry.id for t in self.topics.values()
        )

    def _drop(self, topic: TopicEntry) -> None:
        self.topics.pop((topic.stream, topic.name), None)
        for name in topic.partitions:
            if self.owners.get(name) is topic:
                del self.owners[name]
        self.offsets = {k: v for k, v in self.offsets.items() if k[0] != topic.uid}

    def _rename_stream(self, old: str, new: str) -> None:
        entry = self.streams.pop(old, None)
        if entry is None:
            return
        entry.name = new
        self.streams[new] = entry
        for topic in self.stream_topics(old):
            del self.topics[(old, topic.name)]
            topic.stream = new
            self.topics[(new, topic.name)] = topic
        self.groups = {(new if s == old else s, g) for s, g in self.groups}


def _free_id(taken: list[int], wanted: int | None) -> int | None:
    """``wanted`` if free (None if taken), else one past the highest id in use."""
    if wanted is not None:
        return None if wanted in taken else wanted
    return max(taken, default=-1) + 1


__all__ = [
    "CATALOG_STREAM",
    "COORDINATION_STREAM",
    "MAX_PARTITIONS",
    "Catalog",
    "StreamEntry",
    "TopicEntry",
    "base_name",
    "check_rabbit_name",
    "config_json",
    "config_of",
    "partition_name",
]
