"""Consumer groups that every gateway on one backend shares: a replicated ``GroupTable``.

A backend without a group coordinator of its own (RabbitMQ) still has what replication needs:
one log that every gateway appends to and reads back in the same order. Each gateway keeps a
replica of the groups and applies the log's records to it; a record is one group command
(JoinGroup, SyncGroup, Heartbeat, LeaveGroup, an abandoned long-poll) or a ``tick`` (the log's
own ``sync`` markers count as ticks). Time is the log's too: a record applies at its chunk's
broker timestamp (never earlier than the one before), and deadlines (sessions, join and sync
phases) fire when a record at or past them applies. Same records, same times, same table:
every replica agrees on members, generations, leaders and assignments without talking to the
others.

A command is answered by the gateway that received it: it appends the record, waits until its
own replica applied it, and answers from what that transition gave (a JoinGroup or a follower's
SyncGroup then waits, like Kafka's, for a later record to complete the rebalance). Nothing else
changes a replica: a client going away is a record (``abandon-join``, ``abandon-sync``), and so
is the passing of time: a gateway whose replica has a deadline due appends a ``tick`` when its
clock says the log's has passed it. A gateway that dies stops heartbeating for its members; the
others' ticks expire them after their session timeout and the group rebalances without them.

The log is retained for a while, not for ever: replicas append a ``snapshot`` (the whole table
and the last offset it covers) now and then, and a gateway that starts reads the retained log,
takes the first snapshot it can continue from (or offset 0), and applies what follows.
"""

from __future__ import annotations

import json
import math
import random
import uuid
from typing import Any, Final, Protocol

import structlog
import trio

from gateway.model import (
    BackendUnavailable,
    DescribeGroup,
    DescribeGroupResult,
    GatewayError,
    GroupError,
    Heartbeat,
    HeartbeatResult,
    JoinGroup,
    JoinGroupResult,
    LeaveGroup,
    LeaveGroupResult,
    ListGroups,
    ListGroupsResult,
    SyncGroup,
    SyncGroupResult,
)

from .group_snapshot import b64, export_table, restore_table, unb64
from .group_state import JoinWaiter, SyncRound
from .groups import GroupTable

log = structlog.get_logger("streamgate.coordination")

SNAPSHOT_EVERY_S: Final = 30.0  # a snapshot at most this long after the records it covers
TICK_LATE_S: Final = 0.05  # past a deadline on the local estimate of the log's clock
_TICK_JITTER_S: Final = 0.05  # spreads the gateways' ticks for one deadline apart
_PRUNE_AT: Final = 256
_READY_POLL_S: Final = 0.05
_READY_POLLS: Final = 40  # 2 s


class SharedLog(Protocol):
    """A log on the backend (``backends.base.SharedLogs``), as the groups use it."""

    @property
    def ready(self) -> bool: ...

    async def write(self, record: dict[str, Any]) -> None:
        """Append ``record`` (a ``rid`` added); return once this replica applied it."""
        ...


class SharedGroups:
    """The group commands of every gateway on one backend, decided by the log's order."""

    def __init__(
        self,
        *,
        initial_rebalance_delay_ms: int = 3000,
        min_session_timeout_ms: int = 6000,
        max_session_timeout_ms: int = 1_800_000,
        snapshot_every_s: float = SNAPSHOT_EVERY_S,
    ) -> None:
        self.table = GroupTable(
            initial_rebalance_delay_ms=initial_rebalance_delay_ms,
            min_session_timeout_ms=min_session_timeout_ms,
            max_session_timeout_ms=max_session_timeout_ms,
            on_earlier_alarm=self._wake,
        )
        self._snapshot_every_s = snapshot_every_s
        self.next_offset = 0  # the log's next record to apply (the backend's follower moves it)
        self._log: SharedLog | None = None
        self._based = False  # the replica holds the log's whole effect so far
        self._pending: list[tuple[int, int, dict[str, Any]]] = []  # records before a base
        self._first_offset: int | None = None
        self._now = 0.0  # the log's clock: the latest record's broker time, in seconds
        self._local_at = 0.0  # trio's clock when that record was applied
        self._outcomes: dict[str, object] = {}  # rid of a record of ours -> what it gave
        self._mine: set[str] = set()
        self._parked_joins: dict[str, JoinWaiter] = {}  # join rid -> its waiter, every replica
        self._since_snapshot = 0  # records applied since the last snapshot in the log
        self._snapshot_seen_at = 0.0  # trio's clock
        self._wakeup = trio.Event()
        self._nursery: trio.Nursery | None = None

    def bind(self, shared_log: SharedLog) -> None:
        self._log = shared_log

    # --- applying the log (the backend's follower calls this, in order) --------------------------

    def apply_entry(self, data: bytes, *, offset: int, timestamp_ms: int) -> str | None:
        try:
            record = json.loads(data)
            if not isinstance(record, dict):
                raise ValueError("not an object")
        except ValueError as exc:
            log.warning("coordination record skipped", error=str(exc), offset=offset)
            return None
        rid = record.get("rid")
        if self._based and offset > self.next_offset:
            # Records this replica never saw are gone (retention passed while it was away):
            # start over from the next snapshot rather than go on with a wrong table.
            log.warning("coordination log has a gap: waiting for a snapshot",
                        expected=self.next_offset, got=offset)  # fmt: skip
            self._based = False
            self._first_offset = offset
            self._pending.clear()
        if self._first_offset is None:
            self._first_offset = offset
        if not self._based:
            self._base_on(offset, timestamp_ms, record)
        else:
            self._apply(offset, timestamp_ms, record)
        return rid if isinstance(rid, str) else None

    def _base_on(self, offset: int, timestamp_ms: int, record: dict[str, Any]) -> None:
        """Before the replica is complete: from offset 0 everything counts; after a truncated
        start, the first snapshot that covers up to where the retained log begins."""
        if offset == 0:
            self._based = True
            self._apply(offset, timestamp_ms, record)
            return
        first = self._first_offset if self._first_offset is not None else offset
        if record.get("op") == "snapshot" and int(record["through"]) + 1 >= first:
            self._parked_joins = restore_table(self.table, record["table"])
            self._now = float(record["now"])
            self._local_at = trio.current_time()
            self._based = True
            through = int(record["through"])
            log.info("coordination replica restored", snapshot=offset, through=through)
            for o, ts, r in self._pending:
                if o > through:
                    self._apply(o, ts, r)
            self._pending.clear()
            self._apply(offset, timestamp_ms, record)
            return
        self._pending.append((offset, timestamp_ms, record))

    def _apply(self, offset: int, timestamp_ms: int, record: dict[str, Any]) -> None:
        now = max(self._now, timestamp_ms / 1000)
        self._now = now
        self._local_at = trio.current_time()
        self.table.fire(now)
        rid = record.get("rid")
        op = record.get("op")
        try:
            outcome = self._transition(op, record, now)
        except GroupError as exc:
            outcome = exc
        except (KeyError, TypeError, ValueError) as exc:
            log.warning("coordination record skipped", op=op, error=str(exc), offset=offset)
            outcome = None
        if op == "snapshot":
            self._since_snapshot = 0
            self._snapshot_seen_at = trio.current_time()
        else:
            self._since_snapshot += 1
        if isinstance(rid, str) and rid in self._mine:
            self._outcomes[rid] = outcome
        if len(self._parked_joins) > _PRUNE_AT:
            self._parked_joins = {r: w for r, w in self._parked_joins.items() if not w.answered}
        self._wake()

    def _transition(self, op: object, r: dict[str, Any], now: float) -> object:
        table = self.table
        match op:
            case "join-group":
                cmd = JoinGroup(
                    group=r["group"],
                    stream=r["stream"],
                    member_id=r["member"],
                    group_instance_id=r.get("instance"),
                    client_id=r["client_id"],
                    client_host=r["client_host"],
                    session_timeout_ms=int(r["session_ms"]),
                    rebalance_timeout_ms=int(r["rebalance_ms"]),
                    protocol_type=r["protocol_type"],
                    protocols=tuple((n, unb64(m)) for n, m in r["protocols"]),
                )
                outcome = table.join(cmd, now, new_member_id=r["new_id"])
                if isinstance(outcome, JoinWaiter):
                    self._parked_joins[r["rid"]] = outcome
                return outcome
            case "sync-group":
                cmd_s = SyncGroup(
                    group=r["group"],
                    stream=r["stream"],
                    generation=int(r["generation"]),
                    member_id=r["member"],
                    assignments=tuple((m, unb64(a)) for m, a in r["assignments"]),
                )
                return table.sync(cmd_s, now)
            case "heartbeat":
                cmd_h = Heartbeat(
                    group=r["group"],
                    stream=r["stream"],
                    generation=int(r["generation"]),
                    member_id=r["member"],
                )
                return table.heartbeat(cmd_h, now)
            case "leave-group":
                cmd_l = LeaveGroup(
                    group=r["group"],
                    stream=r["stream"],
                    member_ids=tuple(r["members"]),
                    group_instance_ids=tuple(r.get("instances", ())),
                )
                return table.leave(cmd_l, now)
            case "abandon-join":
                waiter = self._parked_joins.pop(r["join"], None)
                if waiter is not None:
                    table.abandon_join(r["stream"], r["group"], waiter, now)
                return None
            case "abandon-sync":
                group = table.groups.get((r["stream"], r["group"]))
                if group is not None and group.generation == int(r["generation"]):
                    table.abandon_sync(group.sync_round, r["member"], now)
                return None
            case _:  # tick, snapshot, the log's own sync marker: the clock moved, nothing else
                return None

    # --- the commands ---------------------------------------------------------------------------

    async def join_group(self, cmd: JoinGroup) -> JoinGroupResult:
        self.table.check_session_timeout(cmd)
        record = {
            "op": "join-group",
            "group": cmd.group,
            "stream": cmd.stream,
            "member": cmd.member_id,
            "new_id": f"{cmd.client_id}-{uuid.uuid4()}",
            "client_id": cmd.client_id,
            "client_host": cmd.client_host,
            "session_ms": cmd.session_timeout_ms,
            "rebalance_ms": cmd.rebalance_timeout_ms,
            "protocol_type": cmd.protocol_type,
            "protocols": [[n, b64(m)] for n, m in cmd.protocols],
        }
        if cmd.group_instance_id is not None:
            record["instance"] = cmd.group_instance_id
        rid = uuid.uuid4().hex
        answered = False
        try:
            outcome = await self._submit(rid, record)
            if isinstance(outcome, JoinGroupResult):
                answered = True
                return outcome
            assert isinstance(outcome, JoinWaiter)
            result = await outcome.wait()
            answered = True
            return result
        finally:
            if not answered:
                # The client went away (or the log did) before its rebalance ended: the others
                # must not wait for its answer (a no-op where the join never landed or ended).
                abandon = {"op": "abandon-join", "join": rid, "group": cmd.group,
                           "stream": cmd.stream}  # fmt: skip
                self._background(abandon)

    async def sync_group(self, cmd: SyncGroup) -> SyncGroupResult:
        record = {
            "op": "sync-group",
            "group": cmd.group,
            "stream": cmd.stream,
            "generation": cmd.generation,
            "member": cmd.member_id,
            "assignments": [[m, b64(a)] for m, a in cmd.assignments],
        }
        outcome = await self._submit(uuid.uuid4().hex, record)
        if isinstance(outcome, SyncGroupResult):
            return outcome
        assert isinstance(outcome, SyncRound)
        try:
            await outcome.wait()
        finally:
            if not outcome.done:
                abandon = {"op": "abandon-sync", "group": cmd.group, "stream": cmd.stream,
                           "generation": cmd.generation, "member": cmd.member_id}  # fmt: skip
                self._background(abandon)
        return self.table.assignment_from(outcome, cmd.member_id, cmd.group)

    async def heartbeat(self, cmd: Heartbeat) -> HeartbeatResult:
        record = {"op": "heartbeat", "group": cmd.group, "stream": cmd.stream,
                  "generation": cmd.generation, "member": cmd.member_id}  # fmt: skip
        outcome = await self._submit(uuid.uuid4().hex, record)
        assert isinstance(outcome, HeartbeatResult)
        return outcome

    async def leave_group(self, cmd: LeaveGroup) -> LeaveGroupResult:
        record: dict[str, Any] = {"op": "leave-group", "group": cmd.group, "stream": cmd.stream,
                                  "members": list(cmd.member_ids)}  # fmt: skip
        if cmd.group_instance_ids:
            record["instances"] = list(cmd.group_instance_ids)
        outcome = await self._submit(uuid.uuid4().hex, record)
        assert isinstance(outcome, LeaveGroupResult)
        return outcome

    async def describe_group(self, cmd: DescribeGroup) -> DescribeGroupResult:
        await self._wait_ready()
        return self.table.describe(cmd)

    async def list_groups(self, cmd: ListGroups) -> ListGroupsResult:
        await self._wait_ready()
        return self.table.list(cmd)

    def check_commit(self, group: str, stream: str, generation: int, member_id: str) -> None:
        """Kafka's commit check against this replica (which trails the log by the time a record
        takes to come back). Unlike one gateway's coordinator, a commit does not count as the
        member's heartbeat: that would be a record too, and consumers heartbeat anyway."""
        if not self._based:
            raise BackendUnavailable("the shared groups are not read from the backend yet")
        self.table.check_commit(group, stream, generation, member_id, None)

    # --- running ------------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Append the ticks that move the log's clock past due deadlines, and the snapshots;
        carry the records of abandoned long-polls."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            try:
                await self._tick_and_snapshot()
            finally:
                self._nursery = None

    async def _tick_and_snapshot(self) -> None:
        jitter = random.random() * _TICK_JITTER_S
        self._snapshot_seen_at = trio.current_time()
        while True:
            self._wakeup = trio.Event()
            due_log = self.table.next_alarm()
            wake_at = math.inf  # until a record applies: nothing new to snapshot or tick
            if self._since_snapshot:
                wake_at = self._snapshot_seen_at + self._snapshot_every_s
            if due_log < math.inf:
                wake_at = min(wake_at, self._local_at + (due_log - self._now) + TICK_LATE_S)
            with trio.move_on_at(wake_at + jitter):
                await self._wakeup.wait()  # every applied record: deadlines may have moved
            if self._log is None or not self._log.ready or not self._based:
                await trio.sleep(0.1)
                continue
            try:
                if self.table.next_alarm() <= self._estimated_now():
                    await self._log.write({"op": "tick"})
                if self._snapshot_due():
                    await self._log.write(self._snapshot())
            except GatewayError as exc:
                log.info("coordination record not written", error=exc.message)

    def _estimated_now(self) -> float:
        return self._now + (trio.current_time() - self._local_at)

    def _snapshot_due(self) -> bool:
        return (
            self._based
            and self._since_snapshot > 0
            and trio.current_time() - self._snapshot_seen_at >= self._snapshot_every_s
        )

    def _snapshot(self) -> dict[str, Any]:
        return {
            "op": "snapshot",
            "through": self.next_offset - 1,
            "now": self._now,
            "table": export_table(self.table, self._parked_joins),
        }

    def _wake(self) -> None:
        self._wakeup.set()

    # --- plumbing -------------------------------------------------------------------------------

    async def _wait_ready(self) -> None:
        """A moment for a gateway that just started (or reconnects) to read the log."""
        for _ in range(_READY_POLLS):
            if self._log is not None and self._log.ready and self._based:
                return
            await trio.sleep(_READY_POLL_S)
        raise BackendUnavailable("the shared groups are not read from the backend yet")

    async def _submit(self, rid: str, record: dict[str, Any]) -> object:
        """Append ``record`` and what this replica's transition gave for it."""
        await self._wait_ready()
        assert self._log is not None
        self._mine.add(rid)
        try:
            await self._log.write({**record, "rid": rid})
            if rid not in self._outcomes:
                raise BackendUnavailable("the coordination record was not applied")
            outcome = self._outcomes.pop(rid)
        finally:
            self._mine.discard(rid)
            self._outcomes.pop(rid, None)
        if isinstance(outcome, GroupError):
            raise outcome
        return outcome

    def _background(self, record: dict[str, Any]) -> None:
        nursery = self._nursery
        if nursery is not None:
            nursery.start_soon(self._write_quietly, record)

    async def _write_quietly(self, record: dict[str, Any]) -> None:
        if self._log is None:
            return
        try:
            await self._log.write(record)
        except GatewayError as exc:
            log.info("coordination record not written", op=record.get("op"), error=exc.message)


__all__ = ["SharedGroups", "SharedLog"]
