"""Iggy consumer group definitions shared by every gateway on one backend (issue 14).

Which groups exist on which topic, with which ids and names, is replicated over a log on the
backend (``backends.topic_log.TopicLog`` on topic ``__streamgate/iggy-groups``, kept for ever):
every gateway appends its creates and deletes and applies everyone's in the log's order into an
``AssignedGroups`` used for its bookkeeping only (ids, names, renames; membership is the broker
group's business, ``listeners.iggy.groups_shared``). Two gateways creating one name at once:
the first record wins, the other is told GroupExists, as one Iggy server would tell it.

A record: ``{"op": "create"|"delete"|"drop-topic"|"drop-stream"|"rename-topic"|"rename-stream",
"rid": ..., ...}``. A malformed record is skipped with a warning; the outcome of each record this
gateway wrote (the group, or the error) is kept by rid until the writer took it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import structlog

from gateway.model import GatewayError

from .assigned_groups import AssignedGroup, AssignedGroups

log = structlog.get_logger("streamgate.coordination")

Dropped = Callable[[AssignedGroup], None]


class GroupDefinitions:
    """A ``backends.base.LogApplier``: the definitions, as the log's records built them."""

    def __init__(self, on_dropped: Dropped | None = None) -> None:
        self.table = AssignedGroups()
        self.next_offset = 0
        self.outcomes: dict[str, AssignedGroup | GatewayError | None] = {}
        self._on_dropped = on_dropped

    def watch(self, on_dropped: Dropped) -> None:
        """``on_dropped(group)`` for every group a record deletes (its members end)."""
        self._on_dropped = on_dropped

    def apply_entry(self, data: bytes, *, offset: int, timestamp_ms: int) -> str | None:
        try:
            record = json.loads(data)
            if not isinstance(record, dict):
                raise ValueError("not an object")
            rid = record.get("rid")
            outcome: AssignedGroup | GatewayError | None = self._apply(record)
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("iggy group record skipped", error=str(exc), offset=offset)
            return None
        except GatewayError as exc:
            outcome = exc
        if isinstance(rid, str):
            self.outcomes[rid] = outcome
            return rid
        return None

    def _apply(self, record: dict[str, Any]) -> AssignedGroup | None:
        op, t = record["op"], self.table
        if op == "sync":
            return None
        stream, topic = str(record["stream"]), str(record.get("topic", ""))
        if op == "create":
            group_id = record.get("id")
            made = t.create(
                stream, topic, str(record["name"]), partitions=int(record["partitions"]),
                group_id=None if group_id is None else int(group_id),
            )  # fmt: skip
            made.uid = str(record.get("rid", ""))
            return made
        if op == "delete":
            found = t.get(stream, topic, _identifier(record["group"]))
            self._dropped([found])
            return t.delete(stream, topic, found.id)
        if op == "drop-topic":
            self._dropped(t.list(stream, topic))
            t.drop_topic(stream, topic)
        elif op == "drop-stream":
            self._dropped([g for s, tp in t.topics() if s == stream for g in t.list(s, tp)])
            t.drop_stream(stream)
        elif op == "rename-topic":
            t.rename_topic(stream, topic, str(record["to"]))
        elif op == "rename-stream":
            t.rename_stream(stream, str(record["to"]))
        else:
            raise ValueError(f"unknown op {op!r}")
        return None

    def _dropped(self, groups: list[AssignedGroup]) -> None:
        if self._on_dropped is not None:
            for group in groups:
                self._on_dropped(group)

    def take(self, rid: str) -> AssignedGroup | None:
        """The outcome of a record this gateway wrote: its group, or its error raised."""
        outcome = self.outcomes.pop(rid, None)
        if isinstance(outcome, GatewayError):
            raise outcome
        return outcome


def _identifier(value: object) -> int | str:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TypeError(f"bad group identifier {value!r}")
    return value


__all__ = ["GroupDefinitions"]
