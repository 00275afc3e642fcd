"""Many gateways, one embedded store (issue 21, ``--workers`` on the embedded backend): a store
owner process serves the store (``backends.embedded.link``) and real ``streamgate run``
processes on ``embedded+owner:`` put their listeners in front of it, as the workers of
``--workers`` do. What one gateway keeps in memory is shared: Kafka groups and RabbitMQ Stream
single active consumers replicate over a log in the store, Iggy groups too; producer ids and
their dedup state, and transactions, are the store's. Clients: confluent-kafka, rstream 1.1.1,
apache-iggy 0.9.0, and raw Kafka requests where a crash must fall between two of them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from tests.helpers.gateways import running_gateways
from tests.helpers.iggy_groups_across_gateways import one_group_across_two_gateways
from tests.helpers.kafka_group_members import (
    committed,
    idempotent_retries_through_two_gateways,
    in_thread,
    members_move_off_a_killed_gateway,
    one_group_counts_every_message_once,
)
from tests.helpers.kafka_transactions import eos_step, read_isolated
from tests.helpers.sac_across_gateways import one_active_consumer_across_two_gateways
from tests.helpers.store_owner import store_owner

LIMIT_S = 90.0


async def test_one_group_through_two_gateways_counts_every_message_once(tmp_path: Path) -> None:
    async with (
        store_owner(tmp_path / "data", tmp_path) as owner,
        running_gateways(owner.url, tmp_path, 2) as (a, b),
    ):
        with trio.fail_after(LIMIT_S):
            await one_group_counts_every_message_once([a.kafka, b.kafka])


async def test_a_killed_gateways_members_move_to_the_other_gateway(tmp_path: Path) -> None:
    async with (
        store_owner(tmp_path / "data", tmp_path) as owner,
        running_gateways(owner.url, tmp_path, 2) as (a, b),
    ):
        with trio.fail_after(LIMIT_S):
            await members_move_off_a_killed_gateway(a, b, lambda: committed(b.kafka))


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


# rstream 1.1.1 leaves the socket and StreamWriter of a connection whose server died open (its
# reader task ends without closing them): unraisable ResourceWarnings of the library's.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
async def test_one_active_consumer_across_two_gateways(tmp_path: Path) -> None:
    async with store_owner(tmp_path / "data", tmp_path) as owner:
        await one_active_consumer_across_two_gateways(owner.url, tmp_path)


async def test_one_iggy_group_across_two_gateways(tmp_path: Path) -> None:
    async with store_owner(tmp_path / "data", tmp_path) as owner:
        await one_group_across_two_gateways(owner.url, tmp_path)
