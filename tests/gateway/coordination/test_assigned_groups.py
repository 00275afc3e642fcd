"""Server-assigned (Iggy) consumer groups: ids, membership and the partition assignment."""

from __future__ import annotations

import pytest

from gateway.coordination.assigned_groups import AssignedGroup, AssignedGroups
from gateway.model import GroupExists, InvalidRequest, UnknownGroup, UnknownMember

S, T = "s", "t"


def check_assignment(group: AssignedGroup) -> None:
    """Every partition to exactly one member, shares differing by at most one, in join order."""
    assignment = group.assignment()
    if not assignment:
        assert group.members == ()
        return
    owned = [p for parts in assignment.values() for p in parts]
    assert sorted(owned) == list(range(group.partitions))  # complete and disjoint
    sizes = [len(parts) for parts in assignment.values()]
    assert max(sizes) - min(sizes) <= 1
    # Iggy's round robin: partition p belongs to the (p % n)-th member in join order.
    n = len(group.members)
    for i, member in enumerate(group.members):
        assert group.partitions_of(member) == tuple(range(i, group.partitions, n))


def test_ids_are_per_topic_zero_based_in_creation_order_or_chosen() -> None:
    groups = AssignedGroups()
    assert [groups.create(S, T, n, partitions=3).id for n in ("a", "b", "c")] == [0, 1, 2]
    assert groups.create(S, "other", "a", partitions=1).id == 0  # per topic
    assert groups.create(S, T, "chosen", partitions=3, group_id=7).id == 7
    assert groups.create(S, T, "d", partitions=3).id == 8  # continues after the highest
    groups.delete(S, T, "d")
    assert groups.create(S, T, "e", partitions=3).id == 9  # a deleted id is not handed out again
    assert groups.create(S, T, "f", partitions=3, group_id=3).id == 3
    assert [g.name for g in groups.list(S, T)] == ["a", "b", "c", "f", "chosen", "e"]
    assert groups.list(S, "nothing") == []


def test_create_refuses_duplicates_and_bad_values() -> None:
    groups = AssignedGroups()
    groups.create(S, T, "a", partitions=2)
    with pytest.raises(GroupExists):
        groups.create(S, T, "a", partitions=2)
    with pytest.raises(GroupExists):
        groups.create(S, T, "b", partitions=2, group_id=0)
    with pytest.raises(InvalidRequest):
        groups.create(S, T, "c", partitions=2, group_id=-1)
    with pytest.raises(InvalidRequest):
        groups.create(S, T, "d", partitions=-1)


def test_get_by_id_or_name_and_delete() -> None:
    groups = AssignedGroups()
    g = groups.create(S, T, "orders", partitions=4)
    assert groups.get(S, T, 0) is g
    assert groups.get(S, T, "orders") is g
    for missing in (1, "nope"):
        with pytest.raises(UnknownGroup):
            groups.get(S, T, missing)
    with pytest.raises(UnknownGroup):
        groups.get(S, "other", 0)
    groups.join(S, T, 0, 11)
    assert groups.delete(S, T, "orders") is g
    with pytest.raises(UnknownGroup):
        groups.get(S, T, 0)
    assert groups.memberships(11) == []


@pytest.mark.parametrize("partitions", [0, 1, 2, 3, 7, 12])
def test_assignment_is_even_disjoint_and_complete_for_1_to_n_members(partitions: int) -> None:
    groups = AssignedGroups()
    g = groups.create(S, T, "g", partitions=partitions)
    check_assignment(g)
    members = [100 + i for i in range(partitions + 2)]  # more members than partitions, too
    for m in members:
        groups.join(S, T, "g", m)
        check_assignment(g)
    assert g.members == tuple(members)
    for m in members[::2] + members[1::2]:  # leave out of join order
        groups.leave(S, T, "g", m)
        check_assignment(g)
    assert g.members == ()


def test_one_member_gets_every_partition_and_polls_them_in_turn() -> None:
    groups = AssignedGroups()
    g = groups.join(S, T, groups.create(S, T, "g", partitions=3).id, 5)
    assert g.partitions_of(5) == (0, 1, 2)
    assert [g.next_partition(5) for _ in range(7)] == [0, 1, 2, 0, 1, 2, 0]
    groups.join(S, T, "g", 6)
    assert g.partitions_of(5) == (0, 2) and g.partitions_of(6) == (1,)
    assert [g.next_partition(5) for _ in range(3)] == [0, 2, 0]  # restarts after a rebalance
    assert [g.next_partition(6) for _ in range(2)] == [1, 1]


def test_a_member_without_partitions_and_a_non_member() -> None:
    groups = AssignedGroups()
    g = groups.create(S, T, "g", partitions=1)
    groups.join(S, T, "g", 1)
    groups.join(S, T, "g", 2)
    assert g.partitions_of(2) == () and g.next_partition(2) is None
    assert not g.is_member(3)
    with pytest.raises(UnknownMember):
        g.partitions_of(3)
    with pytest.raises(UnknownMember):
        g.next_partition(3)
    with pytest.raises(UnknownMember):
        groups.leave(S, T, "g", 3)


def test_generation_moves_only_when_the_assignment_may_change() -> None:
    groups = AssignedGroups()
    g = groups.create(S, T, "g", partitions=2)
    assert g.generation == 0
    groups.join(S, T, "g", 1)
    assert g.generation == 1
    groups.join(S, T, "g", 1)  # joining again is a no-op
    assert (g.generation, g.members) == (1, (1,))
    groups.resize(S, T, 2)  # same count
    assert g.generation == 1
    groups.leave(S, T, "g", 1)
    assert g.generation == 2


def test_resize_reassigns_every_group_of_the_topic() -> None:
    groups = AssignedGroups()
    a = groups.create(S, T, "a", partitions=2)
    b = groups.create(S, T, "b", partitions=2)
    other = groups.create(S, "u", "a", partitions=2)
    for m in (1, 2):
        groups.join(S, T, "a", m)
        groups.join(S, T, "b", m)
    groups.join(S, "u", "a", 1)
    groups.resize(S, T, 5)
    for g in (a, b):
        assert g.partitions == 5
        check_assignment(g)
        assert g.partitions_of(1) == (0, 2, 4)
    groups.resize(S, T, 1)
    assert a.partitions_of(1) == (0,) and a.partitions_of(2) == ()
    assert other.partitions == 2 and other.partitions_of(1) == (0, 1)
    with pytest.raises(InvalidRequest):
        groups.resize(S, T, -1)


def test_two_groups_on_one_topic_are_independent() -> None:
    groups = AssignedGroups()
    g1 = groups.create(S, T, "g1", partitions=4)
    g2 = groups.create(S, T, "g2", partitions=4)
    groups.join(S, T, "g1", 1)
    groups.join(S, T, "g1", 2)
    groups.join(S, T, "g2", 3)
    groups.join(S, T, "g2", 1)  # one client in both groups
    assert g1.assignment() == {1: (0, 2), 2: (1, 3)}
    assert g2.assignment() == {3: (0, 2), 1: (1, 3)}
    g1.next_partition(1)
    assert g2.next_partition(1) == 1  # cursors are per group
    groups.leave(S, T, "g1", 2)
    assert g1.assignment() == {1: (0, 1, 2, 3)}
    assert g2.assignment() == {3: (0, 2), 1: (1, 3)}
    assert (g1.generation, g2.generation) == (3, 2)


def test_leave_all_takes_a_disconnected_client_out_of_every_group() -> None:
    groups = AssignedGroups()
    a = groups.create(S, T, "a", partitions=3)
    b = groups.create("s2", "t2", "b", partitions=2)
    for g in (a, b):
        groups.join(g.stream, g.topic, g.id, 1)
        groups.join(g.stream, g.topic, g.id, 2)
    assert groups.memberships(1) == [a, b]
    assert groups.leave_all(1) == [a, b]
    assert groups.memberships(1) == []
    assert a.assignment() == {2: (0, 1, 2)} and b.assignment() == {2: (0, 1)}
    assert groups.leave_all(1) == []  # nothing left, no error
    assert groups.memberships(2) == [a, b]


def test_dropping_a_topic_or_stream_drops_its_groups() -> None:
    groups = AssignedGroups()
    a = groups.create(S, T, "a", partitions=1)
    groups.create(S, "u", "b", partitions=1)
    keep = groups.create("other", T, "c", partitions=1)
    for g in (a, keep):
        groups.join(g.stream, g.topic, g.id, 9)
    groups.drop_topic(S, T)
    assert groups.list(S, T) == [] and groups.memberships(9) == [keep]
    assert groups.create(S, T, "a", partitions=1).id == 0  # a new topic starts at 0 again
    groups.drop_stream(S)
    assert groups.list(S, T) == [] and groups.list(S, "u") == []
    assert groups.list("other", T) == [keep]
