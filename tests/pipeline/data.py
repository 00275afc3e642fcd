"""Topics the pipeline tests read and write: filled before Spark reads them and read back after
it wrote, with the gateway's own backends (an embedded store closed before Spark opens it). A
message is known from its place: value, key, headers, id and timestamp derive from (topic,
partition, i)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Final

import trio

from gateway.backends.base import Backend
from gateway.backends.embedded import open_embedded
from gateway.client.session import connected
from gateway.model import (
    DEFAULT_STREAM,
    Append,
    CreateTopic,
    DescribeTopic,
    Header,
    Message,
    MessageBatch,
    Read,
    Topic,
)

BASE_MS: Final = 1_767_225_600_000  # 2026-01-01T00:00:00Z; message i is i ms after it
LIMIT_S: Final = 30.0

Where = Path | str  # an embedded store's directory, or any backend URL


def message(topic: str, partition: int, i: int) -> Message:
    return Message(
        value=f"{topic}/{partition}/{i}".encode(),
        key=f"k{i % 3}".encode() if i % 2 == 0 else None,
        headers=(Header("n", str(i).encode()), Header("from", b"test")),
        timestamp_us=(BASE_MS + i) * 1000,
        id=i + 1 if i % 3 == 0 else 0,
    )


@asynccontextmanager
async def _opened(where: Where) -> AsyncIterator[Backend]:
    if isinstance(where, Path):
        async with open_embedded(where, fsync="never") as backend:
            yield backend
    else:
        async with connected(where, LIMIT_S) as backend:
            yield backend


def fill(
    where: Where,
    counts: Mapping[str, Iterable[int]],
    *,
    stream: str = DEFAULT_STREAM,
    first: int = 0,
    create: bool = True,
) -> None:
    """Per topic, per partition, messages ``first`` .. ``first + count - 1``; with ``create``,
    each topic is created first, with as many partitions as ``counts`` gives."""

    async def main() -> None:
        with trio.fail_after(LIMIT_S):
            async with _opened(where) as backend:
                for name, per_partition in counts.items():
                    numbers = list(per_partition)
                    topic = Topic(stream, name)
                    if create:
                        await backend.create_topic(
                            CreateTopic(topic=topic, partitions=len(numbers))
                        )
                    for p, count in enumerate(numbers):
                        batch = [message(name, p, i) for i in range(first, first + count)]
                        if batch:
                            await backend.append(
                                Append(topic=topic, partition=p, batch=MessageBatch(batch))
                            )

    trio.run(main)


def create(where: Where, name: str, partitions: int, *, stream: str = DEFAULT_STREAM) -> None:
    fill(where, {name: [0] * partitions}, stream=stream)


def stored(where: Where, name: str, *, stream: str = DEFAULT_STREAM) -> list[list[Message]]:
    """Every message of every partition of the topic, in offset order."""

    async def main() -> list[list[Message]]:
        with trio.fail_after(LIMIT_S):
            async with _opened(where) as backend:
                topic = Topic(stream, name)
                info = (await backend.describe_topic(DescribeTopic(topic=topic))).info
                out = []
                for p in info.partitions:
                    got: list[Message] = []
                    while (offset := p.log_start_offset + len(got)) < p.next_offset:
                        result = await backend.read(
                            Read(topic=topic, partition=p.partition, offset=offset)
                        )
                        got += [m for b in result.batches for m in b.messages if m.offset >= offset]
                    out.append(got)
                return out

    return trio.run(main)


def values(partitions: list[list[Message]]) -> list[list[bytes]]:
    return [[m.value for m in p] for p in partitions]
