"""Single active consumer (rabbitmq-stream.md §5 ConsumerUpdate): the subscriptions that share a
consumer name on one partition stream form a group, and one of them at a time receives messages.

On a plain stream the oldest member is active; when it leaves (Unsubscribe, connection lost) the
next one is activated. Among the consumers of a super stream (Subscribe property ``super-stream``)
partition i goes to member ``i mod n``, so the partitions spread over the consumers and move when
one joins or leaves, as RabbitMQ does. Activation and deactivation are the subscription's business
(a ConsumerUpdate to its client, then delivery or not); this module only decides who.
"""

from __future__ import annotations

from typing import Protocol

from gateway.model import Topic

GroupKey = tuple[Topic, int, str]  # topic, partition, consumer name


class Member(Protocol):
    @property
    def group_key(self) -> GroupKey: ...

    @property
    def in_super_stream(self) -> bool: ...

    @property
    def active(self) -> bool: ...

    def set_active(self, active: bool) -> None: ...


class ActiveConsumers:
    def __init__(self) -> None:
        self.groups: dict[GroupKey, list[Member]] = {}

    def join(self, member: Member) -> None:
        self.groups.setdefault(member.group_key, []).append(member)
        self._settle(member.group_key)

    def leave(self, member: Member) -> None:
        key = member.group_key
        members = self.groups.get(key, [])
        if member in members:
            members.remove(member)
            if not members:
                del self.groups[key]
            self._settle(key)

    def members(self, key: GroupKey) -> list[Member]:
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
                m.set_active(False)
        if not members[chosen].active:
            members[chosen].set_active(True)


__all__ = ["ActiveConsumers", "GroupKey", "Member"]
