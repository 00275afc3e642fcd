"""RabbitMQ Stream single active consumer across gateways (issue 14) on one Kafka broker (a
real Tansu): the broker's group decides who is active (tests/helpers/sac_across_gateways.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.listeners.rabbitmq_stream.sac import choose
from gateway.model import MemberInfo
from tests.helpers.sac_across_gateways import one_active_consumer_across_two_gateways
from tests.helpers.tansu import Tansu


def test_the_leader_picks_the_first_joined_or_the_partitions_member() -> None:
    def member(name: str, joined_ns: int) -> MemberInfo:
        return MemberInfo(member_id=name, metadata=joined_ns.to_bytes(8, "big"))

    members = (member("late", 30), member("early", 10), member("middle", 20))
    assert choose(members, 0, super_stream=False) == "early"
    assert choose(members, 5, super_stream=False) == "early"
    assert [choose(members, p, super_stream=True) for p in range(4)] == [
        "early", "middle", "late", "early",
    ]  # fmt: skip


# rstream 1.1.1 leaves the socket and StreamWriter of a connection whose server died open (its
# reader task ends without closing them): unraisable ResourceWarnings of the library's,
# collected at garbage collection.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
async def test_one_active_consumer_across_two_gateways(tansu: Tansu, tmp_path: Path) -> None:
    await one_active_consumer_across_two_gateways(tansu.url, tmp_path)
