"""Single active consumer (rabbitmq-stream.md §5 ConsumerUpdate): the subscriptions that share a
consumer name on one partition stream form a group, and one of them at a time receives messages.

On a plain stream the oldest member is active; when it leaves (Unsubscribe, connection lost) the
next one is activated. Among the consumers of a super stream (Subscribe property ``super-stream``)
partition i goes to member ``i mod n``, so the partitions spread over the consumers and move when
one joins or leaves, as RabbitMQ does. Activation and deactivation are the subscription's business
(a ConsumerUpdate to its client, then delivery or not); this module only decides who.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

from gateway.model import Topic

GroupKey = tuple[Topic, int, str]  # topic, partition, consumer name


class Member(Protocol):
    @property
    def group_key(self) -> GroupKey: ...

    @property
    def in_super_stream(self) -> bool: ...

    @property
    def active(self) -> bool: ...


M = TypeVar("M", bound=Member)


class ActiveConsumers(Generic[M]):
    """``set_active(member, active)`` (de)activates a member; it must update ``member.active``."""

    def __init__(self, set_active: Callable[[M, bool], None]) -> None:
        self.groups: dict[GroupKey, list[M]] = {}
        self._set_active = set_active

    def join(self, member: M) -> None:
        self.groups.setdefault(member.group_key, []).append(member)
        self._settle(member.group_key)

    def leave(self, member: M) -> None:
        key = member.group_key
        members = self.groups.get(key, [])
        if member in members:
            members.remove(member)
            if not members:
                del self.groups[key]
            self._settle(key)

    def members(self, key: GroupKey) -> list[M]:
        return list(self.groups.get(key, ()))

    def _settle(self, key: GroupKey) -> None:
        members = self.groups.get(key)
        if not members:
            return
        partition = key[1]
        chosen = partition % len(members) if members[0].in_super_stream else 0
        # Deactivate first: two members are never active at once.
        for i, m in enumerate(members):
            if m.active and i != chosen:
                self._set_active(m, False)
        if not members[chosen].active:
            self._set_active(members[chosen], True)


__all__ = ["ActiveConsumers", "GroupKey", "Member"]
