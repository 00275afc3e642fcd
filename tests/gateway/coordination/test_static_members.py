"""KIP-345 static membership in the gateway's coordinator: a restarted static member (empty
member id, known ``group.instance.id``) takes its old place back without a rebalance."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import trio
from trio.testing import MockClock

from gateway.coordination import GroupCoordinator
from gateway.model import JoinGroup, JoinGroupResult, UnknownMember

from .test_groups import Client, assignment_for, coord, describe, join_together, sync_all

__all__ = ["coord"]  # the fixture, re-used


@dataclass
class StaticClient(Client):
    instance_id: str = ""

    async def join(self) -> JoinGroupResult:
        result = await self.coord.join_group(
            JoinGroup(group=self.group, stream=self.stream, member_id=self.member_id,
                      group_instance_id=self.instance_id, client_id=self.client_id,
                      session_timeout_ms=self.session_ms, rebalance_timeout_ms=self.rebalance_ms,
                      protocols=self.protocols)
        )  # fmt: skip
        self.member_id, self.generation, self.joined = result.member_id, result.generation, result
        return result


async def _stable_pair(coord: GroupCoordinator) -> list[StaticClient]:
    clients = [StaticClient(coord, f"c{i}", instance_id=f"host-{i}") for i in range(2)]
    await join_together(clients)  # type: ignore[arg-type]
    await sync_all(clients)  # type: ignore[arg-type]
    return clients


@pytest.mark.parametrize("restarted", [0, 1])  # the leader, then a follower
async def test_static_member_rejoins_without_a_rebalance(
    coord: GroupCoordinator, autojump_clock: MockClock, restarted: int
) -> None:
    clients = await _stable_pair(coord)
    generation, leader = clients[0].generation, clients[0].member_id
    old = clients[restarted]
    before = await describe(coord)

    again = StaticClient(coord, f"c{restarted}", instance_id=old.instance_id)
    with trio.fail_after(1):  # answered at once: no join phase to wait for
        result = await again.join()
    assert result.member_id != old.member_id
    assert result.generation == generation
    assert result.leader == leader  # the leader before the swap: nobody re-assigns
    assert result.members == ()
    assert await again.sync() == assignment_for(old.member_id)  # its old assignment

    info = await describe(coord)
    assert info.state == before.state == "Stable"
    assert sorted(m.group_instance_id or "" for m in info.members) == ["host-0", "host-1"]
    assert again.member_id in {m.member_id for m in info.members}
    # The other member goes on in the same generation; the replaced id is fenced.
    await clients[1 - restarted].heartbeat()
    with pytest.raises(UnknownMember):
        await old.heartbeat()


async def test_static_member_changing_the_protocol_choice_rebalances(
    coord: GroupCoordinator, autojump_clock: MockClock
) -> None:
    clients = await _stable_pair(coord)
    generation = clients[0].generation
    # Only roundrobin now: the group's choice (range) no longer holds, as Kafka checks.
    again = StaticClient(coord, "c1", instance_id="host-1", protocols=(("roundrobin", b"rr"),))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(again.join)
        await trio.testing.wait_all_tasks_blocked()
        assert (await describe(coord)).state == "PreparingRebalance"
        await clients[0].join()
    assert again.generation == clients[0].generation == generation + 1
    info = await describe(coord)
    assert (len(info.members), info.protocol) == (2, "")  # CompletingRebalance: not shown yet
    assert clients[0].joined is not None and clients[0].joined.protocol_name == "roundrobin"
