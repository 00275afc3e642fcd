"""``streamgate produce``: messages from stdin or a file (one per line), or ``--count`` synthetic
ones for load, appended in batches to one partition. A message counts as acknowledged only once
the backend's ``append`` returned its offsets (DESIGN.md §2); the summary says how many and
which offsets."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import BinaryIO, Final

import trio

from gateway.backends.base import Backend
from gateway.model import (
    Append,
    GatewayError,
    Header,
    Message,
    MessageBatch,
    Topic,
)

from .background import background
from .progress import Progress, showing, wanted
from .session import ClientError
from .topics import check_partition, topic_info

_CHUNK: Final = 1 << 20  # bytes per read of the input
_READ_AHEAD: Final = 16  # chunks of lines the reader may be ahead of the appends (memory bound)


def parse_header(text: str) -> Header:
    """``--header name=value`` (the value may be empty or contain ``=``)."""
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise ClientError(f"--header wants name=value, not {text!r}")
    return Header(name, value.encode())


@dataclass(slots=True)
class Acknowledged:
    """What the backend accepted so far: the summary line."""

    count: int = 0
    first: int = -1
    last: int = -1

    def add(self, base_offset: int, count: int) -> None:
        if count <= 0:
            return
        self.first = base_offset if self.count == 0 else min(self.first, base_offset)
        self.last = max(self.last, base_offset + count - 1)
        self.count += count

    def summary(self, where: str) -> str:
        if self.count == 0:
            return f"acknowledged 0 messages on {where}"
        plural = "" if self.count == 1 else "s"
        return (
            f"acknowledged {self.count} message{plural} on {where}, "
            f"offsets {self.first}..{self.last}"
        )


def _value(i: int, size: int) -> bytes:
    """Synthetic message ``i`` of ``size`` bytes: its number, then filler, so that a consumer
    can read which one it got."""
    return (b"%d " % i).ljust(size, b"x")[:size]


class Synthetic:
    """``--count N --size B``: N messages, ``batch`` at a time."""

    def __init__(self, count: int, size: int, batch: int) -> None:
        self.count, self.size, self.batch = count, size, batch
        self.made = 0

    async def next_batch(self) -> list[bytes] | None:
        await trio.lowlevel.checkpoint()
        start, end = self.made, min(self.made + self.batch, self.count)
        if start >= end:
            return None
        self.made = end
        return [_value(i, self.size) for i in range(start, end)]


async def _read_lines(source: BinaryIO, send: trio.MemorySendChannel[list[bytes]]) -> None:
    """Split ``source`` into lines (the newline dropped; a last line without one still counts)
    and send them a chunk at a time. Reads run in a worker thread, abandoned when the command
    ends early: stdin may be a terminal nobody types into."""
    read = getattr(source, "read1", source.read)  # read1: what is there, not a full chunk
    async with send:
        rest: list[bytes] = []  # the line read so far, in pieces: a long one is joined once
        while True:
            chunk = await trio.to_thread.run_sync(read, _CHUNK, abandon_on_cancel=True)
            if not chunk:
                break
            if b"\n" not in chunk:
                rest.append(chunk)
                continue
            first, *lines, last = chunk.split(b"\n")
            await send.send([b"".join([*rest, first]), *lines])
            rest = [last] if last else []
        if rest:
            await send.send([b"".join(rest)])


class Lines:
    """Lines of the input in batches of at most ``batch``: as many as were read by the time the
    previous append returned, so a line typed at a terminal goes at once and a fast pipe fills
    whole batches."""

    def __init__(self, receive: trio.MemoryReceiveChannel[list[bytes]], batch: int) -> None:
        self.receive, self.batch = receive, batch
        self.pending: list[bytes] = []

    async def next_batch(self) -> list[bytes] | None:
        if not self.pending:
            try:
                self.pending = await self.receive.receive()
            except trio.EndOfChannel:
                return None
        while len(self.pending) < self.batch:
            try:
                self.pending += self.receive.receive_nowait()
            except (trio.WouldBlock, trio.EndOfChannel):
                break
        out, self.pending = self.pending[: self.batch], self.pending[self.batch :]
        return out


def _messages(
    values: list[bytes], key: bytes | None, headers: tuple[Header, ...], separator: bytes | None
) -> list[Message]:
    if separator is None:
        return [Message(value=v, key=key, headers=headers) for v in values]
    out = []
    for v in values:
        k, sep, rest = v.partition(separator)
        out.append(Message(value=rest, key=k, headers=headers) if sep else
                   Message(value=v, key=key, headers=headers))  # fmt: skip
    return out


async def produce(backend: Backend, args: argparse.Namespace) -> int:
    topic = Topic(args.stream, args.topic)
    if args.batch < 1:
        raise ClientError(f"--batch must be at least 1, not {args.batch}")
    if args.size < 0:
        raise ClientError(f"--size must not be negative, not {args.size}")
    key = None if args.key is None else args.key.encode()
    headers = tuple(parse_header(h) for h in args.header)
    separator = None if args.key_separator is None else args.key_separator.encode()
    # Ask first: a missing topic or partition fails before any input is read.
    check_partition(await topic_info(backend, topic), args.partition)
    where = f"{topic.name!r} partition {args.partition}"
    acked = Acknowledged()
    progress = Progress("produced", enabled=wanted(args.progress))
    with _opened(args) as source:
        try:
            async with background() as nursery, showing(progress):
                batches: Synthetic | Lines
                if source is None:
                    batches = Synthetic(args.count, args.size, args.batch)
                else:
                    send, receive = trio.open_memory_channel[list[bytes]](_READ_AHEAD)
                    nursery.start_soon(_read_lines, source, send)
                    batches = Lines(receive, args.batch)
                while (values := await batches.next_batch()) is not None:
                    batch = MessageBatch(_messages(values, key, headers, separator))
                    result = await backend.append(
                        Append(topic=topic, partition=args.partition, batch=batch)
                    )
                    acked.add(result.base_offset, result.count)
                    progress.add(result.count, sum(len(v) for v in values))
        except GatewayError as exc:
            if acked.count == 0:
                raise
            raise ClientError(f"{exc.message} ({acked.summary(where)} before it)") from None
    print(acked.summary(where), flush=True)
    return 0


@contextmanager
def _opened(args: argparse.Namespace) -> Iterator[BinaryIO | None]:
    """The input: ``--file PATH``; stdin for ``-`` or no ``--file``; None with ``--count``."""
    if args.count is not None:
        yield None
    elif args.file in (None, "-"):
        yield sys.stdin.buffer
    else:
        try:
            source = open(args.file, "rb")  # noqa: SIM115 - closed below
        except OSError as exc:
            raise ClientError(f"cannot read {args.file}: {exc.strerror}") from None
        with source:
            yield source
