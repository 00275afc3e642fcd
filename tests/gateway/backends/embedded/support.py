"""Helpers shared by the embedded store's tests."""

from __future__ import annotations

import os
from pathlib import Path

from gateway.backends.embedded import EmbeddedBackend
from gateway.backends.embedded.files import escape_name
from gateway.model import Append, CreateTopic, Message, MessageBatch, Read, Topic, TopicConfig

TOPIC = Topic("s", "t")


def batch(n: int, start: int = 0, size: int = 20, ts: int = 0) -> list[Message]:
    """Values name their offset (when appended in order from 0), so a test can check them."""
    return [
        Message(value=f"m{i}".encode().ljust(size, b"."), timestamp_us=ts)
        for i in range(start, start + n)
    ]


async def create(
    backend: EmbeddedBackend,
    topic: Topic = TOPIC,
    partitions: int = 1,
    config: TopicConfig | None = None,
) -> None:
    await backend.create_topic(
        CreateTopic(topic=topic, partitions=partitions, config=config or TopicConfig())
    )


async def append(
    backend: EmbeddedBackend, messages: list[Message], topic: Topic = TOPIC, p: int = 0
) -> int:
    result = await backend.append(Append(topic=topic, partition=p, batch=MessageBatch(messages)))
    return result.base_offset


async def read_all(
    backend: EmbeddedBackend, topic: Topic = TOPIC, p: int = 0, offset: int = 0
) -> list[Message]:
    out: list[Message] = []
    while True:
        r = await backend.read(Read(topic=topic, partition=p, offset=offset))
        got = [m for b in r.batches for m in b.messages if m.offset >= offset]
        if not got:
            return out
        out.extend(got)
        offset = got[-1].offset + 1


def assert_intact(messages: list[Message], start: int = 0) -> None:
    assert [m.offset for m in messages] == list(range(start, start + len(messages)))
    for m in messages:
        assert m.value.rstrip(b".") == f"m{m.offset}".encode(), m


def partition_dir(root: Path, topic: Topic = TOPIC, p: int = 0) -> Path:
    return root / escape_name(topic.stream) / escape_name(topic.name) / str(p)


def logs(root: Path, topic: Topic = TOPIC, p: int = 0) -> list[Path]:
    return sorted(partition_dir(root, topic, p).glob("*.log"))


# Blocking file surgery the tests do between a close and a reopen (nothing else runs then).


def truncate(path: Path, size: int) -> None:
    os.truncate(path, size)


def append_bytes(path: Path, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)


def entries_under(root: Path) -> list[Path]:
    """Every file and directory below ``root``, resolved."""
    return [p.resolve() for p in root.rglob("*")]
