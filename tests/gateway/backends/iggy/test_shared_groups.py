"""Many gateways, one Iggy server (issue 14): Kafka groups and RabbitMQ Stream single active
consumers shared by every gateway on it, replicated over a topic on the server
(``backends.topic_log``). The Iggy server is a second streamgate serving Iggy (no Iggy server is
installable here; tests/helpers/iggy_upstream.py); the front gateways are real ``streamgate run``
processes on ``iggy://``, the clients confluent-kafka and rstream.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from tests.helpers.gateways import running_gateways
from tests.helpers.iggy_groups_across_gateways import one_group_across_two_gateways
from tests.helpers.iggy_upstream import upstream_gateway
from tests.helpers.kafka_group_members import (
    committed,
    members_move_off_a_killed_gateway,
    one_group_counts_every_message_once,
)
from tests.helpers.sac_across_gateways import one_active_consumer_across_two_gateways

LIMIT_S = 90.0


def url_of(upstream: object) -> str:
    host, port = upstream.address("iggy")  # type: ignore[attr-defined]
    return f"iggy://iggy:iggy@{host}:{port}"


async def test_one_group_through_two_gateways_counts_every_message_once(tmp_path: Path) -> None:
    async with (
        upstream_gateway(tmp_path / "upstream") as upstream,
        running_gateways(url_of(upstream), tmp_path, 2) as (a, b),
    ):
        with trio.fail_after(LIMIT_S):
            await one_group_counts_every_message_once([a.kafka, b.kafka], idempotent=False)


async def test_a_killed_gateways_members_move_to_the_other_gateway(tmp_path: Path) -> None:
    """The survivor's replica expires a SIGKILLed gateway's member after its session timeout;
    offsets committed through the dead one are the server's (Iggy consumer offsets)."""

    async with (
        upstream_gateway(tmp_path / "upstream") as upstream,
        running_gateways(url_of(upstream), tmp_path, 2) as (a, b),
    ):
        with trio.fail_after(LIMIT_S):
            await members_move_off_a_killed_gateway(
                a, b, lambda: committed(b.kafka), idempotent=False
            )


# rstream 1.1.1 leaves the socket and StreamWriter of a connection whose server died open (its
# reader task ends without closing them): unraisable ResourceWarnings of the library's.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
async def test_one_active_consumer_across_two_gateways(tmp_path: Path) -> None:
    async with upstream_gateway(tmp_path / "upstream") as upstream:
        await one_active_consumer_across_two_gateways(url_of(upstream), tmp_path)


async def test_one_iggy_group_across_two_gateways(tmp_path: Path) -> None:
    async with upstream_gateway(tmp_path / "upstream") as upstream:
        await one_group_across_two_gateways(url_of(upstream), tmp_path)
