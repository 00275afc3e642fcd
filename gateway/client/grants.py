"""Grant and revoke on a permissions value, by Iggy's flag names, at one level: global, one
stream's, one topic's (gateway/model/permissions.py); and the one-line summary ``users list``
prints. Pure: what ``streamgate users grant|revoke`` computes before it stores the result."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Final

from gateway.client.session import ClientError
from gateway.model.permissions import (
    GlobalPermissions,
    Permissions,
    StreamPermissions,
    TopicPermissions,
)

GLOBAL_FLAGS: Final = tuple(f.name for f in dataclasses.fields(GlobalPermissions))
STREAM_FLAGS: Final = tuple(
    f.name for f in dataclasses.fields(StreamPermissions) if f.name != "topics"
)
TOPIC_FLAGS: Final = tuple(f.name for f in dataclasses.fields(TopicPermissions))
# The global action names said of one stream or topic.
_STREAM_ALIASES: Final = {"manage_streams": "manage_stream", "read_streams": "read_stream"}
_TOPIC_ALIASES: Final = {"manage_topics": "manage_topic", "read_topics": "read_topic"}


def _level_flags(stream: int | None, topic: int | None) -> tuple[tuple[str, ...], dict[str, str]]:
    if stream is None:
        if topic is not None:
            raise ClientError("--topic needs --stream (topic ids are per stream)")
        return GLOBAL_FLAGS, {}
    if topic is None:
        return STREAM_FLAGS, _STREAM_ALIASES
    return TOPIC_FLAGS, _TOPIC_ALIASES


def _flag_names(names: Sequence[str], stream: int | None, topic: int | None) -> list[str]:
    allowed, aliases = _level_flags(stream, topic)
    out: list[str] = []
    for name in names:
        if name == "all":
            out.extend(allowed)
            continue
        flag = aliases.get(name, name)
        if flag not in allowed:
            level = "global" if stream is None else "stream" if topic is None else "topic"
            raise ClientError(
                f"{name!r} is not a {level} permission; one of: all, {', '.join(allowed)}"
            )
        out.append(flag)
    return out


def changed(
    permissions: Permissions,
    names: Sequence[str],
    *,
    on: bool,
    stream: int | None = None,
    topic: int | None = None,
) -> Permissions:
    """``permissions`` with the flags ``names`` set to ``on`` at one level (global, a stream's,
    a topic's); a stream or topic left with nothing granted is dropped, as Iggy lists it."""
    values: dict[str, Any] = dict.fromkeys(_flag_names(names, stream, topic), on)
    if stream is None:
        return dataclasses.replace(
            permissions,
            global_permissions=dataclasses.replace(permissions.global_permissions, **values),
        )
    streams = dict(permissions.streams)
    sp = streams.get(stream, StreamPermissions())
    if topic is None:
        sp = dataclasses.replace(sp, **values)
    else:
        topics = dict(sp.topics)
        tp = dataclasses.replace(topics.get(topic, TopicPermissions()), **values)
        if tp == TopicPermissions():
            topics.pop(topic, None)
        else:
            topics[topic] = tp
        sp = dataclasses.replace(sp, topics=topics)
    if sp == StreamPermissions():
        streams.pop(stream, None)
    else:
        streams[stream] = sp
    return dataclasses.replace(permissions, streams=streams)


def _on(obj: Any, names: Sequence[str]) -> str:
    return ",".join(n for n in names if getattr(obj, n))


def describe(permissions: Permissions) -> str:
    """One line: ``global=a,b stream:1=c stream:1/topic:2=d``, or ``-`` for nothing."""
    parts = []
    if flags := _on(permissions.global_permissions, GLOBAL_FLAGS):
        parts.append(f"global={flags}")
    for sid, sp in sorted(permissions.streams.items()):
        if flags := _on(sp, STREAM_FLAGS):
            parts.append(f"stream:{sid}={flags}")
        for tid, tp in sorted(sp.topics.items()):
            if flags := _on(tp, TOPIC_FLAGS):
                parts.append(f"stream:{sid}/topic:{tid}={flags}")
    return " ".join(parts) or "-"


__all__ = ["GLOBAL_FLAGS", "STREAM_FLAGS", "TOPIC_FLAGS", "changed", "describe"]
