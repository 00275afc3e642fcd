"""gateway.histograms: the per-command histograms expose exactly what prometheus_client's own
Histogram exposes for the same observations (so dashboards, alerts and the --workers sum read
them unchanged)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, disable_created_metrics, generate_latest
from prometheus_client import Histogram as ClientHistogram

from gateway.histograms import Histogram, histogram
from gateway.metrics import LATENCY_BUCKETS

LABELS = ("protocol", "command")


def both() -> tuple[CollectorRegistry, ClientHistogram, CollectorRegistry, Histogram]:
    disable_created_metrics()  # type: ignore[no-untyped-call]  # as gateway.metrics does
    theirs, ours = CollectorRegistry(auto_describe=True), CollectorRegistry(auto_describe=True)
    name, doc = "streamgate_x_seconds", "Time of x."
    return (
        theirs,
        ClientHistogram(name, doc, LABELS, buckets=LATENCY_BUCKETS, registry=theirs),
        ours,
        Histogram(name, doc, LABELS, buckets=LATENCY_BUCKETS, registry=ours),
    )


seconds = st.one_of(
    st.sampled_from(LATENCY_BUCKETS),  # on a bound: in that bucket
    st.floats(min_value=0, max_value=100, allow_nan=False),
    st.just(math.inf),
)


@given(st.lists(st.tuples(st.sampled_from(["kafka", "iggy"]), seconds), max_size=40))
def test_the_exposition_is_prometheus_clients(observed: list[tuple[str, float]]) -> None:
    theirs, client, ours, fast = both()
    for protocol in ("kafka", "iggy"):  # both label sets exist, observed or not
        client.labels(protocol, "read")
        fast.labels(protocol, "read")
    for protocol, amount in observed:
        client.labels(protocol, "read").observe(amount)
        fast.labels(protocol, "read").observe(amount)
    assert generate_latest(ours) == generate_latest(theirs)


def test_a_value_on_a_bound_is_in_that_bucket_and_sizes_are_checked() -> None:
    _, _, ours, fast = both()
    fast.labels("kafka", "read").observe(0.001)
    text = generate_latest(ours).decode()
    assert 'streamgate_x_seconds_bucket{command="read",le="0.00075",protocol="kafka"} 0.0' in text
    assert 'streamgate_x_seconds_bucket{command="read",le="0.001",protocol="kafka"} 1.0' in text
    assert 'streamgate_x_seconds_count{command="read",protocol="kafka"} 1.0' in text
    assert (
        ours.get_sample_value("streamgate_x_seconds_sum", {"protocol": "kafka", "command": "read"})
        == 0.001
    )
    with pytest.raises(ValueError, match="labels"):
        fast.labels("kafka")
    with pytest.raises(ValueError, match="Duplicated timeseries"):
        Histogram("streamgate_x_seconds", "again", LABELS, buckets=(1.0,), registry=ours)


def test_under_workers_the_histograms_are_prometheus_clients(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A worker of --workers writes its metrics to the supervisor's directory (multiprocess
    mode): there the histograms are prometheus_client's own, which write there."""
    made = histogram(
        "streamgate_y_seconds", "y", LABELS, buckets=(1.0,), registry=CollectorRegistry()
    )
    assert isinstance(made, Histogram)
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", "/nonexistent")
    made = histogram(
        "streamgate_y_seconds", "y", LABELS, buckets=(1.0,), registry=CollectorRegistry()
    )
    assert isinstance(made, ClientHistogram)
