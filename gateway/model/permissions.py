"""Iggy's user permissions: global flags, refined per stream and per topic, and the check.

The shape mirrors iggy_common's ``Permissions`` (``GlobalPermissions``, ``StreamPermissions``,
``TopicPermissions``). Streams and topics are keyed by their numeric Iggy ids, as the client sends
them in CreateUser/UpdatePermissions; the Iggy listener resolves names to ids before checking.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal, get_args

Action = Literal[
    "manage_servers",
    "read_servers",
    "manage_users",
    "read_users",
    "manage_streams",
    "read_streams",
    "manage_topics",
    "read_topics",
    "poll_messages",
    "send_messages",
]
ACTIONS: tuple[Action, ...] = get_args(Action)

# What each flag includes, as the Iggy SDK documents its permission fields; the inclusion is
# transitive (manage_streams -> manage_topics -> read_topics -> poll_messages).
_INCLUDES: dict[str, tuple[str, ...]] = {
    "manage_servers": ("read_servers",),
    "manage_users": ("read_users",),
    "manage_streams": ("read_streams", "manage_topics"),
    "read_streams": ("read_topics",),
    "manage_topics": ("read_topics", "send_messages"),
    "read_topics": ("poll_messages",),
}
# Stream- and topic-level flags speak of "the" stream or topic; map them onto the action names.
_STREAM_FLAG = {"manage_stream": "manage_streams", "read_stream": "read_streams"}
_TOPIC_FLAG = {"manage_topic": "manage_topics", "read_topic": "read_topics"}
_GLOBAL_ONLY = frozenset({"manage_servers", "read_servers", "manage_users", "read_users"})


@dataclass(frozen=True, slots=True, kw_only=True)
class GlobalPermissions:
    manage_servers: bool = False
    read_servers: bool = False
    manage_users: bool = False
    read_users: bool = False
    manage_streams: bool = False
    read_streams: bool = False
    manage_topics: bool = False
    read_topics: bool = False
    poll_messages: bool = False
    send_messages: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicPermissions:
    manage_topic: bool = False
    read_topic: bool = False
    poll_messages: bool = False
    send_messages: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamPermissions:
    manage_stream: bool = False
    read_stream: bool = False
    manage_topics: bool = False
    read_topics: bool = False
    poll_messages: bool = False
    send_messages: bool = False
    topics: Mapping[int, TopicPermissions] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class Permissions:
    global_permissions: GlobalPermissions = GlobalPermissions()
    streams: Mapping[int, StreamPermissions] = field(default_factory=dict)

    @classmethod
    def all(cls) -> Permissions:
        """Everything, as Iggy gives its root user."""
        return cls(global_permissions=GlobalPermissions(**dict.fromkeys(ACTIONS, True)))


def _closure(flags: Mapping[str, bool], rename: Mapping[str, str]) -> frozenset[str]:
    todo = [rename.get(name, name) for name, on in flags.items() if on is True]
    granted: set[str] = set()
    while todo:
        name = todo.pop()
        if name not in granted:
            granted.add(name)
            todo.extend(_INCLUDES.get(name, ()))
    return frozenset(granted)


_FLAG_NAMES: dict[type, tuple[str, ...]] = {}
# What a set of flags grants, by class and flag values: permissions are checked on every
# command (every partition of a fetch), and there are few distinct sets of flags.
_GRANTED: dict[tuple[type, tuple[Any, ...]], frozenset[str]] = {}
_RENAME: dict[type, Mapping[str, str]] = {
    GlobalPermissions: {}, StreamPermissions: _STREAM_FLAG, TopicPermissions: _TOPIC_FLAG,
}  # fmt: skip


def _flags(obj: Any) -> dict[str, bool]:
    return {f.name: getattr(obj, f.name) for f in fields(obj) if f.name != "topics"}


def _granted(obj: Any) -> frozenset[str]:
    cls = type(obj)
    names = _FLAG_NAMES.get(cls)
    if names is None:
        names = _FLAG_NAMES[cls] = tuple(f.name for f in fields(obj) if f.name != "topics")
    key = (cls, tuple([getattr(obj, n) for n in names]))
    found = _GRANTED.get(key)
    if found is None:
        if len(_GRANTED) > 4096:
            _GRANTED.clear()
        found = _GRANTED[key] = _closure(dict(zip(names, key[1], strict=True)), _RENAME[cls])
    return found


def grants(
    permissions: Permissions, action: Action, stream: int | None = None, topic: int | None = None
) -> bool:
    """Whether ``permissions`` allow ``action`` (on ``stream``/``topic`` when given).

    Levels only add: the global flags, else the stream's, else the topic's (Iggy: stream and
    topic permissions "extend the global permissions, they do not override them"). Stream-level
    flags can grant stream, topic and message actions on that stream only; topic-level flags only
    topic and message actions on that topic; server and user actions are global only.
    """
    if action in _granted(permissions.global_permissions):
        return True
    sp = permissions.streams.get(stream) if stream is not None else None
    if sp is None:
        return False
    if action in _granted(sp) and action not in _GLOBAL_ONLY:
        return True
    tp = sp.topics.get(topic) if topic is not None else None
    return tp is not None and action in _granted(tp)


def permissions_to_json(p: Permissions) -> dict[str, Any]:
    return {
        "global": _flags(p.global_permissions),
        "streams": {
            str(sid): {
                **_flags(sp),
                "topics": {str(tid): _flags(tp) for tid, tp in sorted(sp.topics.items())},
            }
            for sid, sp in sorted(p.streams.items())
        },
    }


def permissions_from_json(data: Mapping[str, Any]) -> Permissions:
    streams: dict[int, StreamPermissions] = {}
    for sid, sp in data.get("streams", {}).items():
        topics = {int(tid): TopicPermissions(**tp) for tid, tp in sp.get("topics", {}).items()}
        flags = {k: v for k, v in sp.items() if k != "topics"}
        streams[int(sid)] = StreamPermissions(**flags, topics=topics)
    return Permissions(global_permissions=GlobalPermissions(**data["global"]), streams=streams)


__all__ = [
    "ACTIONS",
    "Action",
    "GlobalPermissions",
    "Permissions",
    "StreamPermissions",
    "TopicPermissions",
    "grants",
    "permissions_from_json",
    "permissions_to_json",
]
