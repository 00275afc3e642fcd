"""The Kafka backend against a real broker: Tansu (kafka.md §5) started per test, and a raw
Kafka connection to it, to see what the broker itself stores."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from gateway.backends.kafka.backend import KafkaBackend, open_kafka
from tests.helpers.kafka_group_members import kafka_call
from tests.helpers.tansu import Tansu, running_tansu

LIMIT_S = 10.0  # any one exchange with the broker


@pytest.fixture
async def tansu(tmp_path: Path) -> AsyncIterator[Tansu]:
    async with running_tansu(tmp_path) as started:
        yield started


@pytest.fixture
async def kafka(tansu: Tansu) -> AsyncIterator[KafkaBackend]:
    async with open_kafka(tansu.url) as started:
        yield started


async def direct(tansu: Tansu, api_key: int, version: int, values: Mapping[str, Any]) -> Any:
    """One request straight to the broker on a connection of its own; the kio answer."""
    return await kafka_call(tansu.bootstrap, api_key, version, values)


async def fetch_direct(tansu: Tansu, topic: str, partition: int = 0, offset: int = 0) -> bytes:
    """The records field of a Fetch v11 straight from the broker."""
    answer = await direct(
        tansu, 1, 11,
        {"replica_id": -1, "max_wait": 1, "min_bytes": 1, "max_bytes": 1 << 20,
         "isolation_level": 0, "session_id": 0, "session_epoch": -1, "rack_id": "",
         "forgotten_topics_data": [],
         "topics": [{"topic": topic, "partitions": [
             {"partition": partition, "current_leader_epoch": -1, "fetch_offset": offset,
              "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]},
    )  # fmt: skip
    [part] = answer.responses[0].partitions
    return bytes(part.records or b"")
