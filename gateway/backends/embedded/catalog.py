"""Streams and topics on disk: escaped directory names, numeric ids, atomic JSON metadata.

Layout under the root::

    <root>/.streamgate.lock              the owner's lock: pid, listeners (see ``owner``)
    <root>/.trash/                       deleted streams/topics/partitions, removed in a thread
    <root>/consumer-offsets.log          see ``offsets``
    <root>/<stream>/stream.json          {"name", "id", "created_at_us"}
    <root>/<stream>/<topic>/topic.json   {"name", "id", "created_at_us", "partitions", "config"}
    <root>/<stream>/<topic>/<n>/         partition n (see ``partition``)

Directory names are escaped (see ``files``); ids are 0-based, stream ids unique in the store,
topic ids unique in their stream. A directory without its JSON file is an interrupted create and
goes to the trash on open. The name is the one in the JSON file, not the directory's: a rename
rewrites only that file (one atomic replace), so open partitions keep their paths, and the old
name, created again, gets a directory of its own (``files.make_dir``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Final

import structlog

from gateway.model import (
    InvalidRequest,
    StreamInfo,
    Topic,
    TopicConfig,
    TopicInfo,
    UnknownPartition,
    UnknownStream,
    UnknownTopic,
)

from .batch_format import MAX_BATCH_BYTES
from .files import TRASH, move_to_trash, read_json, remove_tree
from .partition import LogConfig, Partition
from .recovery import open_partition

log = structlog.get_logger()

STREAM_FILE: Final = "stream.json"
TOPIC_FILE: Final = "topic.json"
_CONFIG_FIELDS: Final = ("retention_ms", "retention_bytes", "segment_bytes", "max_message_bytes")


@dataclass(slots=True)
class TopicEntry:
    name: str
    id: int
    dir: str
    created_at_us: int
    config: TopicConfig
    log_config: LogConfig
    partitions: list[Partition] = field(default_factory=list)

    def info(self, stream: str) -> TopicInfo:
        return TopicInfo(
            topic=Topic(stream, self.name),
            id=self.id,
            partitions=tuple(p.info() for p in self.partitions),
            config=self.config,
            created_at_us=self.created_at_us,
            defaults=applied(self.log_config),
        )

    def partition(self, n: int) -> Partition:
        if not 0 <= n < len(self.partitions):
            raise UnknownPartition(
                f"partition {n} of {self.name!r} does not exist ({len(self.partitions)} exist)",
                partitions=len(self.partitions),
            )
        return self.partitions[n]

    def meta(
        self,
        *,
        config: TopicConfig | None = None,
        partitions: int | None = None,
        name: str | None = None,
    ) -> dict[str, Any]:
        """topic.json, optionally with the config, partition count or name about to be applied."""
        config = config or self.config
        cfg: dict[str, Any] = {k: getattr(config, k) for k in (*_CONFIG_FIELDS, "compression")}
        cfg["extra"] = dict(config.extra)
        return {
            "name": name or self.name,
            "id": self.id,
            "created_at_us": self.created_at_us,
            "partitions": len(self.partitions) if partitions is None else partitions,
            "config": cfg,
        }


@dataclass(slots=True)
class StreamEntry:
    name: str
    id: int
    dir: str
    created_at_us: int
    topics: dict[str, TopicEntry] = field(default_factory=dict)

    def info(self) -> StreamInfo:
        return StreamInfo(
            name=self.name,
            id=self.id,
            created_at_us=self.created_at_us,
            topics=tuple(
                t.info(self.name) for t in sorted(self.topics.values(), key=lambda t: t.id)
            ),
        )

    def meta(self, *, name: str | None = None) -> dict[str, Any]:
        """stream.json, optionally with the name about to be applied."""
        return {"name": name or self.name, "id": self.id, "created_at_us": self.created_at_us}

    def topic(self, name: str) -> TopicEntry:
        try:
            return self.topics[name]
        except KeyError:
            raise UnknownTopic(f"topic {name!r} does not exist in stream {self.name!r}") from None


# --- configuration ---------------------------------------------------------------------------


def check_config(config: TopicConfig) -> None:
    for key in _CONFIG_FIELDS:
        value = getattr(config, key)
        if value is not None and value < -1:
            raise InvalidRequest(f"{key} must be -1 (unlimited) or >= 0, not {value}")
    if config.segment_bytes is not None and not 0 < config.segment_bytes <= MAX_BATCH_BYTES:
        raise InvalidRequest(f"segment_bytes must be in 1..{MAX_BATCH_BYTES}")
    if config.max_message_bytes == 0:
        raise InvalidRequest("max_message_bytes must be > 0")


def merge_config(
    old: TopicConfig, new: TopicConfig, reset: frozenset[str] = frozenset()
) -> TopicConfig:
    """UpdateTopic changes the settings it names (None = leave as it is); ``reset`` names the
    fields and ``extra`` keys that go back to the default (UpdateTopic.reset)."""
    values = {
        k: getattr(new, k) if getattr(new, k) is not None else getattr(old, k)
        for k in (*_CONFIG_FIELDS, "compression")
    }
    for k in reset & values.keys():
        values[k] = None
    extra = {k: v for k, v in old.extra.items() if k not in reset}
    return TopicConfig(**values, extra={**extra, **new.extra})


def effective(config: TopicConfig, defaults: LogConfig) -> LogConfig:
    def pick(value: int | None, default: int | None) -> int | None:
        if value is None:
            return default
        return None if value == -1 else value

    return LogConfig(
        segment_bytes=pick(config.segment_bytes, defaults.segment_bytes) or MAX_BATCH_BYTES,
        max_message_bytes=pick(config.max_message_bytes, defaults.max_message_bytes)
        or MAX_BATCH_BYTES,
        retention_ms=pick(config.retention_ms, defaults.retention_ms),
        retention_bytes=pick(config.retention_bytes, defaults.retention_bytes),
    )


def applied(log: LogConfig) -> TopicConfig:
    """A topic's effective settings as a ``TopicConfig`` (-1: unlimited), for reporting."""
    return TopicConfig(
        retention_ms=-1 if log.retention_ms is None else log.retention_ms,
        retention_bytes=-1 if log.retention_bytes is None else log.retention_bytes,
        segment_bytes=log.segment_bytes,
        max_message_bytes=log.max_message_bytes,
        compression="producer",  # batches are stored as the producer compressed them
    )


def config_from_meta(raw: dict[str, Any]) -> TopicConfig:
    return TopicConfig(
        **{k: raw.get(k) for k in (*_CONFIG_FIELDS, "compression")},
        extra=dict(raw.get("extra") or {}),
    )


def _subdirs(path: str) -> Iterator[os.DirEntry[str]]:
    with os.scandir(path) as it:
        entries = sorted(it, key=lambda e: e.name)
    for e in entries:
        if e.is_dir(follow_symlinks=False) and not e.name.startswith("."):
            yield e


def load(root: str, defaults: LogConfig, now_us: int) -> dict[str, StreamEntry]:
    """Read every stream and topic under ``root`` and open (recover) every partition (``now_us``:
    the store's clock, for the producer state recovery rebuilds)."""
    trash = os.path.join(root, TRASH)
    os.makedirs(trash, exist_ok=True)
    for e in os.scandir(trash):
        remove_tree(e.path)
    streams: dict[str, StreamEntry] = {}
    for sdir in _subdirs(root):
        meta = read_json(os.path.join(sdir.path, STREAM_FILE))
        if meta is None:
            log.warning("embedded.incomplete_stream_removed", path=sdir.path)
            remove_tree(move_to_trash(root, sdir.path))
            continue
        stream = StreamEntry(meta["name"], int(meta["id"]), sdir.path, int(meta["created_at_us"]))
        streams[stream.name] = stream
        for tdir in _subdirs(sdir.path):
            tmeta = read_json(os.path.join(tdir.path, TOPIC_FILE))
            if tmeta is None:
                log.warning("embedded.incomplete_topic_removed", path=tdir.path)
                remove_tree(move_to_trash(root, tdir.path))
                continue
            config = config_from_meta(tmeta.get("config") or {})
            topic = TopicEntry(
                name=tmeta["name"],
                id=int(tmeta["id"]),
                dir=tdir.path,
                created_at_us=int(tmeta["created_at_us"]),
                config=config,
                log_config=effective(config, defaults),
            )
            count = int(tmeta["partitions"])
            for n in range(count):
                pdir = os.path.join(tdir.path, str(n))
                part = (
                    open_partition(pdir, n, topic.log_config, now_us)
                    if os.path.isdir(pdir)
                    else Partition.create(pdir, n, topic.log_config)
                )
                topic.partitions.append(part)
            for extra in _subdirs(tdir.path):  # left by an interrupted Create/DeletePartitions
                if not extra.name.isdigit() or int(extra.name) >= count:
                    with contextlib.suppress(OSError):
                        remove_tree(move_to_trash(root, extra.path))
            stream.topics[topic.name] = topic
    return streams


def resolve(streams: dict[str, StreamEntry], stream: str) -> StreamEntry:
    try:
        return streams[stream]
    except KeyError:
        raise UnknownStream(f"stream {stream!r} does not exist") from None


def free_id(taken: Iterator[int], wanted: int | None) -> int | None:
    """``wanted`` if free (None if taken), else one past the highest id in use."""
    used = set(taken)
    if wanted is not None:
        return None if wanted in used else wanted
    return max(used, default=-1) + 1
