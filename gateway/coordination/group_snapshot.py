"""A ``GroupTable`` as JSON and back: the snapshots that let a shared-groups replica start from
the retained part of the log (``coordination.shared_groups``).

Everything a later transition reads is kept, deadlines included (on the log's clock); what only
parks a caller is kept as a fact: a member parked in JoinGroup (under the rid of its join, so a
later ``abandon-join`` still finds it) or in SyncGroup.
"""

from __future__ import annotations

import base64
import math
from typing import Any

from .group_state import Group, GroupState, JoinWaiter, Member, SyncRound
from .groups import GroupTable


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def unb64(text: str) -> bytes:
    return base64.b64decode(text)


def _time(t: float) -> float | None:
    return None if math.isinf(t) else t


def _untime(t: float | None) -> float:
    return math.inf if t is None else float(t)


def export_table(table: GroupTable, parked_joins: dict[str, JoinWaiter]) -> list[dict[str, Any]]:
    join_rid = {id(w): rid for rid, w in parked_joins.items() if not w.answered}
    parked_syncs = {
        (g.key, m.member_id)
        for g, m, r in table.parked_syncs
        if r is g.sync_round and not r.done
    }  # fmt: skip
    return [
        {
            "stream": g.stream,
            "name": g.name,
            "state": g.state.value,
            "generation": g.generation,
            "protocol_type": g.protocol_type,
            "protocol": g.protocol,
            "leader": g.leader,
            "rebalance_deadline": _time(g.rebalance_deadline),
            "initial_delay": g.initial_delay,
            "initial_remaining_s": g.initial_remaining_s,
            "new_member_added": g.new_member_added,
            "pending_sync": sorted(g.pending_sync),
            "sync_deadline": _time(g.sync_deadline),
            "members": [
                {
                    "id": m.member_id,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "instance": m.group_instance_id,
                    "session_s": m.session_timeout_s,
                    "rebalance_s": m.rebalance_timeout_s,
                    "protocols": [
                        [n, base64.b64encode(p).decode()] for n, p in m.protocols.items()
                    ],
                    "deadline": _time(m.deadline),
                    "is_new": m.is_new,
                    "join": join_rid.get(id(m.join_waiter)) if m.join_waiter else None,
                    "sync_parked": (g.key, m.member_id) in parked_syncs,
                    "assignment": b64(m.assignment),
                }
                for m in g.members.values()
            ],
        }
        for _, g in sorted(table.groups.items())
    ]


def restore_table(table: GroupTable, groups: list[dict[str, Any]]) -> dict[str, JoinWaiter]:
    """Replace ``table``'s groups with ``groups``; the parked joins' waiters by their rid."""
    table.groups.clear()
    table.parked_syncs.clear()
    joins: dict[str, JoinWaiter] = {}
    for d in groups:
        g = Group(
            stream=d["stream"],
            name=d["name"],
            state=GroupState(d["state"]),
            generation=int(d["generation"]),
            protocol_type=d["protocol_type"],
            protocol=d["protocol"],
            leader=d["leader"],
            rebalance_deadline=_untime(d["rebalance_deadline"]),
            initial_delay=bool(d["initial_delay"]),
            initial_remaining_s=float(d["initial_remaining_s"]),
            new_member_added=bool(d["new_member_added"]),
            pending_sync=set(d["pending_sync"]),
            sync_deadline=_untime(d["sync_deadline"]),
            sync_round=SyncRound(),
        )
        for md in d["members"]:
            m = Member(
                member_id=md["id"],
                client_id=md["client_id"],
                client_host=md["client_host"],
                group_instance_id=md["instance"],
                session_timeout_s=float(md["session_s"]),
                rebalance_timeout_s=float(md["rebalance_s"]),
                protocols={n: unb64(p) for n, p in md["protocols"]},
                deadline=_untime(md["deadline"]),
                is_new=bool(md["is_new"]),
                assignment=unb64(md["assignment"]),
            )
            if md["join"] is not None:
                m.join_waiter = joins[md["join"]] = JoinWaiter()
            if md["sync_parked"]:
                m.syncs_waiting = 1
                table.parked_syncs.append((g, m, g.sync_round))
            g.members[m.member_id] = m
        table.groups[g.key] = g
    for g in table.groups.values():
        table.rearm(g)
    return joins


__all__ = ["b64", "export_table", "restore_table", "unb64"]
