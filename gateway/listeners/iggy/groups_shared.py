"""Iggy consumer groups shared by every gateway on one backend (issue 14).

Definitions (which groups exist on a topic, their ids and names) are replicated over a log on the
backend (``coordination.GroupDefinitions``): a group created through one gateway is there through
every other, and two gateways creating one name at once give one group and one GroupExists.

Membership is a broker group run through the router's JoinGroup, SyncGroup, Heartbeat and
LeaveGroup, as ``rabbitmq_stream.sac`` does for single active consumers: on the Kafka backend the
broker's coordinator, on RabbitMQ and Iggy the gateways' replicated groups. The broker group is
named as the Iggy group, the name its committed offsets are stored under, so a member's
auto-commit names its generation and a member that lost its partitions cannot commit over the
new owner. Each joined Iggy client is one member (protocol type ``streamgate-iggy``) whose
metadata names the group's definition; the leader gives partition ``p`` of a definition to the
``p mod n``-th of its ``n`` members in join order, as Iggy's server does.

A member gives up its partitions before it rejoins and waits for its polls in flight (``lease``),
and a rebalance completes only once every live member rejoined, so two members never poll one
partition. A gateway that dies stops heartbeating; its members' partitions move on after the
session timeout (6 s). A member waits for the broker's first assignment (a few seconds: the
coordinator's initial rebalance delay) and polls nothing until then.

A Kafka consumer group of the same name is the same broker group: the two cannot have members at
once (InconsistentGroupProtocol), and share committed offsets, as offsets already were.
"""

from __future__ import annotations

import builtins
import contextlib
import json
import time
import uuid
from collections.abc import Iterator
from typing import Any, Final, Protocol

import structlog
import trio

from gateway.coordination import AssignedGroup, GroupDefinitions
from gateway.listeners.broker_membership import Membership, heartbeat, keep_joining
from gateway.listeners.iggy.group_store import DefinitionView, GroupView
from gateway.model import (
    DEFAULT_STREAM,
    BackendUnavailable,
    DescribeGroup,
    GatewayError,
    JoinGroup,
    MemberInfo,
    SyncGroup,
    UnknownMember,
)
from gateway.router import RequestContext, Router

log = structlog.get_logger("streamgate.iggy")

SESSION_TIMEOUT_MS: Final = 6000
HEARTBEAT_S: Final = 1.0
REBALANCE_TIMEOUT_MS: Final = 10_000
SETTLE_S: Final = 10.0  # how long a command waits for the definitions log to be read
DRAIN_S: Final = 5.0  # how long a rejoining member waits for its polls in flight
PROTOCOL_TYPE: Final = "streamgate-iggy"


class DefinitionsLog(Protocol):
    """The backend's log the definitions replicate over (``backends.topic_log.TopicLog``)."""

    @property
    def ready(self) -> bool: ...

    async def write(self, record: dict[str, Any]) -> None: ...

    async def caught_up(self) -> None: ...

    async def run(self, *, task_status: trio.TaskStatus[None] = ...) -> None: ...


class _Member:
    """One Iggy client's membership of one group, on this gateway."""

    __slots__ = (
        "client_id",
        "cursor",
        "everyone",
        "generation",
        "group",
        "idle",
        "in_flight",
        "joined_ns",
        "known",
        "membership",
        "partitions",
        "rejoin",
        "scope",
    )

    def __init__(self, group: AssignedGroup, client_id: int) -> None:
        self.group = group
        self.client_id = client_id
        self.joined_ns = time.time_ns()
        self.known = group.partitions  # the partition count it last saw
        self.membership = Membership()  # the broker's id of it
        self.generation = -1
        self.partitions: tuple[int, ...] = ()
        self.everyone: dict[int, tuple[int, ...]] = {}  # the whole assignment, as last synced
        self.cursor = 0
        self.in_flight = 0
        self.idle = trio.Event()
        self.idle.set()
        self.rejoin = False
        self.scope = trio.CancelScope()

    def metadata(self) -> bytes:
        g = self.group
        return json.dumps({"u": g.uid, "c": self.client_id, "j": self.joined_ns, "n": self.known},
                          separators=(",", ":")).encode()  # fmt: skip


def assign(members: tuple[MemberInfo, ...]) -> tuple[tuple[str, bytes], ...]:
    """The leader's assignment: per definition, partition p to the (p mod n)-th member by join
    time. A member whose metadata is not ours gets nothing."""
    by_group: dict[str, list[tuple[int, str, int]]] = {}
    counts: dict[str, int] = {}
    for m in members:
        meta = _metadata(m.metadata)
        if meta is None:
            continue
        uid = meta["u"]
        by_group.setdefault(uid, []).append((meta["j"], m.member_id, meta["c"]))
        counts[uid] = max(counts.get(uid, 0), meta["n"])
    out: dict[str, bytes] = {m.member_id: b"" for m in members}
    for uid, joined in by_group.items():
        joined.sort()
        n, k = counts[uid], len(joined)
        everyone = [[client, list(range(i, n, k))] for i, (_, _, client) in enumerate(joined)]
        for i, (_, member_id, _) in enumerate(joined):
            out[member_id] = json.dumps({"p": everyone[i][1], "all": everyone}).encode()
    return tuple(out.items())


def _metadata(data: bytes) -> dict[str, Any] | None:
    try:
        meta = json.loads(data)
        if (
            isinstance(meta, dict)
            and isinstance(meta.get("u"), str)
            and all(isinstance(meta.get(k), int) for k in ("c", "j", "n"))
        ):
            return meta
    except ValueError:
        pass
    return None


def _partitions(data: bytes) -> tuple[int, ...]:
    try:
        parts = json.loads(data).get("p", []) if data else []
        return tuple(int(p) for p in parts)
    except (ValueError, AttributeError, TypeError):
        return ()


def _everyone(data: bytes) -> dict[int, tuple[int, ...]]:
    """client id -> partitions of every member of the definition, in join order."""
    try:
        listed = json.loads(data).get("all", []) if data else []
        return {int(c): tuple(int(p) for p in parts) for c, parts in listed}
    except (ValueError, AttributeError, TypeError):
        return {}


class SharedView(DefinitionView):
    """A group as this gateway sees it: its definition, its local members' assignments and,
    after ``refresh``, every member's."""

    __slots__ = ("_owner",)

    def __init__(self, owner: SharedIggyGroups, group: AssignedGroup) -> None:
        super().__init__(group)
        self._owner = owner

    @property
    def members(self) -> tuple[int, ...]:
        return tuple(self.assignment())

    def assignment(self) -> dict[int, tuple[int, ...]]:
        """Every member's partitions: as the latest generation a member here synced lists
        them, or (no member here) as the coordinator described the group."""
        local = [m for m in self._owner.members.get(self._g, {}).values() if m.everyone]
        if local:
            return dict(max(local, key=lambda m: m.generation).everyone)
        return dict(self._owner.described.get(self._g, {}))

    def _member(self, member_id: int) -> _Member:
        found = self._owner.members.get(self._g, {}).get(member_id)
        if found is None:
            raise UnknownMember(f"client {member_id} is not a member of consumer group "
                                f"{self._g.name!r}")  # fmt: skip
        return found

    def generation_of(self, member_id: int) -> int:
        return max(0, self._member(member_id).generation)

    def is_member(self, member_id: int) -> bool:
        return member_id in self._owner.members.get(self._g, {})

    def partitions_of(self, member_id: int) -> tuple[int, ...]:
        return self._member(member_id).partitions

    def next_partition(self, member_id: int) -> int | None:
        m = self._member(member_id)
        if not m.partitions:
            return None
        i = m.cursor % len(m.partitions)
        m.cursor = i + 1
        return m.partitions[i]

    @contextlib.contextmanager
    def lease(self, member_id: int) -> Iterator[None]:
        m = self._owner.members.get(self._g, {}).get(member_id)
        if m is None:
            yield
            return
        m.in_flight += 1
        m.idle = trio.Event() if m.in_flight == 1 else m.idle
        try:
            yield
        finally:
            m.in_flight -= 1
            if m.in_flight == 0:
                m.idle.set()

    def fence(self, member_id: int) -> tuple[int, str]:
        m = self._owner.members.get(self._g, {}).get(member_id)
        if m is None or not m.membership.member_id:
            return -1, ""
        return m.generation, m.membership.member_id


class SharedIggyGroups:
    """``IggyGroups`` for every gateway on one backend; ``run`` it before serving."""

    def __init__(self, router: Router, definitions: GroupDefinitions) -> None:
        self.router = router
        self.definitions = definitions
        definitions.watch(self._dropped)
        self.log: DefinitionsLog | None = None
        self.members: dict[AssignedGroup, dict[int, _Member]] = {}
        self.described: dict[AssignedGroup, dict[int, tuple[int, ...]]] = {}
        self._nursery: trio.Nursery | None = None
        self._ctx = RequestContext("iggy", "consumer_group", system=True)

    def bind(self, definitions_log: DefinitionsLog) -> None:
        self.log = definitions_log

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        assert self.log is not None, "bind the definitions log first"
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            await nursery.start(self.log.run)
            task_status.started()
            await trio.sleep_forever()

    # --- definitions ----------------------------------------------------------------------------

    async def settled(self, *, fresh: bool = False) -> None:
        """The definitions read; ``fresh``: including every one written anywhere until now."""
        if self.log is None or not self.log.ready:
            with trio.move_on_after(SETTLE_S):
                while self.log is None or not self.log.ready:  # noqa: ASYNC110 (the log's flag)
                    await trio.sleep(0.05)
            if self.log is None or not self.log.ready:
                raise BackendUnavailable("consumer groups: the backend's group log is not read yet")
        if fresh:
            await self.log.caught_up()

    def get(self, stream: str, topic: str, group: int | str) -> GroupView:
        return SharedView(self, self.definitions.table.get(stream, topic, group))

    def list(self, stream: str, topic: str) -> builtins.list[GroupView]:
        return [SharedView(self, g) for g in self.definitions.table.list(stream, topic)]

    def memberships(self, member_id: int) -> builtins.list[GroupView]:
        return [
            SharedView(self, g)
            for g, local in sorted(self.members.items(), key=lambda kv: _key(kv[0]))
            if member_id in local
        ]

    async def _write(self, record: dict[str, Any]) -> AssignedGroup | None:
        await self.settled()
        assert self.log is not None
        rid = uuid.uuid4().hex
        await self.log.write({**record, "rid": rid})
        return self.definitions.take(rid)

    async def create(
        self, stream: str, topic: str, name: str, *, partitions: int, group_id: int | None = None
    ) -> GroupView:
        made = await self._write({"op": "create", "stream": stream, "topic": topic, "name": name,
                                  "partitions": partitions, "id": group_id})  # fmt: skip
        assert made is not None
        return SharedView(self, made)

    async def delete(self, stream: str, topic: str, group: int | str) -> None:
        await self._write({"op": "delete", "stream": stream, "topic": topic, "group": group})

    async def drop_topic(self, stream: str, topic: str) -> None:
        await self._write({"op": "drop-topic", "stream": stream, "topic": topic})

    async def drop_stream(self, stream: str) -> None:
        await self._write({"op": "drop-stream", "stream": stream})

    async def rename_topic(self, stream: str, topic: str, new_name: str) -> None:
        await self._write({"op": "rename-topic", "stream": stream, "topic": topic, "to": new_name})

    async def rename_stream(self, stream: str, new_name: str) -> None:
        await self._write({"op": "rename-stream", "stream": stream, "to": new_name})

    def _dropped(self, group: AssignedGroup) -> None:
        """A record deleted ``group``: its members here end (and leave the broker group)."""
        for m in self.members.pop(group, {}).values():
            m.scope.cancel()
        self.described.pop(group, None)

    # --- membership -----------------------------------------------------------------------------

    def join(self, stream: str, topic: str, group: int | str, member_id: int) -> GroupView:
        found = self.definitions.table.get(stream, topic, group)
        local = self.members.setdefault(found, {})
        if member_id not in local:
            assert self._nursery is not None, "run the groups first"
            m = local[member_id] = _Member(found, member_id)
            self._nursery.start_soon(self._run, m)
        return SharedView(self, found)

    def leave(self, stream: str, topic: str, group: int | str, member_id: int) -> None:
        found = self.definitions.table.get(stream, topic, group)
        local = self.members.get(found, {})
        m = local.pop(member_id, None)
        if m is None:
            raise UnknownMember(f"client {member_id} is not a member of consumer group "
                                f"{found.name!r}")  # fmt: skip
        if not local:
            self.members.pop(found, None)
        m.scope.cancel()

    def leave_all(self, member_id: int) -> None:
        for group in list(self.members):
            local = self.members[group]
            m = local.pop(member_id, None)
            if m is not None:
                m.scope.cancel()
                if not local:
                    del self.members[group]

    def resize(self, stream: str, topic: str, partitions: int) -> None:
        """The topic has ``partitions`` now: its groups' members here rejoin with that count."""
        for group in self.definitions.table.list(stream, topic):
            group._resize(partitions)
            for m in self.members.get(group, {}).values():
                if m.known != partitions:
                    m.known = partitions
                    m.rejoin = True

    async def refresh(self, group: GroupView) -> None:
        """Where no member of ``group`` is here: every member through any gateway, as the broker
        group describes it (metadata and assignments are given while the group is stable)."""
        found = self.definitions.table.get(group.stream, group.topic, group.id)
        if any(m.everyone for m in self.members.get(found, {}).values()):
            return  # a member here knows the whole assignment
        try:
            result = await self.router.execute(
                DescribeGroup(group=found.name, stream=DEFAULT_STREAM), self._ctx
            )
        except GatewayError as exc:
            log.info("consumer group: describe", group=found.name, error=exc.message)
            self.described.pop(found, None)
            return
        members: list[tuple[int, int, tuple[int, ...]]] = []
        for m in result.info.members:
            meta = _metadata(m.metadata)
            if meta is not None and meta["u"] == found.uid:
                members.append((meta["j"], meta["c"], _partitions(m.assignment)))
        self.described[found] = {c: parts for _, c, parts in sorted(members)}

    async def _run(self, m: _Member) -> None:
        with m.scope:
            try:
                await keep_joining(self.router, self._ctx, m.group.name, m.membership,
                                   lambda: self._round(m), lambda: self._revoke(m))  # fmt: skip
            finally:
                m.partitions = ()

    async def _revoke(self, m: _Member) -> None:
        """Before a rejoin: no partitions, and the polls that hold them finished."""
        m.partitions = ()
        with trio.move_on_after(DRAIN_S):
            await m.idle.wait()

    async def _round(self, m: _Member) -> None:
        """One generation: join, sync, take the assignment, heartbeat until a rebalance (the
        GroupError that ends it) or a change of the partition count (``rejoin``)."""
        execute, group = self.router.execute, m.group.name
        m.rejoin = False
        joined = await execute(
            JoinGroup(group=group, stream=DEFAULT_STREAM, member_id=m.membership.member_id,
                      client_id=f"iggy-{m.client_id}", session_timeout_ms=SESSION_TIMEOUT_MS,
                      rebalance_timeout_ms=REBALANCE_TIMEOUT_MS, protocol_type=PROTOCOL_TYPE,
                      protocols=(("iggy", m.metadata()),)),
            self._ctx,
        )  # fmt: skip
        m.membership.member_id = joined.member_id
        assignments: tuple[tuple[str, bytes], ...] = ()
        if joined.leader == joined.member_id and joined.members:
            assignments = assign(joined.members)
        synced = await execute(
            SyncGroup(group=group, stream=DEFAULT_STREAM, generation=joined.generation,
                      member_id=joined.member_id, assignments=assignments),
            self._ctx,
        )  # fmt: skip
        m.generation = joined.generation
        m.partitions = _partitions(synced.assignment)
        m.everyone = _everyone(synced.assignment)
        m.cursor = 0
        await heartbeat(self.router, self._ctx, group, joined.generation, joined.member_id,
                        HEARTBEAT_S, until=lambda: m.rejoin)  # fmt: skip


def _key(group: AssignedGroup) -> tuple[str, str, int]:
    return (group.stream, group.topic, group.id)


__all__ = ["DefinitionsLog", "SharedIggyGroups", "SharedView", "assign"]
