"""Iggy consumer groups (iggy.md §5.8): server-side groups, partitions assigned by the gateway.

Members are connections (their client ids). Partition p goes to member p mod n in join order and
is reassigned whenever a member joins, leaves or disconnects, or the topic's partition count
changes; SyncConsumerGroup tells a current client its share. Their committed offsets live in the
backend under the group's name. Where the groups are kept is the service's ``IggyGroups``: this
process's memory on the embedded log (a restarted gateway starts without them;
``consumer_group()`` recreates its group), the backend for every gateway on it otherwise
(``groups_shared``).
"""

from __future__ import annotations

from typing import Any

from gateway.listeners.iggy.catalog import ResolvedTopic
from gateway.listeners.iggy.group_store import GroupView
from gateway.listeners.iggy.session import CommandHandler, Session, handles
from gateway.model import NotFound, UnknownGroup
from gateway.translate.iggy.requests import IggyStatus
from protocols.iggy import Command, Status
from protocols.iggy import frames_groups as fg


async def _topic(s: Session, stream: Any, topic: Any) -> ResolvedTopic:
    await s.groups.settled(fresh=True)  # rare commands: they see other gateways' changes
    found = await s.catalog.topic(stream, topic, s.ctx, fresh=True)
    s.service.group_ids[(found.name.stream, found.name.name)] = (found.stream.id, found.topic.id)
    return found


def _sized(s: Session, found: ResolvedTopic) -> None:
    """Partitions added or removed through another protocol: the groups follow."""
    for group in s.groups.list(found.name.stream, found.name.name):
        if group.partitions != found.topic.partition_count:
            s.groups.resize(found.name.stream, found.name.name, found.topic.partition_count)
            return


def _details(s: Session, group: GroupView) -> fg.ConsumerGroupDetails:
    assignment = group.assignment()
    shift = s.partition_shift
    return fg.ConsumerGroupDetails(
        group=_summary(group),
        members=tuple(
            fg.ConsumerGroupMember(id=member, partitions=tuple(p + shift for p in parts))
            for member, parts in assignment.items()
        ),
    )


def _summary(group: GroupView) -> fg.ConsumerGroup:
    return fg.ConsumerGroup(
        id=group.id,
        partitions_count=group.partitions,
        members_count=len(group.members),
        name=group.name,
    )


def _kept_here(s: Session) -> None:
    if not s.service.settings.consumer_groups:
        raise IggyStatus(
            Status.FEATURE_UNAVAILABLE,
            "consumer groups are kept in each gateway process on the embedded log, and this "
            "one shares its port with other workers (--workers): run one process to use them",
        )


async def create_group(s: Session, cmd: fg.CreateConsumerGroup) -> fg.ConsumerGroupDetails:
    _kept_here(s)
    found = await _topic(s, cmd.stream_id, cmd.topic_id)
    s.require("read_topics", found.stream.id, found.topic.id)
    group = await s.groups.create(
        found.name.stream, found.name.name, cmd.name, partitions=found.topic.partition_count
    )
    return _details(s, group)


async def get_group(s: Session, cmd: fg.GetConsumerGroup) -> fg.ConsumerGroupDetails | None:
    try:
        found = await _topic(s, cmd.stream_id, cmd.topic_id)
        s.require("read_topics", found.stream.id, found.topic.id)
        _sized(s, found)
        group = s.groups.get(found.name.stream, found.name.name, cmd.group_id)
    except NotFound:
        return None  # §3.7: "not found" is an empty OK body
    await s.groups.refresh(group)
    return _details(s, group)


async def get_groups(s: Session, cmd: fg.GetConsumerGroups) -> fg.ConsumerGroups:
    found = await _topic(s, cmd.stream_id, cmd.topic_id)
    s.require("read_topics", found.stream.id, found.topic.id)
    _sized(s, found)
    groups = s.groups.list(found.name.stream, found.name.name)
    for group in groups:
        await s.groups.refresh(group)
    return fg.ConsumerGroups(groups=tuple(_summary(g) for g in groups))


async def delete_group(s: Session, cmd: fg.DeleteConsumerGroup) -> None:
    found = await _topic(s, cmd.stream_id, cmd.topic_id)
    s.require("read_topics", found.stream.id, found.topic.id)
    await s.groups.delete(found.name.stream, found.name.name, cmd.group_id)


async def join_group(s: Session, cmd: fg.JoinConsumerGroup) -> None:
    _kept_here(s)
    found = await _topic(s, cmd.stream_id, cmd.topic_id)
    s.require("poll_messages", found.stream.id, found.topic.id)
    _sized(s, found)
    s.groups.join(found.name.stream, found.name.name, cmd.group_id, s.client.client_id)


async def leave_group(s: Session, cmd: fg.LeaveConsumerGroup) -> None:
    found = await _topic(s, cmd.stream_id, cmd.topic_id)
    s.require("poll_messages", found.stream.id, found.topic.id)
    s.groups.leave(found.name.stream, found.name.name, cmd.group_id, s.client.client_id)


async def sync_group(s: Session, cmd: fg.SyncConsumerGroup) -> fg.ConsumerGroupAssignment | None:
    found = await _topic(s, cmd.stream_id, cmd.topic_id)
    s.require("poll_messages", found.stream.id, found.topic.id)
    _sized(s, found)
    try:
        group = s.groups.get(found.name.stream, found.name.name, cmd.group_id)
    except UnknownGroup:
        return None
    if not group.is_member(s.client.client_id):
        return None  # §5.8: an empty body means "not a member"; the client re-joins
    return fg.ConsumerGroupAssignment(
        generation=group.generation_of(s.client.client_id),
        partitions=group.partitions_of(s.client.client_id),
    )


HANDLERS: dict[type[Command], CommandHandler[Command]] = dict(
    [
        handles(fg.CreateConsumerGroup, create_group),
        handles(fg.GetConsumerGroup, get_group),
        handles(fg.GetConsumerGroups, get_groups),
        handles(fg.DeleteConsumerGroup, delete_group),
        handles(fg.JoinConsumerGroup, join_group),
        handles(fg.LeaveConsumerGroup, leave_group),
        handles(fg.SyncConsumerGroup, sync_group),
    ]
)

__all__ = ["HANDLERS"]
