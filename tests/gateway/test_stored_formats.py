"""An embedded store written by every protocol's real client is readable by a fresh interpreter
that imports only the embedded backend (issue 13): the store owns the table of the formats it
keeps batches in, so no decoder depends on which modules a process happened to import.

A gateway on the embedded backend takes Kafka (confluent-kafka), RabbitMQ Stream (rstream), Iggy
(apache-iggy) and Rog producers, one topic each; it is stopped, then ``READER`` runs in a new
``sys.executable`` process, reads every partition of every topic as stored batches, decodes
each one and reports what it found.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TypedDict

import pytest
import trio
from prometheus_client import CollectorRegistry

from gateway.app import Running, serve_gateway
from gateway.model import DEFAULT_STREAM, CreateTopic, Topic
from tests.conftest import gateway_config
from tests.gateway.bridge.clients import PRODUCERS, Sent

pytestmark = pytest.mark.slow
# The format each protocol's batches are stored in, as the embedded store names it.
STORED_AS = {"kafka": "kafka", "rabbitmq_stream": "rabbitmq_stream", "iggy": "iggy", "rog": "sg1"}
REPO = Path(__file__).resolve().parents[2]

READER = r"""
import json
import sys

import trio

import gateway.backends.embedded as embedded
from gateway.model import ListTopics, Read

root, expected = sys.argv[1], json.loads(sys.argv[2])


async def main() -> None:
    found = {}
    async with embedded.open_embedded(root, fsync="never") as backend:
        for info in (await backend.list_topics(ListTopics())).topics:
            formats, rows = set(), []
            for p in info.partitions:
                offset = p.log_start_offset
                while offset < p.next_offset:
                    read = Read(topic=info.topic, partition=p.partition, offset=offset,
                                whole_batches=True)
                    for batch in (await backend.read(read)).batches:
                        assert batch.wire is not None and not batch.decoded, batch
                        formats.add(batch.wire.format.name)
                        messages = batch.messages
                        assert len(messages) == batch.wire.count, batch
                        rows += [[p.partition, m.offset, m.value.hex(),
                                  None if m.key is None else m.key.hex()] for m in messages]
                        offset = batch.base_offset + len(batch)
            name = f"{info.topic.stream}/{info.topic.name}"
            want = expected[name]
            assert sorted(formats) == [want["format"]], (name, formats)
            assert rows == want["rows"], (name, rows, want["rows"])
            found[name] = sorted(formats)
    # Nothing of the gateway but the embedded backend (and what it imports itself) was loaded.
    others = ("gateway.app", "gateway.cli", "gateway.client", "gateway.listeners",
              "gateway.router", "gateway.backends.url", "gateway.backends.kafka",
              "gateway.backends.iggy", "gateway.backends.rabbitmq_stream")
    loaded = sorted(m for m in sys.modules if m.startswith(others))
    assert loaded == [], loaded
    print(json.dumps(found, sort_keys=True))


trio.run(main)
"""


class Want(TypedDict):
    format: str  # the one format every batch of the topic is stored in
    rows: list[list[object]]  # partition, offset, value and key (hex) of each message


def expected_rows(sent: list[Sent]) -> list[list[object]]:
    return [
        [0, i, s.value.hex(), None if s.key is None else s.key.hex()] for i, s in enumerate(sent)
    ]


async def write_store(data: Path) -> dict[str, Want]:
    """Every protocol's producer writes one topic through a gateway, which is stopped after."""
    expected: dict[str, Want] = {}
    async with trio.open_nursery() as nursery:
        with trio.fail_after(10):
            running: Running = await nursery.start(
                lambda task_status: serve_gateway(
                    gateway_config(data), registry=CollectorRegistry(), task_status=task_status
                )
            )
        assert running.backend is not None
        for protocol, produce in PRODUCERS.items():
            name = f"from-{protocol}".replace("_", "-")
            with trio.fail_after(10):
                topic = Topic(DEFAULT_STREAM, name)
                await running.backend.create_topic(CreateTopic(topic=topic, partitions=1))
            sent = await produce(running, name)  # bounded in time by the client helpers
            expected[f"{DEFAULT_STREAM}/{name}"] = {
                "format": STORED_AS[protocol],
                "rows": expected_rows(sent),
            }
        nursery.cancel_scope.cancel()
    return expected


async def test_a_fresh_interpreter_decodes_what_every_protocol_stored(tmp_path: Path) -> None:
    data = tmp_path / "data"
    expected = await write_store(data)
    assert sorted(f["format"] for f in expected.values()) == sorted(STORED_AS.values())
    with trio.fail_after(60):
        done = await trio.run_process(
            [sys.executable, "-c", READER, str(data), json.dumps(expected)],
            cwd=REPO,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    found = json.loads(done.stdout)
    assert found == {name: [want["format"]] for name, want in expected.items()}
