"""Where the Iggy listener keeps its consumer groups: this process (``LocalGroups``, right for one
gateway on the embedded log) or every gateway on the backend together (``groups_shared``).

Both give the handlers one shape: definitions are changed with awaited calls (a shared store
writes them to the backend), membership with plain ones (a shared member runs in the
background), and a group is read through a ``GroupView``.
"""

from __future__ import annotations

import builtins
import contextlib
from collections.abc import Iterator
from typing import Protocol

from gateway.coordination import AssignedGroup, AssignedGroups


class GroupView(Protocol):
    @property
    def id(self) -> int: ...
    @property
    def name(self) -> str: ...
    @property
    def stream(self) -> str: ...
    @property
    def topic(self) -> str: ...
    @property
    def partitions(self) -> int: ...
    @property
    def members(self) -> tuple[int, ...]: ...

    def assignment(self) -> dict[int, tuple[int, ...]]: ...
    def generation_of(self, member_id: int) -> int: ...
    def is_member(self, member_id: int) -> bool: ...
    def partitions_of(self, member_id: int) -> tuple[int, ...]: ...
    def next_partition(self, member_id: int) -> int | None: ...

    def lease(self, member_id: int) -> contextlib.AbstractContextManager[None]:
        """Held while a member polls: its partitions are not handed on until it is released."""
        ...

    def fence(self, member_id: int) -> tuple[int, str]:
        """(generation, member id) a member's commits name; (-1, "") = not fenced."""
        ...


class IggyGroups(Protocol):
    async def settled(self, *, fresh: bool = False) -> None:
        """Return once the groups are known (a shared store has read the backend's log);
        ``fresh``: including every change made through another gateway until now."""
        ...

    def get(self, stream: str, topic: str, group: int | str) -> GroupView: ...
    def list(self, stream: str, topic: str) -> builtins.list[GroupView]: ...
    def memberships(self, member_id: int) -> builtins.list[GroupView]: ...

    async def refresh(self, group: GroupView) -> None:
        """Bring ``group``'s members up to date (a shared store asks the backend)."""
        ...

    async def create(
        self, stream: str, topic: str, name: str, *, partitions: int, group_id: int | None = None
    ) -> GroupView: ...
    async def delete(self, stream: str, topic: str, group: int | str) -> None: ...
    async def drop_topic(self, stream: str, topic: str) -> None: ...
    async def drop_stream(self, stream: str) -> None: ...
    async def rename_topic(self, stream: str, topic: str, new_name: str) -> None: ...
    async def rename_stream(self, stream: str, new_name: str) -> None: ...

    def join(self, stream: str, topic: str, group: int | str, member_id: int) -> GroupView: ...
    def leave(self, stream: str, topic: str, group: int | str, member_id: int) -> None: ...
    def leave_all(self, member_id: int) -> None: ...
    def resize(self, stream: str, topic: str, partitions: int) -> None: ...


class DefinitionView:
    """What a view reads off the group's definition (an ``AssignedGroup``)."""

    __slots__ = ("_g",)

    def __init__(self, group: AssignedGroup) -> None:
        self._g = group

    @property
    def id(self) -> int:
        return self._g.id

    @property
    def name(self) -> str:
        return self._g.name

    @property
    def stream(self) -> str:
        return self._g.stream

    @property
    def topic(self) -> str:
        return self._g.topic

    @property
    def partitions(self) -> int:
        return self._g.partitions


class LocalView(DefinitionView):
    """An ``AssignedGroup`` as a ``GroupView``: one process decides, nothing to fence."""

    __slots__ = ()

    @property
    def members(self) -> tuple[int, ...]:
        return self._g.members

    def assignment(self) -> dict[int, tuple[int, ...]]:
        return self._g.assignment()

    def generation_of(self, member_id: int) -> int:
        return self._g.generation

    def is_member(self, member_id: int) -> bool:
        return self._g.is_member(member_id)

    def partitions_of(self, member_id: int) -> tuple[int, ...]:
        return self._g.partitions_of(member_id)

    def next_partition(self, member_id: int) -> int | None:
        return self._g.next_partition(member_id)

    @contextlib.contextmanager
    def lease(self, member_id: int) -> Iterator[None]:
        yield  # assignments change only between commands of one process

    def fence(self, member_id: int) -> tuple[int, str]:
        return -1, ""


class LocalGroups:
    """The groups of this process alone (``coordination.AssignedGroups``)."""

    def __init__(self, table: AssignedGroups | None = None) -> None:
        self.table = table if table is not None else AssignedGroups()

    async def settled(self, *, fresh: bool = False) -> None:
        return None

    def get(self, stream: str, topic: str, group: int | str) -> GroupView:
        return LocalView(self.table.get(stream, topic, group))

    def list(self, stream: str, topic: str) -> builtins.list[GroupView]:
        return [LocalView(g) for g in self.table.list(stream, topic)]

    def memberships(self, member_id: int) -> builtins.list[GroupView]:
        return [LocalView(g) for g in self.table.memberships(member_id)]

    async def refresh(self, group: GroupView) -> None:
        return None

    async def create(
        self, stream: str, topic: str, name: str, *, partitions: int, group_id: int | None = None
    ) -> GroupView:
        made = self.table.create(stream, topic, name, partitions=partitions, group_id=group_id)
        return LocalView(made)

    async def delete(self, stream: str, topic: str, group: int | str) -> None:
        self.table.delete(stream, topic, group)

    async def drop_topic(self, stream: str, topic: str) -> None:
        self.table.drop_topic(stream, topic)

    async def drop_stream(self, stream: str) -> None:
        self.table.drop_stream(stream)

    async def rename_topic(self, stream: str, topic: str, new_name: str) -> None:
        self.table.rename_topic(stream, topic, new_name)

    async def rename_stream(self, stream: str, new_name: str) -> None:
        self.table.rename_stream(stream, new_name)

    def join(self, stream: str, topic: str, group: int | str, member_id: int) -> GroupView:
        return LocalView(self.table.join(stream, topic, group, member_id))

    def leave(self, stream: str, topic: str, group: int | str, member_id: int) -> None:
        self.table.leave(stream, topic, group, member_id)

    def leave_all(self, member_id: int) -> None:
        self.table.leave_all(member_id)

    def resize(self, stream: str, topic: str, partitions: int) -> None:
        self.table.resize(stream, topic, partitions)


__all__ = ["DefinitionView", "GroupView", "IggyGroups", "LocalGroups", "LocalView"]
