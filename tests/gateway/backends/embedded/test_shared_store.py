"""Many gateways, one embedded store (issue 21, ``--workers`` on the embedded backend): a store
owner process serves the store (``backends.embedded.link``) and real ``streamgate run``
processes on ``embedded+owner:`` put their listeners in front of it, as the workers of
``--workers`` do, each gateway reached on its own port here. What is the store's holds through
either: an idempotent producer's dedup state (a retry through the other gateway, SIGKILL
included), Kafka transactions, Iggy consumer groups (definitions and membership in the store).
Kafka groups through both workers: test_workers_embedded.py; a dead gateway's members expiring
and single active consumers, over the same replicated log (``backends.topic_log``): the Iggy
backend's tests/gateway/backends/iggy/test_shared_groups.py. Clients: confluent-kafka,
apache-iggy 0.9.0, and raw Kafka requests where a crash must fall between two of them.
"""

from __future__ import annotations

from pathlib import Path

import trio

from tests.helpers.gateways import running_gateways
from tests.helpers.iggy_groups_across_gateways import one_group_across_two_gateways
from tests.helpers.kafka_group_members import (
    idempotent_retries_through_two_gateways,
    in_thread,
)
from tests.helpers.kafka_transactions import eos_step, read_isolated
from tests.helpers.store_owner import store_owner

LIMIT_S = 90.0


async def test_an_idempotent_retry_through_the_other_gateway_is_stored_once(
    tmp_path: Path,
) -> None:
    async with (
        store_owner(tmp_path / "data", tmp_path) as owner,
        running_gateways(owner.url, tmp_path, 2) as (a, b),
    ):
        with trio.fail_after(LIMIT_S):
            await idempotent_retries_through_two_gateways(a, b, duplicate_offset=0)
            # What the store holds, through the survivor: sequences 0..8, once each.
            values = await in_thread(
                lambda: read_isolated(b.kafka, "once", "read_uncommitted", expect=9, assign=True)
            )
    assert values == [b"s%d" % i for i in range(9)], values


async def test_a_transaction_through_one_gateway_is_read_committed_through_another(
    tmp_path: Path,
) -> None:
    """Kafka transactions are the store's (its coordinator, markers, last stable offset): the
    consume-transform-produce step through one gateway; what another gateway serves at
    read_committed."""
    async with (
        store_owner(tmp_path / "data", tmp_path) as owner,
        running_gateways(owner.url, tmp_path, 2) as (a, b),
    ):
        with trio.fail_after(LIMIT_S):
            before, after_abort, after_commit, out = await in_thread(lambda: eos_step(a.kafka))
            through_b = await in_thread(
                lambda: read_isolated(b.kafka, "eos-out", "read_committed", expect=6)
            )
    assert before < 0  # nothing committed yet (librdkafka: OFFSET_INVALID)
    assert after_abort == before
    assert after_commit == 6
    assert out == through_b == [b"out-%d" % i for i in range(6)]


async def test_one_iggy_group_across_two_gateways(tmp_path: Path) -> None:
    async with store_owner(tmp_path / "data", tmp_path) as owner:
        await one_group_across_two_gateways(owner.url, tmp_path)
