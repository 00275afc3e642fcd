"""``streamgate consume --count N`` stops while its partition readers are still sending: they
are stopped first, then their channel closed (closing it first broke a reader's send:
``trio.BrokenResourceError`` out of the command)."""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path

import pytest
import trio

from gateway.backends.base import running
from gateway.backends.embedded import EmbeddedBackend
from gateway.client.commands import start_position
from gateway.client.consume import consume
from gateway.model import Append, CreateTopic, Message, MessageBatch, Topic

TOPIC = Topic("default", "busy")
PARTITIONS = 4


async def test_count_stops_readers_that_are_still_sending(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Out:  # stands in for sys.stdout: consume writes to its buffer
        buffer = io.BytesIO()

    monkeypatch.setattr(sys, "stdout", Out())
    args = argparse.Namespace(
        stream=TOPIC.stream, topic=TOPIC.name, partition=None, count=1, group=None,
        follow=False, format="value", progress=False, start=start_position("earliest"),
    )  # fmt: skip
    with trio.fail_after(60):
        async with running(EmbeddedBackend(tmp_path)) as backend:
            await backend.create_topic(CreateTopic(topic=TOPIC, partitions=PARTITIONS))
            # 1 MB a read: each reader has many reads to send, more than the channel holds
            batch = MessageBatch([Message(value=b"%04d" % i + bytes(996)) for i in range(1000)])
            for p in range(PARTITIONS):
                for _ in range(20):
                    await backend.append(Append(topic=TOPIC, partition=p, batch=batch))
            for _ in range(20):  # every reader has more to send when the first message is out
                assert await consume(backend, args) == 0
    lines = Out.buffer.getvalue().splitlines()
    assert len(lines) == 20 and {line[:4] for line in lines} <= {b"%04d" % i for i in range(1000)}
