"""Iggy consumer groups across gateways (issue 14) on one Kafka broker (a real Tansu): the group
definitions replicated over a topic on the broker, membership a broker group
(tests/helpers/iggy_groups_across_gateways.py); and the leader's assignment itself."""

from __future__ import annotations

import json
from pathlib import Path

from gateway.listeners.iggy.groups_shared import assign
from gateway.model import MemberInfo
from tests.helpers.iggy_groups_across_gateways import one_group_across_two_gateways
from tests.helpers.tansu import Tansu


def _member(member_id: str, uid: str, joined: int, partitions: int) -> MemberInfo:
    meta = {"u": uid, "c": joined, "j": joined, "n": partitions}
    return MemberInfo(member_id=member_id, metadata=json.dumps(meta).encode())


def test_the_leader_spreads_each_definitions_partitions_in_join_order() -> None:
    members = (
        _member("late", "t1", 30, 6),
        _member("early", "t1", 10, 5),  # has not seen the sixth partition yet
        _member("other", "t2", 20, 2),  # the same name on another topic: a group of its own
        MemberInfo(member_id="kafka", metadata=b"\x00\x01"),  # not an Iggy member
    )
    got = {m: json.loads(a)["p"] if a else None for m, a in assign(members)}
    assert got == {"early": [0, 2, 4], "late": [1, 3, 5], "other": [0, 1], "kafka": None}


async def test_one_iggy_group_across_two_gateways(tansu: Tansu, tmp_path: Path) -> None:
    await one_group_across_two_gateways(tansu.url, tmp_path)


async def test_a_killed_gateways_iggy_member_hands_its_partitions_over(
    tansu: Tansu, tmp_path: Path
) -> None:
    await one_group_across_two_gateways(tansu.url, tmp_path, kill=True)
