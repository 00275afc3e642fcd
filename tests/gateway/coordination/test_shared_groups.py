"""Shared groups: several gateways' replicas of one group table, kept equal by one log.

The log here is in memory (every record applied to every live replica, in one order, at the
mock clock's time, as the RabbitMQ backend's coordination stream does with the broker's chunk
times); tests/gateway/backends/rabbitmq_stream/test_shared_groups.py runs real gateways on a
real RabbitMQ.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio
import trio.testing
from trio.testing import MockClock

from gateway.coordination import SharedGroups
from gateway.model import (
    BackendUnavailable,
    DescribeGroup,
    Heartbeat,
    IllegalGeneration,
    JoinGroup,
    JoinGroupResult,
    RebalanceInProgress,
    SyncGroup,
    UnknownMember,
)

STREAM = "default"
GROUP = "orders"
SESSION_MS = 6000


class MemLog:
    """One log, many replicas; a replica that is "down" no longer reads it."""

    def __init__(self) -> None:
        self.records: list[tuple[int, bytes]] = []  # (broker time ms, record)
        self.replicas: list[SharedGroups] = []
        self.start = 0  # retention: records before this offset are gone

    def add(self, replica: SharedGroups) -> None:
        """Follow from the retained start, then write a ``sync`` record (the backend does)."""
        self.replicas.append(replica)
        replica.bind(_Handle(self, replica))
        for offset in range(self.start, len(self.records)):
            self._deliver(replica, offset)
        self.append({"op": "sync", "rid": "s"})

    def append(self, record: dict[str, Any]) -> None:
        offset = len(self.records)
        self.records.append((int(trio.current_time() * 1000), json.dumps(record).encode()))
        for replica in self.replicas:
            self._deliver(replica, offset)

    def _deliver(self, replica: SharedGroups, offset: int) -> None:
        ts, data = self.records[offset]
        replica.apply_entry(data, offset=offset, timestamp_ms=ts)
        replica.next_offset = offset + 1


class _Handle:
    def __init__(self, log: MemLog, replica: SharedGroups) -> None:
        self.log = log
        self.replica = replica

    @property
    def ready(self) -> bool:
        return self.replica in self.log.replicas

    async def write(self, record: dict[str, Any]) -> None:
        await trio.lowlevel.checkpoint()
        self.log.append(record)


async def _replica(
    nursery: trio.Nursery, log: MemLog, **kw: Any
) -> tuple[SharedGroups, trio.CancelScope]:
    groups = SharedGroups(min_session_timeout_ms=1000, **kw)  # initial delay: Kafka's 3 s
    log.add(groups)
    scope = trio.CancelScope()

    async def run(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        with scope:
            await groups.run(task_status=task_status)

    await nursery.start(run)
    return groups, scope


def _join(member: str = "", client: str = "c") -> JoinGroup:
    return JoinGroup(
        group=GROUP, stream=STREAM, member_id=member, client_id=client, client_host="/h",
        session_timeout_ms=SESSION_MS, rebalance_timeout_ms=10_000,
        protocols=(("range", client.encode()),),
    )  # fmt: skip


async def _joined_pair(a: SharedGroups, b: SharedGroups) -> tuple[JoinGroupResult, JoinGroupResult]:
    results: dict[str, JoinGroupResult] = {}

    async def join(name: str, g: SharedGroups) -> None:
        results[name] = await g.join_group(_join(client=name))

    async with trio.open_nursery() as n:
        n.start_soon(join, "a", a)
        await trio.sleep(0.5)  # a's join lands first: a leads
        n.start_soon(join, "b", b)
    return results["a"], results["b"]


async def test_members_through_two_gateways_are_one_group(
    nursery: trio.Nursery, autojump_clock: MockClock
) -> None:
    log = MemLog()
    a, _ = await _replica(nursery, log)
    b, _ = await _replica(nursery, log)
    ja, jb = await _joined_pair(a, b)
    # one generation, one leader, both members known to it
    assert ja.generation == jb.generation
    assert ja.leader == jb.leader == ja.member_id
    assert {m.member_id for m in ja.members} == {ja.member_id, jb.member_id}
    assert jb.members == ()
    plan = ((ja.member_id, b"p0,p1"), (jb.member_id, b"p2,p3"))
    got: dict[str, bytes] = {}

    async def sync(name: str, g: SharedGroups, r: JoinGroupResult, assign: Any) -> None:
        cmd = SyncGroup(group=GROUP, stream=STREAM, generation=r.generation,
                        member_id=r.member_id, assignments=assign)  # fmt: skip
        got[name] = (await g.sync_group(cmd)).assignment

    async with trio.open_nursery() as n:
        n.start_soon(sync, "b", b, jb, ())  # the follower waits for the leader's round
        await trio.sleep(1)
        n.start_soon(sync, "a", a, ja, plan)
    assert got == {"a": b"p0,p1", "b": b"p2,p3"}
    # both replicas describe the same group
    da = (await a.describe_group(DescribeGroup(group=GROUP, stream=STREAM))).info
    db = (await b.describe_group(DescribeGroup(group=GROUP, stream=STREAM))).info
    assert da == db
    assert da.state == "Stable" and len(da.members) == 2
    # a commit is fenced by either replica alike
    a.check_commit(GROUP, STREAM, ja.generation, ja.member_id)
    with pytest.raises(IllegalGeneration):
        b.check_commit(GROUP, STREAM, ja.generation - 1, ja.member_id)


async def test_a_dead_gateways_members_expire_and_the_rest_rebalance(
    nursery: trio.Nursery, autojump_clock: MockClock
) -> None:
    log = MemLog()
    a, a_scope = await _replica(nursery, log)
    b, _ = await _replica(nursery, log)
    ja, jb = await _joined_pair(a, b)
    for g, r, plan in ((a, ja, ((ja.member_id, b"x"), (jb.member_id, b"y"))), (b, jb, ())):
        cmd = SyncGroup(group=GROUP, stream=STREAM, generation=r.generation,
                        member_id=r.member_id, assignments=plan)  # fmt: skip
        if plan:
            await g.sync_group(cmd)
        else:
            assert (await g.sync_group(cmd)).assignment == b"y"
    # gateway a dies: it reads and writes nothing more, its member's heartbeats stop
    a_scope.cancel()
    log.replicas.remove(a)
    t0 = trio.current_time()
    hb = Heartbeat(group=GROUP, stream=STREAM, generation=jb.generation, member_id=jb.member_id)
    with pytest.raises(RebalanceInProgress):
        while True:
            await b.heartbeat(hb)  # b's member lives on
            await trio.sleep(1)
    # b's own ticks moved the log's clock past a's session: not before it, not much after
    assert SESSION_MS / 1000 - 1 <= trio.current_time() - t0 <= SESSION_MS / 1000 + 1.5
    rejoined = await b.join_group(_join(member=jb.member_id, client="b"))
    assert rejoined.generation == jb.generation + 1
    assert [m.member_id for m in rejoined.members] == [jb.member_id]
    with pytest.raises(UnknownMember):
        b.check_commit(GROUP, STREAM, ja.generation, ja.member_id)


async def test_a_gateway_started_on_a_truncated_log_continues_from_a_snapshot(
    nursery: trio.Nursery, autojump_clock: MockClock
) -> None:
    log = MemLog()
    a, _ = await _replica(nursery, log, snapshot_every_s=2)
    b, _ = await _replica(nursery, log, snapshot_every_s=2)
    ja, jb = await _joined_pair(a, b)
    await trio.sleep(2.5)  # a snapshot is written (within the members' sessions)
    snapshots = [i for i, (_, d) in enumerate(log.records) if json.loads(d)["op"] == "snapshot"]
    assert snapshots, "no snapshot was written"
    hb = Heartbeat(group=GROUP, stream=STREAM, generation=jb.generation, member_id=jb.member_id)
    await b.heartbeat(hb)
    # retention dropped everything before the last snapshot's first covered record
    last = json.loads(log.records[snapshots[-1]][1])
    log.start = last["through"] + 1
    c, _ = await _replica(nursery, log)
    describe = DescribeGroup(group=GROUP, stream=STREAM)
    assert (await c.describe_group(describe)).info == (await a.describe_group(describe)).info
    # and it keeps up: a new member through c makes the others rebalance
    async with trio.open_nursery() as n:
        n.start_soon(c.join_group, _join(client="c"))
        await trio.sleep(0.1)
        hb = Heartbeat(group=GROUP, stream=STREAM, generation=ja.generation, member_id=ja.member_id)
        with pytest.raises(RebalanceInProgress):
            await a.heartbeat(hb)
        n.cancel_scope.cancel()


async def test_a_replica_that_has_not_read_the_log_does_not_answer(
    nursery: trio.Nursery, autojump_clock: MockClock
) -> None:
    log = MemLog()
    log.records.append((0, json.dumps({"op": "tick"}).encode()))
    log.start = 1  # truncated, and no snapshot to continue from
    c, _ = await _replica(nursery, log)
    with pytest.raises(BackendUnavailable):
        await c.describe_group(DescribeGroup(group=GROUP, stream=STREAM))
    with pytest.raises(BackendUnavailable):
        c.check_commit(GROUP, STREAM, 1, "m")


async def test_a_replica_that_missed_records_starts_over_from_a_snapshot(
    nursery: trio.Nursery, autojump_clock: MockClock
) -> None:
    """Records it never saw (retention passed while it was away) make a replica start over
    from the next snapshot instead of going on with a wrong table."""
    log = MemLog()
    a, _ = await _replica(nursery, log, snapshot_every_s=2)
    b, _ = await _replica(nursery, log, snapshot_every_s=2)
    log.replicas.remove(b)  # b is away ...
    ja = await a.join_group(_join(client="a"))
    hb = Heartbeat(group=GROUP, stream=STREAM, generation=ja.generation, member_id=ja.member_id)
    await a.heartbeat(hb)
    describe = DescribeGroup(group=GROUP, stream=STREAM)
    log.replicas.append(b)  # ... and back, the records in between gone
    await trio.sleep(2.5)  # the first record b sees is past a gap; a writes a snapshot
    await a.heartbeat(hb)
    assert (await b.describe_group(describe)).info == (await a.describe_group(describe)).info
    assert len((await b.describe_group(describe)).info.members) == 1
