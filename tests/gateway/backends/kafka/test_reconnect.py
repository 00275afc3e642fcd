"""The Kafka backend when its broker goes away and comes back (Tansu stopped and started again
on the same port, by pid): commands and ``ping`` fail fast with ``BackendUnavailable`` meanwhile,
and the backend reconnects by itself. Tansu keeps nothing in memory across a restart."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import trio

from gateway.backends.kafka.backend import KafkaBackend, open_kafka
from gateway.model import (
    DEFAULT_STREAM,
    Append,
    BackendUnavailable,
    CreateTopic,
    Message,
    MessageBatch,
    Read,
    Topic,
)
from tests.helpers.tansu import Tansu

from .conftest import LIMIT_S

RECOVER_S = 15.0  # backoff tops out at 5 s


async def ready(kafka: KafkaBackend) -> None:
    """Until ``ping`` passes, bounded."""
    with trio.fail_after(RECOVER_S):
        while True:
            try:
                await kafka.ping()
                return
            except BackendUnavailable:
                await trio.sleep(0.1)


async def round_trip(kafka: KafkaBackend) -> None:
    topic = Topic(DEFAULT_STREAM, f"t-{uuid.uuid4().hex[:8]}")
    with trio.fail_after(LIMIT_S):
        await kafka.create_topic(CreateTopic(topic=topic, partitions=1))
        batch = MessageBatch([Message(value=b"one"), Message(value=b"two")])
        await kafka.append(Append(topic=topic, partition=0, batch=batch))
        result = await kafka.read(Read(topic=topic, partition=0, offset=0))
    assert [m.value for b in result.batches for m in b.messages] == [b"one", b"two"]


async def recovers(kafka: KafkaBackend, stopped: Tansu, log_path: Path) -> None:
    """Start Tansu again on the stopped one's port: the backend is back by itself."""
    restarted = Tansu(stopped.binary, stopped.port, log_path)
    await restarted.start()
    try:
        await ready(kafka)
        await round_trip(kafka)
    finally:
        await restarted.stop()


async def test_reconnects_after_the_broker_restarts(tansu: Tansu, kafka: KafkaBackend) -> None:
    retried: list[str] = []
    kafka.retries.listen(retried.append)  # what streamgate_backend_retries_total counts
    await round_trip(kafka)
    assert retried == []
    await tansu.stop()
    with trio.fail_after(LIMIT_S):
        with pytest.raises(BackendUnavailable):
            await kafka.ping()
        with pytest.raises(BackendUnavailable):
            await round_trip(kafka)
        with pytest.raises(BackendUnavailable):  # fails fast while down: no wait per command
            await kafka.ping()
    await recovers(kafka, tansu, tansu.log_path)
    assert retried and set(retried) == {"reconnect"}, retried


async def test_starts_while_the_broker_is_down(tmp_path: Path, tansu: Tansu) -> None:
    await tansu.stop()
    async with open_kafka(tansu.url) as kafka:
        with trio.fail_after(LIMIT_S), pytest.raises(BackendUnavailable):
            await kafka.ping()
        restarted = Tansu(tansu.binary, tansu.port, tmp_path / "again.log")
        await restarted.start()
        try:
            # Nobody asks meanwhile: the backend reconnects by itself (what /readyz then sees).
            with trio.fail_after(RECOVER_S):
                while kafka.cluster_failure is not None:  # noqa: ASYNC110 - no event to await
                    await trio.sleep(0.05)
            await round_trip(kafka)
        finally:
            await restarted.stop()
