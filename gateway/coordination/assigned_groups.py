"""Consumer groups whose partitions the server assigns, as Iggy's are (iggy.md §5.8).

Unlike Kafka, an Iggy client does not negotiate an assignment: it joins, asks for its partitions
(SyncConsumerGroup, 606) and polls them in turn. So the gateway assigns, like Iggy's server does:
partition ``p`` goes to the ``p % n``-th of the ``n`` members in join order, recomputed whenever a
member joins or leaves or the topic's partition count changes; every change bumps the group's
generation (the first field of the Sync reply). Members are client (session) ids.

Groups are keyed by (stream, topic) and then by id or name. Ids are per topic and 0-based as in
the current Iggy (iggy.md §0.7, §4): the lowest unused id from the last one handed out on, unless
the client chose one (legacy clients send explicit ids). Plain in-memory bookkeeping, like
Iggy's: membership ends with the client's connection (``leave_all``).
"""

from __future__ import annotations

import builtins
from collections.abc import Callable

from gateway.model import GroupExists, InvalidRequest, UnknownGroup, UnknownMember

TopicKey = tuple[str, str]  # (stream, topic)


class AssignedGroup:
    __slots__ = (
        "_cursor",
        "_members",
        "_partitions",
        "generation",
        "id",
        "name",
        "stream",
        "topic",
        "uid",
    )

    def __init__(self, *, stream: str, topic: str, id: int, name: str, partitions: int) -> None:
        self.stream = stream
        self.topic = topic
        self.id = id
        self.name = name
        self.generation = 0
        self.uid = ""  # the record that created it, where definitions are replicated
        self._partitions = partitions
        self._members: dict[int, tuple[int, ...]] = {}  # member id -> partitions, join order
        self._cursor: dict[int, int] = {}  # member id -> index of its next partition to poll

    @property
    def partitions(self) -> int:
        return self._partitions

    @property
    def members(self) -> tuple[int, ...]:
        return tuple(self._members)

    def assignment(self) -> dict[int, tuple[int, ...]]:
        """Member id -> its partitions, in join order (ConsumerGroupDetails lists them so)."""
        return dict(self._members)

    def is_member(self, member_id: int) -> bool:
        return member_id in self._members

    def partitions_of(self, member_id: int) -> tuple[int, ...]:
        try:
            return self._members[member_id]
        except KeyError:
            raise self._not_member(member_id) from None

    def next_partition(self, member_id: int) -> int | None:
        """The member's partitions in turn, for a group poll with PollingStrategy "next".

        None when the member has no partition (more members than partitions).
        """
        mine = self.partitions_of(member_id)
        if not mine:
            return None
        i = self._cursor[member_id] % len(mine)
        self._cursor[member_id] = i + 1
        return mine[i]

    def _not_member(self, member_id: int) -> UnknownMember:
        return UnknownMember(f"client {member_id} is not a member of consumer group {self.name!r}")

    def _join(self, member_id: int) -> None:
        if member_id not in self._members:
            self._members[member_id] = ()
            self._rebalance()

    def _leave(self, member_id: int) -> None:
        if member_id not in self._members:
            raise self._not_member(member_id)
        del self._members[member_id]
        self._rebalance()

    def _resize(self, partitions: int) -> None:
        if partitions != self._partitions:
            self._partitions = partitions
            self._rebalance()

    def _rebalance(self) -> None:
        order = list(self._members)
        n = len(order)
        self._members = {m: tuple(range(i, self._partitions, n)) for i, m in enumerate(order)}
        self._cursor = dict.fromkeys(order, 0)
        self.generation += 1

    def __repr__(self) -> str:
        return (
            f"AssignedGroup({self.stream!r}, {self.topic!r}, id={self.id}, name={self.name!r}, "
            f"partitions={self._partitions}, members={self._members})"
        )


class AssignedGroups:
    def __init__(self) -> None:
        self._topics: dict[TopicKey, dict[int, AssignedGroup]] = {}
        self._next_id: dict[TopicKey, int] = {}
        self._memberships: dict[int, set[tuple[str, str, int]]] = {}  # member -> group keys

    def create(
        self, stream: str, topic: str, name: str, *, partitions: int, group_id: int | None = None
    ) -> AssignedGroup:
        _check_partitions(partitions)
        key = (stream, topic)
        groups = self._topics.setdefault(key, {})
        if any(g.name == name for g in groups.values()):
            raise GroupExists(f"consumer group {name!r} already exists on {stream}/{topic}")
        if group_id is None:
            group_id = self._next_id.get(key, 0)
            while group_id in groups:
                group_id += 1
        elif group_id < 0:
            raise InvalidRequest(f"invalid consumer group id {group_id}")
        elif group_id in groups:
            raise GroupExists(f"consumer group {group_id} already exists on {stream}/{topic}")
        self._next_id[key] = max(self._next_id.get(key, 0), group_id + 1)
        group = groups[group_id] = AssignedGroup(
            stream=stream, topic=topic, id=group_id, name=name, partitions=partitions
        )
        return group

    def get(self, stream: str, topic: str, group: int | str) -> AssignedGroup:
        """By id (int) or by name (str), as an Iggy Identifier names it."""
        groups = self._topics.get((stream, topic), {})
        found = (
            groups.get(group)
            if isinstance(group, int)
            else next((g for g in groups.values() if g.name == group), None)
        )
        if found is None:
            raise UnknownGroup(f"consumer group {group!r} does not exist on {stream}/{topic}")
        return found

    def topics(self) -> builtins.list[TopicKey]:
        """The topics that have groups (or had: a topic's last group deleted leaves it)."""
        return builtins.list(self._topics)

    def list(self, stream: str, topic: str) -> list[AssignedGroup]:
        groups = self._topics.get((stream, topic), {})
        return [groups[i] for i in sorted(groups)]

    def delete(self, stream: str, topic: str, group: int | str) -> AssignedGroup:
        found = self.get(stream, topic, group)
        for member_id in found.members:
            self._forget(member_id, found)
        del self._topics[(stream, topic)][found.id]
        return found

    def join(self, stream: str, topic: str, group: int | str, member_id: int) -> AssignedGroup:
        """Joining again is a no-op; a client may belong to several groups at once."""
        found = self.get(stream, topic, group)
        found._join(member_id)
        self._memberships.setdefault(member_id, set()).add(_key(found))
        return found

    def leave(self, stream: str, topic: str, group: int | str, member_id: int) -> AssignedGroup:
        found = self.get(stream, topic, group)
        found._leave(member_id)
        self._forget(member_id, found)
        return found

    def leave_all(self, member_id: int) -> builtins.list[AssignedGroup]:
        """A client disconnected: it leaves every group it was in. Returns those groups."""
        left = self.memberships(member_id)
        for group in left:
            group._leave(member_id)
        self._memberships.pop(member_id, None)
        return left

    def memberships(self, member_id: int) -> builtins.list[AssignedGroup]:
        """The groups a client is in (Iggy's ClientDetails lists them), in key order."""
        keys = sorted(self._memberships.get(member_id, ()))
        return [self._topics[(s, t)][g] for s, t, g in keys]

    def resize(self, stream: str, topic: str, partitions: int) -> None:
        """The topic now has ``partitions`` partitions: every group of it reassigns."""
        _check_partitions(partitions)
        for group in self._topics.get((stream, topic), {}).values():
            group._resize(partitions)

    def drop_topic(self, stream: str, topic: str) -> None:
        """The topic was deleted, and its groups with it."""
        for group in self.list(stream, topic):
            self.delete(stream, topic, group.id)
        self._topics.pop((stream, topic), None)
        self._next_id.pop((stream, topic), None)

    def drop_stream(self, stream: str) -> None:
        for s, t in [key for key in self._topics if key[0] == stream]:
            self.drop_topic(s, t)

    def rename_topic(self, stream: str, topic: str, new_name: str) -> None:
        """The topic was renamed: its groups (and their members' memberships) follow."""
        self._move(lambda s, t: (s, new_name) if (s, t) == (stream, topic) else None)

    def rename_stream(self, stream: str, new_name: str) -> None:
        self._move(lambda s, t: (new_name, t) if s == stream else None)

    def _move(self, rename: Callable[[str, str], TopicKey | None]) -> None:
        moves = {key: new for key in self._topics if (new := rename(*key)) is not None}
        for old, new in moves.items():
            groups = self._topics[new] = self._topics.pop(old)
            if old in self._next_id:
                self._next_id[new] = self._next_id.pop(old)
            for group in groups.values():
                group.stream, group.topic = new
        for keys in self._memberships.values():
            for s, t, g in list(keys):
                if (s, t) in moves:
                    keys.discard((s, t, g))
                    keys.add((*moves[(s, t)], g))

    def _forget(self, member_id: int, group: AssignedGroup) -> None:
        keys = self._memberships.get(member_id)
        if keys is not None:
            keys.discard(_key(group))
            if not keys:
                del self._memberships[member_id]


def _key(group: AssignedGroup) -> tuple[str, str, int]:
    return (group.stream, group.topic, group.id)


def _check_partitions(partitions: int) -> None:
    if partitions < 0:
        raise InvalidRequest(f"invalid partition count {partitions}")


__all__ = ["AssignedGroup", "AssignedGroups"]
