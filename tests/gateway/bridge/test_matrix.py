"""The bridge matrix (issue 6): for every (producer protocol, consumer protocol) among Kafka,
RabbitMQ Stream, Iggy and Rog, on the embedded backend and on a real RabbitMQ, what the real
client of one produced is consumed by the real client of the other: values, keys, headers,
timestamps and ids as DESIGN.md §3 says (tests/gateway/bridge/expected.py), in order, none lost
or duplicated, and the lossy conversions counted in ``streamgate_translation_lossy_total``.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest

from gateway.app import Running
from gateway.model import DEFAULT_STREAM, CreateTopic, Topic
from tests.gateway.bridge.clients import CONSUMERS, COUNT, PRODUCERS, Seen, Sent
from tests.gateway.bridge.expected import SHOWS_TIMESTAMP, expected_seen, lossy_fields

pytestmark = pytest.mark.slow
PROTOCOLS = ("kafka", "rabbitmq_stream", "iggy", "rog")
SLACK_MS = 2000  # an arrival time lies within the producer's run, give or take this


def lossy_counts(running: Running, consumer: str) -> Counter[str]:
    assert running.metrics is not None
    counts: Counter[str] = Counter()
    for metric in running.metrics.translation_lossy.collect():
        for sample in metric.samples:
            if sample.name.endswith("_total") and sample.labels["to"] == consumer:
                counts[sample.labels["field"]] += int(sample.value)
    return counts


async def make_topic(running: Running, name: str) -> None:
    backend = running.backend
    assert backend is not None
    await backend.create_topic(CreateTopic(topic=Topic(DEFAULT_STREAM, name), partitions=1))


def check_timestamp(seen: Seen, sent: Sent, consumer: str) -> None:
    if consumer not in SHOWS_TIMESTAMP:
        assert seen.timestamp_ms is None
        return
    assert seen.timestamp_ms is not None
    if sent.timestamp_ms is not None:
        assert seen.timestamp_ms == sent.timestamp_ms
        return
    low, high = sent.window_ms
    assert low - SLACK_MS <= seen.timestamp_ms <= high + SLACK_MS, (seen.timestamp_ms, low, high)


@pytest.mark.parametrize("consumer", PROTOCOLS)
@pytest.mark.parametrize("producer", PROTOCOLS)
async def test_bridge(bridge_gateway: Running, producer: str, consumer: str) -> None:
    topic = f"{producer}-to-{consumer}".replace("_", "-")
    await make_topic(bridge_gateway, topic)
    before = lossy_counts(bridge_gateway, consumer)
    sent = await PRODUCERS[producer](bridge_gateway, topic)
    seen = await CONSUMERS[consumer](bridge_gateway, topic, COUNT)
    assert len(seen) == len(sent) == COUNT
    for i, (s, got) in enumerate(zip(sent, seen, strict=True)):
        want = expected_seen(s, consumer)
        assert dataclasses.replace(got, timestamp_ms=None) == dataclasses.replace(
            want, timestamp_ms=None
        ), i
        check_timestamp(got, s, consumer)
    after = lossy_counts(bridge_gateway, consumer)
    counted = {field for field in after if after[field] > before[field]}
    must, may = lossy_fields(sent, consumer)
    assert must <= counted <= must | may, (counted, must, may)
