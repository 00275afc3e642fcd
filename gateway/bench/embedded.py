"""Append and read throughput of the embedded log, measured in-process (no network, no codec).

Three figures: appending batches of decoded messages (sg1 encoding + framing + write), reading
them back as stored batches (what a reader in the stored format gets: no decoding), and reading
plus decoding every record into ``Message`` objects (what a reader in another format pays).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass

from gateway.backends.embedded import EmbeddedBackend, open_embedded
from gateway.model import Append, CreateTopic, Message, MessageBatch, Read, Topic

_TOPIC = Topic("bench", "embedded")
_READ_MAX_BYTES = 4 << 20


@dataclass(frozen=True, slots=True, kw_only=True)
class EmbeddedBenchResult:
    message_size: int
    batch_size: int
    total_messages: int
    fsync: str
    append_seconds: float
    read_seconds: float
    decode_seconds: float

    def _rate(self, seconds: float) -> float:
        return self.total_messages / seconds if seconds > 0 else float("inf")

    @property
    def append_msgs_per_s(self) -> float:
        return self._rate(self.append_seconds)

    @property
    def append_mb_per_s(self) -> float:
        return self.append_msgs_per_s * self.message_size / 1e6

    @property
    def read_msgs_per_s(self) -> float:
        return self._rate(self.read_seconds)

    @property
    def read_mb_per_s(self) -> float:
        return self.read_msgs_per_s * self.message_size / 1e6

    @property
    def decode_msgs_per_s(self) -> float:
        return self._rate(self.decode_seconds)


async def _read_all(backend: EmbeddedBackend, total: int, *, decode: bool) -> float:
    offset = 0
    start = time.perf_counter()
    while offset < total:
        result = await backend.read(
            Read(topic=_TOPIC, partition=0, offset=offset, max_bytes=_READ_MAX_BYTES)
        )
        for batch in result.batches:
            if decode:
                offset += len(batch.messages)
            else:
                offset += len(batch)
    return time.perf_counter() - start


async def bench_embedded(
    path: str | os.PathLike[str],
    *,
    message_size: int,
    batch_size: int,
    total_messages: int,
    fsync: str,
) -> EmbeddedBenchResult:
    """Run in a fresh temp dir under ``path`` (removed afterwards)."""
    os.makedirs(path, exist_ok=True)
    root = tempfile.mkdtemp(prefix="embedded-", dir=path)
    try:
        # Timestamps left at 0: the store stamps them, as it does for most producers.
        value = os.urandom(message_size)
        batch = [Message(value=value) for _ in range(batch_size)]
        batches = -(-total_messages // batch_size)
        total = batches * batch_size
        async with open_embedded(root, fsync=fsync) as backend:
            await backend.create_topic(CreateTopic(topic=_TOPIC, partitions=1))
            start = time.perf_counter()
            for _ in range(batches):
                await backend.append(Append(topic=_TOPIC, partition=0, batch=MessageBatch(batch)))
            append_s = time.perf_counter() - start
            read_s = await _read_all(backend, total, decode=False)
            decode_s = await _read_all(backend, total, decode=True)
        return EmbeddedBenchResult(
            message_size=message_size,
            batch_size=batch_size,
            total_messages=total,
            fsync=fsync,
            append_seconds=append_s,
            read_seconds=read_s,
            decode_seconds=decode_s,
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


def format_result(r: EmbeddedBenchResult) -> str:
    head = (
        f"embedded store: {r.total_messages:,} messages of {r.message_size} B, "
        f"batches of {r.batch_size}, fsync={r.fsync}"
    )
    rows = [
        ("append", r.append_msgs_per_s, f"{r.append_mb_per_s:10.1f}"),
        ("read (stored batches)", r.read_msgs_per_s, f"{r.read_mb_per_s:10.1f}"),
        ("read + decode to Message", r.decode_msgs_per_s, f"{'':>10}"),
    ]
    lines = [head, f"  {'':<26}{'messages/s':>14}{'MB/s':>11}"]
    lines += [f"  {name:<26}{rate:>14,.0f} {mb}" for name, rate, mb in rows]
    return "\n".join(lines)
