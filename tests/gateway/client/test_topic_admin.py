"""``streamgate topics configs get|set`` and ``topics delete-records`` on the embedded store."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
import trio

from gateway.backends.base import running
from gateway.backends.embedded import EmbeddedBackend
from gateway.client.session import ClientError
from gateway.client.topics import delete_records, get_configs, set_configs
from gateway.model import Append, CreateTopic, Message, MessageBatch, Topic

TOPIC = Topic("default", "admin")


def _args(**values: object) -> argparse.Namespace:
    return argparse.Namespace(stream=TOPIC.stream, name=TOPIC.name, **values)


async def test_configs_and_delete_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with trio.fail_after(30):
        async with running(EmbeddedBackend(tmp_path)) as backend:
            await backend.create_topic(CreateTopic(topic=TOPIC, partitions=2))
            batch = MessageBatch([Message(value=b"m%d" % i) for i in range(5)])
            await backend.append(Append(topic=TOPIC, partition=0, batch=batch))

            assert await set_configs(backend, _args(settings=["retention.ms=60000"])) == 0
            assert await get_configs(backend, _args()) == 0
            shown = capsys.readouterr().out.splitlines()
            assert "retention.ms=60000" in shown
            assert any(line.startswith("max.message.bytes=") for line in shown)
            with pytest.raises(ClientError, match=r"cleanup\.policy"):
                await set_configs(backend, _args(settings=["cleanup.policy=compact"]))

            assert await delete_records(backend, _args(before=3, partition=0)) == 0
            assert capsys.readouterr().out.splitlines() == ["admin[0]\tlog_start=3"]
            assert await delete_records(backend, _args(before=-1, partition=None)) == 0
            lines = capsys.readouterr().out.splitlines()
            assert lines == ["admin[0]\tlog_start=5", "admin[1]\tlog_start=0"]
