"""``AwaitData``, one long poll over many partitions (a Kafka Fetch's wait), through the router on
every backend: the embedded store waits with one event its partitions set, the others with the
router's Read per partition. Either way it ends when any partition has news, at the deadline, or
when a topic goes, and it reads nothing."""

from __future__ import annotations

import pytest
import trio
import trio.testing
from prometheus_client import CollectorRegistry

from gateway.backends.base import Backend, DataWaits
from gateway.backends.embedded import EmbeddedBackend
from gateway.metrics import Metrics
from gateway.model import AwaitData, DeleteTopic, Topic
from gateway.router import RequestContext, Router
from tests.gateway.backends.test_conformance import append, msgs, new_topic

PARTITIONS = 8


def _router(backend: Backend) -> tuple[Router, CollectorRegistry]:
    registry = CollectorRegistry()
    return Router(backend, Metrics(registry, backend=backend.name)), registry


def _at_end(topic: Topic, ends: dict[int, int]) -> tuple[tuple[Topic, int, int], ...]:
    return tuple((topic, p, ends.get(p, 0)) for p in range(PARTITIONS))


async def test_ends_on_news_from_any_partition(backend: Backend) -> None:
    r, registry = _router(backend)
    ctx = RequestContext("kafka", "fetch")
    topic = await new_topic(backend, partitions=PARTITIONS)
    await append(backend, topic, msgs(2), p=3)
    assert isinstance(backend, DataWaits) == (backend.name in ("embedded", "kafka"))
    with trio.fail_after(20):
        # Data past an offset of one partition: at once, without waiting.
        start = trio.current_time()
        done = await r.execute(AwaitData(targets=_at_end(topic, {}), max_wait_ms=30_000), ctx)
        assert trio.current_time() - start < 10
        assert done.waited_s < 10
        # Every partition at its end: it waits until one of them grows, whichever.
        ended: list[float] = []

        async def waiter() -> None:
            cmd = AwaitData(targets=_at_end(topic, {3: 2}), max_wait_ms=30_000)
            ended.append((await r.execute(cmd, ctx)).waited_s)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(waiter)
            await trio.testing.wait_all_tasks_blocked()
            await trio.sleep(0.3)  # a remote backend's waits are on sockets, not tasks
            assert ended == []
            await append(backend, topic, msgs(1), p=6)
        assert len(ended) == 1 and 0 < ended[0] < 10
    # Measured as long-poll time, once per wait, not once per partition.
    waits = registry.get_sample_value(
        "streamgate_long_poll_wait_seconds_count", {"protocol": "kafka", "backend": backend.name}
    )
    assert waits == 1
    if isinstance(backend, EmbeddedBackend):  # nothing left watching the partitions
        for p in range(PARTITIONS):
            assert not backend.store.partition(topic, p)._watchers


async def test_ends_at_the_deadline_having_read_nothing(backend: Backend) -> None:
    r, _ = _router(backend)
    topic = await new_topic(backend, partitions=PARTITIONS)
    with trio.fail_after(20):
        start = trio.current_time()
        cmd = AwaitData(targets=_at_end(topic, {}), max_wait_ms=1000)
        done = await r.execute(cmd, RequestContext("kafka", "fetch"))
        assert 1 - 1e-6 <= trio.current_time() - start < 10
        assert done.waited_s == pytest.approx(1, abs=0.5)


async def test_deleting_a_topic_ends_the_wait(backend: Backend) -> None:
    r, _ = _router(backend)
    topic = await new_topic(backend, partitions=2)
    other = await new_topic(backend, partitions=2)
    ended = []
    with trio.fail_after(20):

        async def waiter() -> None:
            targets = ((other, 0, 0), (other, 1, 0), (topic, 0, 0), (topic, 1, 0))
            cmd = AwaitData(targets=targets, max_wait_ms=30_000)
            ended.append(await r.execute(cmd, RequestContext("kafka", "fetch")))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(waiter)
            await trio.testing.wait_all_tasks_blocked()
            await trio.sleep(0.3)
            assert ended == []
            await backend.delete_topic(DeleteTopic(topic=topic))
        assert len(ended) == 1
        # A topic that is not there at all: no wait (the read that follows says so).
        cmd = AwaitData(targets=((topic, 0, 0),), max_wait_ms=30_000)
        start = trio.current_time()
        await r.execute(cmd, RequestContext("kafka", "fetch"))
        assert trio.current_time() - start < 10
