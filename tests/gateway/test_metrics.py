"""The metrics issue 16 added: the ``[metrics]`` opt-ins (per-topic traffic, consumer-group
lag), process and trio metrics, no ``_created`` series. An in-process gateway on the embedded
store, driven by the project's Rog client; every wait bounded.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from gateway.app import Running, serve_gateway
from gateway.config import ConfigError, load
from gateway.metrics import Metrics, TopicFilter, WorkerProcesses, group_matches, topic_matches
from gateway.model import DEFAULT_STREAM, DeleteTopic, Topic
from protocols.rog import FetchOk, Ok
from tests.conftest import gateway_config
from tests.helpers.rog_client import RogClient

LIMIT_S = 20.0


def samples(registry: CollectorRegistry) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    text = generate_latest(registry).decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return samples(registry).get((name, frozenset(labels.items())))


# --- configuration ------------------------------------------------------------------------------


def test_metrics_lists_from_toml_environment_and_flags(tmp_path: Path) -> None:
    f = tmp_path / "sg.toml"
    f.write_text(
        '[metrics]\nlag_groups = ["billing", "etl-*"]\nlag_topics = ["orders*"]\n'
        'lag_interval_s = 5\ntopic_patterns = ["analytics/*", "orders"]\n'
    )
    c = load(f).metrics
    assert c.lag_groups == ("billing", "etl-*") and c.lag_topics == ("orders*",)
    assert c.lag_interval_s == 5.0 and c.topic_patterns == ("analytics/*", "orders")
    c = load(f, environ={"STREAMGATE_METRICS_TOPIC_PATTERNS": " a , b,,"}).metrics
    assert c.topic_patterns == ("a", "b")
    c = load(f, overrides={"metrics.lag_groups": "x"}).metrics
    assert c.lag_groups == ("x",)
    assert load().metrics.topic_patterns == () and load().metrics.lag_groups == ()


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"metrics.lag_groups": "g"}, "metrics.lag_topics is not"),
        ({"metrics.lag_topics": "t"}, "metrics.lag_groups is not"),
        ({"metrics.lag_interval_s": "0"}, "must be more than 0"),
    ],
)
def test_metrics_settings_that_cannot_work_are_refused(
    values: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        load(overrides=values)


def test_a_list_setting_refuses_what_is_not_a_list_of_names(tmp_path: Path) -> None:
    f = tmp_path / "sg.toml"
    f.write_text("[metrics]\ntopic_patterns = [1, 2]\n")
    with pytest.raises(ConfigError, match="expected a list of strings"):
        load(f)


# --- patterns -----------------------------------------------------------------------------------


def test_topic_patterns_match_the_name_or_stream_and_name() -> None:
    orders = Topic(DEFAULT_STREAM, "orders-eu")
    other = Topic("analytics", "orders-eu")
    assert topic_matches(["orders-*"], orders) and topic_matches(["orders-*"], other)
    assert topic_matches(["analytics/*"], other) and not topic_matches(["analytics/*"], orders)
    assert not topic_matches(["Orders-*"], orders)  # case-sensitive, as topic names are
    assert not topic_matches([], orders)
    chosen = TopicFilter(["default/orders-*"])
    assert chosen and chosen(orders) and not chosen(other)
    assert chosen(orders)  # decided once, then looked up
    assert not TopicFilter([])


def test_the_gateways_own_groups_need_a_pattern_of_their_own() -> None:
    assert group_matches(["*"], "billing")
    assert not group_matches(["*"], "__rabbitmq_publisher.p1")
    assert group_matches(["__rabbitmq_publisher.*"], "__rabbitmq_publisher.p1")
    assert not group_matches(["etl-*"], "billing")


# --- the registry -------------------------------------------------------------------------------


def test_no_created_series_and_process_metrics_are_there() -> None:
    registry = CollectorRegistry()
    m = Metrics(registry)
    m.observe_command("kafka", "append", "Produce", 0.001)
    text = generate_latest(registry).decode()
    assert "streamgate_command_duration_seconds_count{" in text
    assert "_created" not in text
    got = samples(registry)
    assert got[("process_resident_memory_bytes", frozenset())] > 0
    assert got[("process_open_fds", frozenset())] > 0
    assert ("process_cpu_seconds_total", frozenset()) in got
    # Known label values exist from the start, at zero: panels of errors show 0, not "no data".
    unavailable = {"backend": "embedded", "error_type": "backend_unavailable"}
    assert value(registry, "streamgate_backend_errors_total", **unavailable) == 0


def test_worker_processes_are_labelled_by_worker() -> None:
    registry = CollectorRegistry()
    WorkerProcesses(lambda: {"0": os.getpid()}, registry)
    got = samples(registry)
    for worker in ("supervisor", "0"):
        assert got[("process_resident_memory_bytes", frozenset({("worker", worker)}))] > 0
        assert ("process_cpu_seconds_total", frozenset({("worker", worker)})) in got


# --- a running gateway --------------------------------------------------------------------------


@pytest.fixture
async def metered(tmp_path: Path) -> AsyncIterator[tuple[Running, CollectorRegistry]]:
    config = gateway_config(
        tmp_path / "data",
        **{
            "metrics.topic_patterns": "metered-*",
            "metrics.lag_groups": "readers,other-*",
            "metrics.lag_topics": "metered-*",
            "metrics.lag_interval_s": "0.1",
        },
    )
    registry = CollectorRegistry()
    async with trio.open_nursery() as nursery:
        with trio.fail_after(10):
            running: Running = await nursery.start(
                lambda task_status: serve_gateway(
                    config, registry=registry, task_status=task_status
                )
            )
        yield running, registry
        nursery.cancel_scope.cancel()


async def until(registry: CollectorRegistry, name: str, wanted: float, **labels: str) -> None:
    while value(registry, name, **labels) != wanted:  # noqa: ASYNC110 - a sampler, no event
        await trio.sleep(0.05)


async def test_per_topic_traffic_and_consumer_lag(
    metered: tuple[Running, CollectorRegistry],
) -> None:
    running, registry = metered
    rog = RogClient(*running.address("rog"))
    with trio.fail_after(LIMIT_S):
        for topic in ("metered-a", "plain"):
            assert isinstance(await rog.create_log(topic, 1), Ok)
            for i in range(5):
                assert isinstance(await rog.publish(topic, 0, b"m%d" % i), Ok)
        # "readers" reads and acknowledges two (Rog's ack commits the group's position); the
        # group of another name reads nothing and is no label.
        for _ in range(2):
            assert isinstance(await rog.fetch("metered-a", 0, "readers"), FetchOk)
            assert isinstance(await rog.ack("metered-a", 0, "readers"), Ok)
            assert isinstance(await rog.fetch("plain", 0, "readers"), FetchOk)
            assert isinstance(await rog.ack("plain", 0, "readers"), Ok)
            assert isinstance(await rog.ack("metered-a", 0, "unwatched"), Ok)
        lag = {"group": "readers", "stream": DEFAULT_STREAM, "topic": "metered-a"}
        await until(registry, "streamgate_consumer_group_lag", 3, **lag)
        assert isinstance(await rog.ack("metered-a", 0, "readers"), Ok)
        await until(registry, "streamgate_consumer_group_lag", 2, **lag)

    got = samples(registry)
    metered_a = frozenset({("stream", DEFAULT_STREAM), ("topic", "metered-a")})
    assert got[("streamgate_topic_messages_in_total", metered_a)] == 5
    assert got[("streamgate_topic_bytes_in_total", metered_a)] == 10  # "m0".."m4"
    # Each fetch and ack reads one message (Rog's fetch-then-commit): 2 + 2 + 1 + 2 others'.
    assert got[("streamgate_topic_messages_out_total", metered_a)] == 7
    # As stored (the embedded store's batch framing included), so at least the values.
    assert got[("streamgate_topic_bytes_out_total", metered_a)] >= 14
    named = {dict(labels).get("topic") for (_, labels) in got}
    assert "plain" not in named  # not opted in: no series of its own
    lags = {dict(labels)["group"] for (name, labels) in got if name.endswith("group_lag")}
    assert lags == {"readers"}  # "unwatched" matches no lag_groups pattern
    assert got[("streamgate_trio_tasks", frozenset())] > 0
    assert got[("streamgate_trio_worker_threads_limit", frozenset())] > 0
    assert got[("streamgate_backend_up", frozenset({("backend", "embedded")}))] == 1


async def test_the_lag_of_a_deleted_topic_goes_away(
    metered: tuple[Running, CollectorRegistry],
) -> None:
    running, registry = metered
    rog = RogClient(*running.address("rog"))
    lag = {"group": "readers", "stream": DEFAULT_STREAM, "topic": "metered-gone"}
    with trio.fail_after(LIMIT_S):
        assert isinstance(await rog.create_log("metered-gone", 1), Ok)
        for i in range(3):
            assert isinstance(await rog.publish("metered-gone", 0, b"%d" % i), Ok)
        assert isinstance(await rog.ack("metered-gone", 0, "readers"), Ok)
        await until(registry, "streamgate_consumer_group_lag", 2, **lag)
        assert running.backend is not None
        await running.backend.delete_topic(DeleteTopic(topic=Topic(DEFAULT_STREAM, "metered-gone")))
        while value(registry, "streamgate_consumer_group_lag", **lag) is not None:  # noqa: ASYNC110
            await trio.sleep(0.05)
