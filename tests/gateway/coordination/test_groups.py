"""The group coordinator against Kafka's classic group protocol, on trio's mock clock."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import pytest
import trio
import trio.testing
from trio.testing import MockClock

from gateway.coordination import GroupCoordinator
from gateway.model import (
    DescribeGroup,
    GroupInfo,
    GroupNotEmpty,
    Heartbeat,
    IllegalGeneration,
    InconsistentGroupProtocol,
    InvalidSessionTimeout,
    JoinGroup,
    JoinGroupResult,
    LeaveGroup,
    ListGroups,
    RebalanceInProgress,
    SyncGroup,
    UnknownGroup,
    UnknownMember,
)

STREAM = "default"
GROUP = "orders"
PROTOCOLS = (("range", b"meta-range"), ("roundrobin", b"meta-rr"))
DELAY_S = 3.0  # the coordinator's initial rebalance delay below


@pytest.fixture
async def coord(nursery: trio.Nursery) -> GroupCoordinator:
    coordinator = GroupCoordinator(
        initial_rebalance_delay_ms=int(DELAY_S * 1000),
        min_session_timeout_ms=1000,
        max_session_timeout_ms=300_000,
    )
    await nursery.start(coordinator.run)
    return coordinator


@dataclass
class Client:
    """One consumer's side of the protocol: remembers its member id and generation."""

    coord: GroupCoordinator
    client_id: str
    protocols: tuple[tuple[str, bytes], ...] = PROTOCOLS
    session_ms: int = 10_000
    rebalance_ms: int = 30_000
    group: str = GROUP
    stream: str = STREAM
    member_id: str = ""
    generation: int = -1
    joined: JoinGroupResult | None = field(default=None, repr=False)

    async def join(self) -> JoinGroupResult:
        result = await self.coord.join_group(
            JoinGroup(
                group=self.group,
                stream=self.stream,
                member_id=self.member_id,
                client_id=self.client_id,
                client_host=f"/10.0.0.{len(self.client_id)}",
                session_timeout_ms=self.session_ms,
                rebalance_timeout_ms=self.rebalance_ms,
                protocols=self.protocols,
            )
        )
        self.member_id, self.generation, self.joined = result.member_id, result.generation, result
        return result

    @property
    def is_leader(self) -> bool:
        return self.joined is not None and self.joined.leader == self.member_id

    async def sync(self, assignments: tuple[tuple[str, bytes], ...] = ()) -> bytes:
        cmd = SyncGroup(
            group=self.group,
            stream=self.stream,
            generation=self.generation,
            member_id=self.member_id,
            assignments=assignments,
        )
        return (await self.coord.sync_group(cmd)).assignment

    async def heartbeat(self) -> None:
        await self.coord.heartbeat(
            Heartbeat(
                group=self.group,
                stream=self.stream,
                generation=self.generation,
                member_id=self.member_id,
            )
        )

    async def leave(self) -> None:
        cmd = LeaveGroup(group=self.group, stream=self.stream, member_ids=(self.member_id,))
        await self.coord.leave_group(cmd)


def assignment_for(member_id: str) -> bytes:
    return f"parts-of-{member_id}".encode()


async def join_together(clients: list[Client], stagger_s: float = 0.1) -> None:
    """Clients join concurrently, in list order (trio does not promise start order)."""

    async def one(i: int, client: Client) -> None:
        await trio.sleep(i * stagger_s)
        await client.join()

    async with trio.open_nursery() as nursery:
        for i, client in enumerate(clients):
            nursery.start_soon(one, i, client)


async def sync_all(clients: list[Client]) -> dict[str, bytes]:
    """Followers sync first (and park), then the leader hands out one assignment per member."""
    got: dict[str, bytes] = {}

    async def follower(client: Client) -> None:
        got[client.member_id] = await client.sync()

    leader = next(c for c in clients if c.is_leader)
    assert leader.joined is not None
    async with trio.open_nursery() as nursery:
        for client in clients:
            if client is not leader:
                nursery.start_soon(follower, client)
        await trio.testing.wait_all_tasks_blocked()
        assert got == {}  # followers wait for the leader's assignment
        plan = tuple((m.member_id, assignment_for(m.member_id)) for m in leader.joined.members)
        got[leader.member_id] = await leader.sync(plan)
    return got


async def form_group(
    coord: GroupCoordinator, n: int, *, session_ms: int = 10_000, rebalance_ms: int = 30_000
) -> list[Client]:
    """A Stable group of ``n`` members, c0 its leader, each with ``assignment_for`` itself."""
    clients = [
        Client(coord, f"c{i}", session_ms=session_ms, rebalance_ms=rebalance_ms) for i in range(n)
    ]
    await join_together(clients)
    await sync_all(clients)
    return clients


async def describe(coord: GroupCoordinator, group: str = GROUP, stream: str = STREAM) -> GroupInfo:
    return (await coord.describe_group(DescribeGroup(group=group, stream=stream))).info


async def test_single_member_join_sync_heartbeat(
    coord: GroupCoordinator, autojump_clock: MockClock
) -> None:
    with trio.fail_after(60):
        client = Client(coord, "solo")
        t0 = trio.current_time()
        joined = await client.join()
        # The first join into an Empty group waits group.initial.rebalance.delay.ms.
        assert trio.current_time() - t0 == pytest.approx(DELAY_S)
        assert joined.member_id.startswith("solo-")
        assert (joined.generation, joined.leader, joined.protocol_name) == (
            1,
            joined.member_id,
            "range",
        )
        assert [(m.member_id, m.metadata, m.client_host) for m in joined.members] == [
            (joined.member_id, b"meta-range", "/10.0.0.4")
        ]
        assert (await describe(coord)).state == "CompletingRebalance"
        assert await client.sync(((client.member_id, b"mine"),)) == b"mine"
        await client.heartbeat()
        info = await describe(coord)
        assert (info.state, info.protocol, info.protocol_type) == ("Stable", "range", "consumer")
        assert [(m.member_id, m.metadata, m.assignment) for m in info.members] == [
            (client.member_id, b"meta-range", b"mine")
        ]


async def test_no_initial_delay_when_configured_off(
    nursery: trio.Nursery, autojump_clock: MockClock
) -> None:
    with trio.fail_after(60):
        coordinator = GroupCoordinator(initial_rebalance_delay_ms=0)
        await nursery.start(coordinator.run)
        t0 = trio.current_time()
        joined = await Client(coordinator, "quick").join()
        assert (joined.generation, trio.current_time()) == (1, t0)


async def test_three_members_starting_together_share_one_generation(
    coord: GroupCoordinator, autojump_clock: MockClock
) -> None:
    with trio.fail_after(60):
        clients = [Client(coord, f"c{i}") for i in range(3)]
        t0 = trio.current_time()
        await join_together(clients, stagger_s=1.0)
        # Joins at 1 s and 2 s fall in the first delay window, which is then extended once.
        assert trio.current_time() - t0 == pytest.approx(2 * DELAY_S)
        results = [c.joined for c in clients]
        assert {r.generation for r in results if r} == {1}
        leader = clients[0]
        assert {r.leader for r in results if r} == {leader.member_id}
        assert leader.joined is not None
        assert [m.member_id for m in leader.joined.members] == [c.member_id for c in clients]
        assert {m.metadata for m in leader.joined.members} == {b"meta-range"}
        assert all(c.joined is not None and c.joined.members == () for c in clients[1:])
        got = await sync_all(clients)
        assert got == {c.member_id: assignment_for(c.member_id) for c in clients}
        assert (await describe(coord)).state == "Stable"


async def test_initial_delay_is_capped_by_the_rebalance_timeout(
    coord: GroupCoordinator, autojump_clock: MockClock
) -> None:
    with trio.fail_after(60):
        # A newcomer every 2 s would extend the delay forever; the rebalance timeout caps it.
        clients = [Client(coord, f"c{i}", rebalance_ms=10_000) for i in range(5)]
        t0 = trio.current_time()
        await join_together(clients, stagger_s=2.0)
        assert trio.current_time() - t0 == pytest.approx(10.0)
        assert {c.generation for c in clients} == {1}


async def test_fourth_member_triggers_a_rebalance(
    coord: GroupCoordinator, autojump_clock: MockClock
) -> None:
    with trio.fail_after(60):
        clients = await form_group(coord, 3)
        newcomer = Client(coord, "late")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(newcomer.join)
            await trio.testing.wait_all_tasks_blocked()
            assert (await describe(coord)).state == "PreparingRebalance"
            assert newcomer.joined is None  # parked until the others rejoin
            for client in clients:
                with pytest.raises(RebalanceInProgress):
                    await client.heartbeat()
            t0 = trio.current_time()
            await join_together(clients, stagger_s=0.5)
        # Complete as soon as the last known member rejoined: no delay outside Empty.
        assert trio.current_time() - t0 == pytest.approx(1.0)
        everyone = [*clients, newcomer]
        assert {c.generation for c in everyone} == {2}
        assert {c.joined.leader for c in everyone if c.joined} == {clients[0].member_id}
        assert clients[0].joined is not None
        assert len(clients[0].joined.members) == 4
        got = await sync_all(everyone)
        assert got[newcomer.member_id] == assignment_for(newcomer.member_id)
        # The old generation is fenced.
        with pytest.raises(IllegalGeneration):
            await coord.heartbeat(
                Heartbeat(group=GROUP, stream=STREAM, generation=1, member_id=clients[1].member_id)
            )


async def test_leave_rebalances_the_remaining_members(
    coord: GroupCoordinator, autojump_clock: MockClock
) -> None:
    with trio.fail_after(60):
        a, b, c = await form_group(coord, 3)
        await a.leave()  # the leader leaves: leadership passes on
        assert (await describe(coord)).state == "PreparingRebalance"
        with pytest.raises(RebalanceInProgress):
            await b.heartbeat()
        await join_together([b, c])
        assert (b.generation, c.generation) == (2, 2)
        assert b.joined is not None and b.joined.leader == b.member_id
        await sync_all([b, c])
        info = await describe(coord)
        assert info.state == "Stable"
        assert [m.member_id for m in info.members] == [b.member_id, c.member_id]
        with pytest.raises(UnknownMember):
            await a.heartbeat()
        with pytest.raises(UnknownMember):
            await a.leave()


async def test_last_member_leaving_empties_the_group(
    coord: GroupCoordinator, autojump_clock: MockClock
) -> None:
    with trio.fail_after(60):
        (only,) = await form_group(coord, 1)
        with pytest.raises(GroupNotEmpty):
            coord.delete_group(STREAM, GROUP)
        await only.leave()
        info = await describe(coord)
        assert (info.state, info.members) == ("Empty", ())
        # Kafka's onCompleteJoin bumps the generation even for an emptied group.
        coord.check_commit(GROUP, STREAM, -1, "")
        with pytest.raises(UnknownMember):
            coord.check_commit(GROUP, STREAM, 1, only.member_id)
        coord.delete_group(STREAM, GROUP)
        assert (await describe(coord)).state == "Dead"
        with pytest.raises(UnknownGroup):
            coord.delete_group(STREAM, GROUP)


async def test_silent_member_expires_and_the_others_rebalance(
    coord: GroupCoordinator, autojump_clock: MockClock
) -> None:
    with trio.fail_after(120):
        alive, silent = await form_group(coord, 2, session_ms=10_000)
        t_synced = trio.current_time()
        for _ in range(3):  # 9 s of heartbeats: nobody has expired yet
            await trio.sleep(3)
            await alive.heartbeat()
        assert len((await describe(coord)).members) == 2
        await trio.sleep(3)  # 12 s: the silent member's session ran out at 10 s
        info = await describe(coord)
        assert [m.member_id for m in info.members] == [alive.member_id]
        assert info.state == "PreparingRebalance"
        with pytest.raises(RebalanceInProgress):
            await alive.heartbeat()
        assert trio.current_time() - t_synced == pytest.approx(12.0)
        await alive.join()
        assert alive.generation == 2 and alive.is_leader
        with pytest.raises(UnknownMember):
            await silent.heartbeat()


async def test_member_not_rejoining_within_the_rebalance_timeout_is_dropped(
    coord: GroupCoordinator, autojump_clock: MockClock
) -> None:
    with trio.fail_after(120):
        a, lazy = await form_group(coord, 2, rebalance_ms=20_000, session_ms=30_000)
        newcomer = Client(coord, "new", rebalance_ms=20_000)

        async def keep_heartbeating_without_rejoining() -> None:
            # A broken client that ignores the hint to rejoin; its session stays fresh.
            with contextlib.suppress(UnknownMember):
                while True:
                    await trio.sleep(3)
                    with contextlib.suppress(RebalanceInProgress):
                        await lazy.heartbeat()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(keep_heartbeating_without_rejoining)
            t0 = trio.current_time()
            nursery.start_soon(newcomer.join)
            await a.join()
            assert trio.current_time() - t0 == pytest.approx(20.0)
            nursery.cancel_scope.cancel()
        assert (a.generation, newcomer.generation) == (2, 2)
        assert a.joined is not None
        assert {m.member_id for m in a.joined.members} == {a.member_id, newcomer.member_id}
        with pytest.raises(UnknownMember):
            await lazy.heartbeat()


async def test_leader_that_never_syncs_is_dropped_after_the_rebalance_timeout(
    coord: GroupCoordinator, autojump_clock: MockClock
) -> None:
    with trio.fail_after(120):
        leader, follower = [Client(coord, f"c{i}", rebalance_ms=20_000) for i in range(2)]
        await join_together([leader, follower])
        assert leader.is_leader
        t0 = trio.current_time()

        async def heartbeat_until_removed() -> None:
            with contextlib.suppress(UnknownMember):
                while True:
                    await leader.heartbeat()  # CompletingRebalance heartbeats are fine
                    await trio.sleep(3)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(heartbeat_until_removed)
            with pytest.raises(RebalanceInProgress):
                await follower.sync()  # parked until Kafka 3.x's pending-sync timeout
            nursery.cancel_scope.cancel()
        assert trio.current_time() - t0 == pytest.approx(20.0)
        await follower.join()
        assert follower.generation == 2 and follower.is_leader


async def test_protocol_chosen_by_member_votes(
    coord: GroupCoordinator, autojump_clock: MockClock
) -> None:
    with trio.fail_after(60):
        prefs = [
            (("sticky", b"s0"), ("roundrobin", b"r0"), ("range", b"g0")),
            (("roundrobin", b"r1"), ("range", b"g1")),
            (("range", b"g2"), ("roundrobin", b"r2")),
        ]
        clients = [Client(coord, f"c{i}", protocols=p) for i, p in enumerate(prefs)]
        await join_together(clients)
        # Only roundrobin and range are common; two members vote roundrobin, one range.
        assert clients[0].joined is not None
        assert clients[0].joined.protocol_name == "roundrobin"
        assert [m.metadata for m in clients[0].joined.members] == [b"r0", b"r1", b"r2"]

        other = Client(coord, "o", group="other", protocols=(("range", b""), ("roundrobin", b"")))
        other2 = Client(coord, "p", group="other", protocols=(("roundrobin", b""), ("range", b"")))
        await join_together([other, other2])
        assert other.joined is not None
        assert other.joined.protocol_name == "range"  # a tie goes to the first vote


async def test_inconsistent_protocols_are_refused_without_touching_the_group(
    coord: GroupCoordinator, autojump_clock: MockClock
) -> None:
    with trio.fail_after(60):
        await form_group(coord, 2)
        with pytest.raises(InconsistentGroupProtocol):
            await Client(coord, "x", protocols=(("sticky", b""),)).join()
        with pytest.raises(InconsistentGroupProtocol):
            await coord.join_group(
                JoinGroup(group=GROUP, stream=STREAM, protocol_type="connect", protocols=PROTOCOLS)
            )
        info = await describe(coord)
        assert (info.state, len(info.members)) == ("Stable", 2)
        with pytest.raises(InconsistentGroupProtocol):
            await Client(coord, "x", group="fresh", protocols=()).join()
        assert (await describe(coord, "fresh")).state == "Dead"


async def test_stale_and_unknown_members_are_refused(
    coord: GroupCoordinator, autojump_clock: MockClock
) -> None:
    with trio.fail_after(60):
        a, b = [Client(coord, f"c{i}") for i in range(2)]
        await join_together([a, b])
        # CompletingRebalance: heartbeats fine, commits must wait for the assignment.
        await b.heartbeat()
        with pytest.raises(RebalanceInProgress):
            coord.check_commit(GROUP, STREAM, 1, a.member_id)
        await sync_all([a, b])

        with pytest.raises(IllegalGeneration):
            await coord.sync_group(
                SyncGroup(group=GROUP, stream=STREAM, generation=7, member_id=a.member_id)
            )
        with pytest.raises(UnknownMember):
            await coord.sync_group(
                SyncGroup(group=GROUP, stream=STREAM, generation=1, member_id="ghost")
            )
        with pytest.raises(IllegalGeneration):
            await coord.heartbeat(
                Heartbeat(group=GROUP, stream=STREAM, generation=0, member_id=a.member_id)
            )
        with pytest.raises(UnknownMember):
            await coord.heartbeat(Heartbeat(group=GROUP, stream=STREAM, generation=1, member_id=""))
        with pytest.raises(UnknownMember):
            await coord.heartbeat(
                Heartbeat(group="nope", stream=STREAM, generation=1, member_id=a.member_id)
            )
        with pytest.raises(UnknownMember):
            await coord.join_group(JoinGroup(group=GROUP, stream=STREAM, member_id="ghost"))
        with pytest.raises(UnknownMember):  # the same group name in another stream
            await Client(coord, "x", stream="other", member_id=a.member_id).heartbeat()

        coord.check_commit(GROUP, STREAM, 1, a.member_id)
        with pytest.raises(IllegalGeneration):
            coord.check_commit(GROUP, STREAM, 0, a.member_id)
        with pytest.raises(UnknownMember):
            coord.check_commit(GROUP, STREAM, 1, "ghost")
        coord.check_commit(GROUP, STREAM, -1, "")  # standalone commits are always taken
        coord.check_commit("simple", STREAM, -1, "")
        coord.check_commit("simple", STREAM, -1, "some-id")
        with pytest.raises(IllegalGeneration):
            coord.check_commit("simple", STREAM, 4, "some-id")

        # PreparingRebalance: syncs are refused, commits of the current generation taken
        # (consumers commit before rejoining).
        async with trio.open_nursery() as nursery:
            nursery.start_soon(Client(coord, "late").join)
            await trio.testing.wait_all_tasks_blocked()
            with pytest.raises(RebalanceInProgress):
                await b.sync()
            coord.check_commit(GROUP, STREAM, 1, b.member_id)
            await join_together([a, b])
        assert a.generation == 2


async def test_commits_count_as_activity(
    coord: GroupCoordinator, autojump_clock: MockClock
) -> None:
    with trio.fail_after(120):
        a, b = await form_group(coord, 2, session_ms=10_000)
        for _ in range(6):  # 30 s: heartbeats for a, commits only for b
            await trio.sleep(5)
            await a.heartbeat()
            coord.check_commit(GROUP, STREAM, b.generation, b.member_id)
        info = await describe(coord)
        assert (info.state, len(info.members)) == ("Stable", 2)


async def test_describe_and_list(coord: GroupCoordinator, autojump_clock: MockClock) -> None:
    with trio.fail_after(60):
        dead = await describe(coord, "unknown")
        assert (dead.group, dead.state, dead.members) == ("unknown", "Dead", ())
        await form_group(coord, 2)
        lone = Client(coord, "z", group="lone", stream="other")
        await lone.join()
        info = await describe(coord)
        assert (info.group, info.state, info.protocol, len(info.members)) == (
            GROUP,
            "Stable",
            "range",
            2,
        )
        assert all(m.client_id in ("c0", "c1") and m.assignment for m in info.members)
        pending = await describe(coord, "lone", "other")
        # Not Stable: no protocol, metadata or assignment (Kafka's GroupMetadata.summary).
        assert (pending.state, pending.protocol) == ("CompletingRebalance", "")
        assert [(m.member_id, m.metadata) for m in pending.members] == [(lone.member_id, b"")]

        listed = (await coord.list_groups(ListGroups())).groups
        assert [(g.group, g.state) for g in listed] == [
            (GROUP, "Stable"),
            ("lone", "CompletingRebalance"),
        ]
        only_other = (await coord.list_groups(ListGroups(stream="other"))).groups
        assert [g.group for g in only_other] == ["lone"]
        assert (await coord.list_groups(ListGroups(stream="nothing"))).groups == ()


async def test_session_timeout_bounds(coord: GroupCoordinator, autojump_clock: MockClock) -> None:
    with trio.fail_after(60):
        with pytest.raises(InvalidSessionTimeout):
            await Client(coord, "x", session_ms=999).join()
        with pytest.raises(InvalidSessionTimeout):
            await Client(coord, "x", session_ms=300_001).join()
        assert (await describe(coord)).state == "Dead"  # nothing was created
        await Client(coord, "x", session_ms=300_000).join()


async def test_cancelled_join_of_a_new_member_is_forgotten(
    coord: GroupCoordinator, autojump_clock: MockClock
) -> None:
    with trio.fail_after(60):
        a, b = await form_group(coord, 2)
        with trio.move_on_after(1):
            await Client(coord, "gone").join()  # the client disconnects while parked
        info = await describe(coord)
        assert [m.member_id for m in info.members] == [a.member_id, b.member_id]
        # The rebalance it started goes on; it completes once the real members rejoin.
        with pytest.raises(RebalanceInProgress):
            await a.heartbeat()
        t0 = trio.current_time()
        await join_together([a, b])
        assert trio.current_time() - t0 == pytest.approx(0.1)
        assert a.joined is not None and len(a.joined.members) == 2
        await sync_all([a, b])
        assert (await describe(coord)).state == "Stable"


async def test_cancelled_join_of_a_known_member_expires_by_session(
    coord: GroupCoordinator, autojump_clock: MockClock
) -> None:
    with trio.fail_after(120):
        a, b = await form_group(coord, 2, session_ms=10_000, rebalance_ms=60_000)
        newcomer = Client(coord, "new", session_ms=10_000, rebalance_ms=60_000)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(newcomer.join)
            nursery.start_soon(a.join)
            with trio.move_on_after(1):
                await b.join()  # b's connection drops while its rejoin is parked
            t_gone = trio.current_time()
            await trio.testing.wait_all_tasks_blocked()
            assert (await describe(coord)).state == "PreparingRebalance"
        # b never comes back: its session (10 s), not the rebalance timeout (60 s), ends it.
        assert trio.current_time() - t_gone == pytest.approx(10.0)
        assert (a.generation, newcomer.generation) == (2, 2)
        assert a.joined is not None
        assert [m.member_id for m in a.joined.members] == [a.member_id, newcomer.member_id]


async def test_follower_rejoin_in_stable_keeps_the_generation(
    coord: GroupCoordinator, autojump_clock: MockClock
) -> None:
    with trio.fail_after(60):
        leader, follower = await form_group(coord, 2)
        # A follower with unchanged metadata gets the current generation back at once.
        again = await follower.join()
        assert (again.generation, again.leader, again.members) == (1, leader.member_id, ())
        assert (await describe(coord)).state == "Stable"
        assert await follower.sync() == assignment_for(follower.member_id)
        # The leader rejoining forces a rebalance (it may have seen topic changes).
        async with trio.open_nursery() as nursery:
            nursery.start_soon(leader.join)
            await trio.testing.wait_all_tasks_blocked()
            assert (await describe(coord)).state == "PreparingRebalance"
            await follower.join()
        assert (leader.generation, follower.generation) == (2, 2)


async def test_join_needs_the_running_coordinator() -> None:
    with trio.fail_after(5), pytest.raises(RuntimeError):
        await GroupCoordinator().join_group(JoinGroup(group=GROUP, stream=STREAM))
