"""Iggy group definitions replicated over a log (coordination.GroupDefinitions): every replica
that applies the same records in the same order holds the same groups, the first create of a
name wins and the writer of the second learns it lost, deletes end the members' groups."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gateway.coordination import AssignedGroup, GroupDefinitions
from gateway.model import GroupExists, UnknownGroup


def record(rid: str, **fields: Any) -> bytes:
    return json.dumps({"rid": rid, **fields}).encode()


CREATE_A = record("r1", op="create", stream="s", topic="t", name="workers", partitions=3, id=None)
CREATE_B = record("r2", op="create", stream="s", topic="t", name="workers", partitions=3, id=None)
CREATE_C = record("r3", op="create", stream="s", topic="t", name="auditors", partitions=3, id=None)


def replay(defs: GroupDefinitions, *records: bytes) -> None:
    for data in records:
        defs.apply_entry(data, offset=defs.next_offset, timestamp_ms=0)
        defs.next_offset += 1


def test_two_replicas_agree_and_the_first_create_of_a_name_wins() -> None:
    one, two = GroupDefinitions(), GroupDefinitions()
    for defs in (one, two):
        replay(defs, CREATE_A, CREATE_B, CREATE_C)
    won = one.take("r1")
    assert won is not None and (won.id, won.name, won.uid) == (0, "workers", "r1")
    with pytest.raises(GroupExists):
        one.take("r2")  # the writer of the second is told
    for defs in (one, two):
        listed = [(g.id, g.name, g.uid) for g in defs.table.list("s", "t")]
        assert listed == [(0, "workers", "r1"), (1, "auditors", "r3")]


def test_deletes_drops_and_renames_follow_the_log() -> None:
    dropped: list[str] = []
    defs = GroupDefinitions()

    def on_dropped(group: AssignedGroup) -> None:
        dropped.append(group.name)

    defs.watch(on_dropped)
    replay(
        defs, CREATE_A, CREATE_C,
        record("r4", op="delete", stream="s", topic="t", group="workers"),
        record("r5", op="rename-topic", stream="s", topic="t", to="t2"),
        record("r6", op="rename-stream", stream="s", to="s2"),
    )  # fmt: skip
    assert dropped == ["workers"]
    assert [g.name for g in defs.table.list("s2", "t2")] == ["auditors"]
    with pytest.raises(UnknownGroup):
        defs.table.get("s", "t", "auditors")
    replay(defs, record("r7", op="drop-stream", stream="s2"))
    assert dropped == ["workers", "auditors"] and defs.table.list("s2", "t2") == []
    replay(defs, record("r8", op="delete", stream="s2", topic="t2", group=5))
    with pytest.raises(UnknownGroup):
        defs.take("r8")


def test_a_malformed_record_is_skipped_and_the_replica_goes_on() -> None:
    defs = GroupDefinitions()
    replay(defs, b"not json", record("r9", op="no-such-op", stream="s"), b"[1]", CREATE_A)
    assert [g.name for g in defs.table.list("s", "t")] == ["workers"]
    assert defs.next_offset == 4
