"""A write task that fails half way and runs again (Spark's retry), and a streaming micro-batch
written twice (a restarted query's replay), run as an executor runs them (``write_task``) but
without Spark's scheduler, which in local mode never retries a task. Where the backend can tell a
repeat (pipeline/dedup.py) every row is stored once; through Iggy, and through a Kafka listener
(a Kafka client cannot choose its producer ids), nothing can, and the repeat is stored again: the
README says so, and so does this test."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pytest

from pipeline.dedup import Attempt
from pipeline.options import write_options
from pipeline.writer import Written, write_task
from tests.helpers.gateways import running_gateway
from tests.helpers.rabbitmq_shared import shared_rabbitmq
from tests.pipeline.data import create, stored
from tests.pipeline.threads import held

pytestmark = pytest.mark.timeout(120)

LISTENERS = ("kafka", "rabbitmq_stream", "iggy")
FAIL_AFTER = 120  # 12 batches of 10 stored when the first run dies: more than Kafka's 5 kept
_topics = itertools.count()


class TaskLost(Exception):
    """What kills the first run (an executor lost, a fetch failure...)."""


@dataclass(frozen=True)
class Target:
    url: str  # where the task writes
    topic: str
    reader: str | Path  # where the test reads it back (data.stored)
    dedup: bool  # whether the backend can tell a repeat


@pytest.fixture(scope="module")
def gateway_urls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    base = tmp_path_factory.mktemp("retries")
    directory = base / "data"
    directory.mkdir()
    with held(lambda: running_gateway(f"embedded:{directory}", base, "retries")) as gateway:
        a = gateway.addresses
        yield {
            "kafka": f"kafka://{a['kafka']}",
            "rabbitmq_stream": f"rabbitmq-stream://guest:guest@{a['rabbitmq_stream']}/%2F",
            "iggy": f"iggy://iggy:iggy@{a['iggy']}",
        }


@pytest.fixture(params=["embedded", *(f"{name} listener" for name in LISTENERS), "rabbitmq"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    kind: str = request.param
    if kind == "embedded":
        create(tmp_path / "data", "retried", 1)
        return Target(f"embedded:{tmp_path / 'data'}", "retried", tmp_path / "data", dedup=True)
    if kind == "rabbitmq":  # a real RabbitMQ: the broker deduplicates
        shared = shared_rabbitmq()
        url = shared.url(shared.new_vhost())
        create(url, "retried", 1)
        return Target(url, "retried", url, dedup=True)
    listener = kind.split()[0]
    urls: dict[str, str] = request.getfixturevalue("gateway_urls")
    # a topic of its own on the module's gateway, made and read back through the Kafka listener
    # (see test_listeners.py on the RabbitMQ one)
    topic = f"retried-{listener}-{next(_topics)}"
    create(urls["kafka"], topic, 1)
    # through the Kafka listener the writer is a Kafka client: at least once (pipeline/dedup.py)
    return Target(urls[listener], topic, urls["kafka"], dedup=listener == "rabbitmq_stream")


def batches(first: int, last: int, fail_after: int | None = None) -> Iterator[pa.RecordBatch]:
    """Rows ``v<first>`` .. ``v<last - 1>`` for partition 0, 20 to an Arrow batch."""
    for start in range(first, last, 20):
        if fail_after is not None and start >= first + fail_after:
            raise TaskLost
        values = [f"v{i}".encode() for i in range(start, min(start + 20, last))]
        yield pa.record_batch(
            [pa.array(values, pa.binary()), pa.array([0] * len(values), pa.int32())],
            names=["value", "partition"],
        )


def run(
    target: Target, attempt: Attempt, first: int, last: int, fail_after: int | None = None
) -> Written:
    options = write_options({"url": target.url, "topic": target.topic, "batchSize": "10"})
    return write_task(options, attempt, batches(first, last, fail_after))


def stored_values(target: Target) -> list[bytes]:
    [partition] = stored(target.reader, target.topic)
    return [m.value for m in partition]


def v(first: int, last: int) -> list[bytes]:
    return [f"v{i}".encode() for i in range(first, last)]


def test_a_retried_task(target: Target) -> None:
    attempt = Attempt("write-1", partition=3)
    with pytest.raises(TaskLost):
        run(target, attempt, 0, 200, fail_after=FAIL_AFTER)
    assert stored_values(target) == v(0, FAIL_AFTER)
    report = run(target, attempt, 0, 200)  # the retry: same write, same Spark partition
    assert report.messages == 200
    if target.dedup:
        assert stored_values(target) == v(0, 200)
    else:
        assert stored_values(target) == v(0, FAIL_AFTER) + v(0, 200)


def test_a_replayed_micro_batch(target: Target) -> None:
    # micro-batches 7, 8 and 9 of a query, 8 written twice (its replay after a restart)
    for batch, first, last in [(7, 0, 50), (8, 50, 120), (8, 50, 120), (9, 120, 130)]:
        run(target, Attempt("query-1", partition=0, batch=batch), first, last)
    if target.dedup:
        assert stored_values(target) == v(0, 130)
    else:
        assert stored_values(target) == v(0, 120) + v(50, 130)
