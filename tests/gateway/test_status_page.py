"""The status page's numbers: samples of a real metrics registry, per-minute rates and p99 from
their differences, the ring of samples, the JSON document; and the page's own HTML (its
Content-Security-Policy admits exactly its inline script and style, and it loads nothing)."""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
from html.parser import HTMLParser

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Histogram

from gateway.metrics import LATENCY_BUCKETS, Metrics
from gateway.redact import MASK
from gateway.status_html import CONTENT_SECURITY_POLICY, PAGE, REFRESH_MS
from gateway.status_page import (
    Ring,
    Sample,
    StatusBoard,
    WorkerState,
    bucket_increase,
    command_rates,
    increase,
    protocol_rows,
    quantile,
    take_sample,
)

INF = math.inf


def sample(at: float, **latency: tuple[tuple[float, float], ...]) -> Sample:
    return Sample(
        at=at,
        latency={("kafka", k): v for k, v in latency.items()},
        errors={},
        per_protocol={},
        backend_up=None,
    )


# --- quantile -----------------------------------------------------------------------------------


def test_quantile_interpolates_inside_the_bucket() -> None:
    # 100 observations between 1 ms and 2.5 ms: the 99th lies 99% of the way through it.
    buckets = ((0.001, 0.0), (0.0025, 100.0), (INF, 100.0))
    assert quantile(0.99, buckets) == pytest.approx(0.001 + 0.0015 * 0.99)


def test_quantile_in_the_first_bucket_starts_from_zero() -> None:
    assert quantile(0.5, ((0.001, 10.0), (INF, 10.0))) == pytest.approx(0.0005)


def test_quantile_beyond_the_last_bound_is_that_bound() -> None:
    assert quantile(0.99, ((0.001, 1.0), (30.0, 1.0), (INF, 100.0))) == 30.0


def test_quantile_without_observations_is_none() -> None:
    assert quantile(0.99, ((0.001, 0.0), (INF, 0.0))) is None
    assert quantile(0.99, ()) is None


@given(st.lists(st.floats(min_value=0.0, max_value=40.0), min_size=1, max_size=300))
def test_quantile_lies_in_the_bucket_of_the_true_percentile(values: list[float]) -> None:
    """Against prometheus_client's own Histogram: the estimate lies within the bucket that holds
    the ceil(0.99 n)-th smallest observation (what histogram_quantile promises)."""
    registry = CollectorRegistry()
    histogram = Histogram("h_seconds", "x", buckets=LATENCY_BUCKETS, registry=registry)
    for v in values:
        histogram.observe(v)
    buckets = tuple(
        (float(s.labels["le"]), s.value)
        for s in next(iter(registry.collect())).samples
        if s.name == "h_seconds_bucket"
    )
    estimate = quantile(0.99, buckets)
    assert estimate is not None
    true = sorted(values)[math.ceil(0.99 * len(values)) - 1]
    bounds = (0.0, *LATENCY_BUCKETS)
    upper_index = next((i for i, b in enumerate(LATENCY_BUCKETS) if true <= b), None)
    if upper_index is None:  # beyond the last bound: reported as that bound
        assert estimate == LATENCY_BUCKETS[-1]
    else:
        assert bounds[upper_index] <= estimate <= LATENCY_BUCKETS[upper_index]


# --- increases and rates ------------------------------------------------------------------------


def test_increase_counts_a_reset_counter_from_zero() -> None:
    assert increase(15.0, 10.0) == 5.0
    assert increase(3.0, 10.0) == 3.0  # a new process: it counted 3 since


def test_bucket_increase() -> None:
    old = ((0.001, 2.0), (INF, 3.0))
    assert bucket_increase(((0.001, 5.0), (INF, 9.0)), old) == ((0.001, 3.0), (INF, 6.0))
    assert bucket_increase(((0.001, 1.0), (INF, 1.0)), old) == ((0.001, 1.0), (INF, 1.0))
    assert bucket_increase(((0.001, 1.0), (INF, 1.0)), None) == ((0.001, 1.0), (INF, 1.0))


def test_command_rates_only_commands_that_ran_in_the_window() -> None:
    base = sample(100.0, append=((0.001, 10.0), (INF, 10.0)), fetch=((0.001, 4.0), (INF, 4.0)))
    now = sample(130.0, append=((0.001, 70.0), (INF, 70.0)), fetch=((0.001, 4.0), (INF, 4.0)),
                 list_topics=((0.001, 0.0), (INF, 3.0)))  # fmt: skip
    rates = {r.command: r for r in command_rates(base, now)}
    assert set(rates) == {"append", "list_topics"}  # fetch did not run in these 30 s
    assert rates["append"].count == 60
    assert rates["append"].per_s == pytest.approx(2.0)
    assert rates["append"].p99_s == pytest.approx(0.001 * 0.99)
    assert rates["list_topics"].per_s == pytest.approx(0.1)
    assert rates["list_topics"].p99_s == 0.001  # all beyond 1 ms: the last finite bound
    assert command_rates(now, now) == []


def test_sample_of_a_real_registry_sums_what_the_page_does_not_show() -> None:
    metrics = Metrics(CollectorRegistry(), backend="embedded", process=False)
    for _ in range(3):
        metrics.observe_command("kafka", "append", "Produce", 0.0004)
    metrics.observe_command("kafka", "append", "Produce", 0.02, error_type="too_large")
    metrics.observe_command("rog", "append", "publish", 0.0001)
    metrics.connections_active.labels("kafka").inc(2)
    metrics.connections.labels("kafka").inc(5)
    metrics.connection_errors.labels("kafka", "reset").inc()
    metrics.connection_errors.labels("kafka", "idle_timeout").inc()
    metrics.messages_in.labels("kafka").inc(40)
    metrics.backend_up.labels("embedded").set(1)
    s = take_sample(metrics.registry, 7.0)
    kafka = s.latency[("kafka", "append")]
    assert kafka[-1] == (INF, 4.0)  # ok and error summed
    assert dict(kafka)[0.0005] == 3.0
    assert s.errors == {("kafka", "append"): 1.0}
    assert s.latency[("rog", "append")][-1] == (INF, 1.0)
    assert s.per_protocol["kafka"]["active"] == 2.0
    assert s.per_protocol["kafka"]["accepted"] == 5.0
    assert s.per_protocol["kafka"]["connection_errors"] == 2.0  # reasons summed
    assert s.per_protocol["kafka"]["messages_in"] == 40.0
    assert s.backend_up == 1.0


def test_protocol_rows_listeners_first_rates_over_the_window() -> None:
    base = Sample(0.0, {}, {}, {"kafka": {"accepted": 2.0, "messages_in": 10.0}}, None)
    now = Sample(
        20.0, {}, {},
        {"kafka": {"active": 3.0, "accepted": 6.0, "messages_in": 50.0}, "rog": {"accepted": 1.0}},
        None,
    )  # fmt: skip
    rows = protocol_rows(base, now, ["iggy", "kafka"])
    assert [r["protocol"] for r in rows] == ["iggy", "kafka", "rog"]
    kafka = rows[1]
    assert kafka["active"] == 3.0
    assert kafka["accepted_total"] == 6.0
    assert kafka["accepted_per_s"] == pytest.approx(0.2)
    assert kafka["messages_in_per_s"] == pytest.approx(2.0)
    assert kafka["messages_out_per_s"] == 0.0
    assert rows[0]["accepted_total"] == 0.0


# --- the ring -----------------------------------------------------------------------------------


def test_ring_base_is_the_oldest_sample_of_the_last_minute() -> None:
    ring = Ring(window_s=60.0, every_s=5.0)
    assert ring.base(0.0) is None
    for t in range(0, 75, 5):
        ring.add(sample(float(t)))
    base = ring.base(72.0)
    assert base is not None and base.at == 15.0
    assert len(ring) == 14  # a minute of samples and one more, no longer history
    stalled = ring.base(500.0)  # sampling fell behind: the newest, and the window says so
    assert stalled is not None and stalled.at == 70.0


# --- the document, sampled over (virtual) time ---------------------------------------------------


async def test_document_rates_cover_the_last_minute_only(autojump_clock: trio.abc.Clock) -> None:
    metrics = Metrics(CollectorRegistry(), backend="rabbitmq_stream", process=False)
    secret = "Sup3r-Secr3t"
    board = StatusBoard(
        metrics.registry,
        backend="rabbitmq_stream",
        backend_url=f"rabbitmq-stream://app:{secret}@rabbit:5552/",
        listeners=[("kafka", "0.0.0.0", 9092), ("rog", "::", 7878)],
        scope="this process",
    )

    async def not_ready() -> tuple[bool, str]:
        return False, f"backend unavailable: login app/{secret} refused"

    async with trio.open_nursery() as nursery:
        await nursery.start(board.run)
        await trio.sleep(10)
        for _ in range(120):
            metrics.observe_command("kafka", "append", "Produce", 0.0003)
        metrics.observe_command("kafka", "create_topic", "CreateTopics", 0.001, "already_exists")
        await trio.sleep(20)
        doc = await board.document(not_ready)
        text = json.dumps(doc, allow_nan=False)
        assert secret not in text
        assert doc["ready"] is False
        assert doc["reason"] == f"backend unavailable: login app/{MASK} refused"
        assert doc["backend"] == {
            "name": "rabbitmq_stream",
            "url": f"rabbitmq-stream://app:{MASK}@rabbit:5552/",
            "up": 0.0,  # created at 0; nothing here checks it (Health.ready sets it)
        }
        assert doc["listeners"] == [
            {"protocol": "kafka", "address": "0.0.0.0:9092"},
            {"protocol": "rog", "address": "[::]:7878"},
        ]
        assert doc["window_s"] == pytest.approx(30.0)  # up for 30 s: the window so far
        commands = {c["command"]: c for c in doc["commands"]}  # type: ignore[attr-defined]
        assert commands["append"]["per_s"] == pytest.approx(4.0)
        assert commands["append"]["errors_per_s"] == 0.0
        assert 0.00025 < commands["append"]["p99_s"] <= 0.0005
        assert commands["create_topic"]["errors_per_s"] == pytest.approx(1 / 30)
        assert doc["workers"] is None
        # A minute and more after the traffic: nothing ran in the window.
        await trio.sleep(65)
        later = await board.document(not_ready)
        assert later["commands"] == []
        assert 55.0 <= later["window_s"] <= 60.0  # type: ignore[operator]
        nursery.cancel_scope.cancel()


async def test_document_lists_workers(autojump_clock: trio.abc.Clock) -> None:
    states = [WorkerState(0, 101, True, 1), WorkerState(1, 102, False, 2)]
    board = StatusBoard(
        CollectorRegistry(), backend="kafka", backend_url="kafka://b1:9092",
        listeners=[], scope="2 workers, their metrics summed", workers=lambda: states,
    )  # fmt: skip

    async def ready() -> tuple[bool, str]:
        return True, "ok"

    doc = await board.document(ready)
    assert doc["workers"] == [
        {"index": 0, "pid": 101, "running": True, "starts": 1},
        {"index": 1, "pid": 102, "running": False, "starts": 2},
    ]
    assert doc["uptime_s"] is None and doc["window_s"] == 0.0 and doc["commands"] == []


# --- the page -----------------------------------------------------------------------------------


class _Inline(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.inline: dict[str, list[str]] = {"script": [], "style": []}
        self.references: list[tuple[str, str, str | None]] = []
        self._in: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._in = tag if tag in self.inline else None
        if tag in self.inline:
            self.inline[tag].append("")
        self.references += [(tag, k, v) for k, v in attrs if k in ("src", "href", "action")]

    def handle_endtag(self, tag: str) -> None:
        self._in = None

    def handle_data(self, data: str) -> None:
        if self._in is not None:
            self.inline[self._in][-1] += data


def test_page_policy_admits_its_inline_script_and_style_only() -> None:
    parsed = _Inline()
    parsed.feed(PAGE.decode())
    assert len(parsed.inline["script"]) == 1 and len(parsed.inline["style"]) == 1
    for tag, directive in (("script", "script-src"), ("style", "style-src")):
        digest = hashlib.sha256(parsed.inline[tag][0].encode()).digest()
        allowed = re.search(rf"{directive} ([^;]+)", CONTENT_SECURITY_POLICY)
        assert allowed is not None
        assert allowed.group(1) == f"'sha256-{base64.b64encode(digest).decode()}'"
    assert "default-src 'none'" in CONTENT_SECURITY_POLICY
    assert "connect-src 'self'" in CONTENT_SECURITY_POLICY


def test_page_loads_nothing_from_elsewhere() -> None:
    parsed = _Inline()
    parsed.feed(PAGE.decode())
    # Links to the admin port's own endpoints (relative) and an empty icon, nothing else.
    assert sorted(parsed.references) == [
        ("a", "href", "metrics"),
        ("a", "href", "readyz"),
        ("a", "href", "status.json"),
        ("a", "href", "status.json"),
        ("link", "href", "data:,"),
    ]
    assert "//" not in parsed.inline["script"][0].replace("://", "")
    assert f"setTimeout(refresh, {REFRESH_MS})" in parsed.inline["script"][0]
    assert 'fetch("status.json"' in parsed.inline["script"][0]
