"""RabbitMQ Stream names and offsets <-> the canonical model (DESIGN.md §3, rabbitmq-stream.md
§4). Messages and chunks are in ``messages`` and ``chunks``; both directions of the response-code
table are in ``errors``, shared with the RabbitMQ backend and re-exported here for the listener.

Pure functions. A virtual host is a canonical stream (``/`` is ``default``); a RabbitMQ stream is
partition 0 of a topic of the same name, and the partition streams ``<name>-<i>`` of a super
stream are partition i of topic ``<name>``.

Consumer offsets: StoreOffset names the LAST processed offset; the canonical store keeps the NEXT
one to read: ``next = stored + 1`` (``committed_of_stored``, ``stored_of_committed``, shared with
the RabbitMQ backend in ``gateway.translate.rabbitmq_stream.messages`` and re-exported here).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Container
from typing import Final

from gateway.model import DEFAULT_STREAM, InvalidRequest, OffsetSpec
from gateway.translate.rabbitmq_stream.errors import RabbitCode, response_code
from gateway.translate.rabbitmq_stream.messages import committed_of_stored, stored_of_committed
from protocols.rabbitmq_stream import OffsetSpec as WireOffsetSpec
from protocols.rabbitmq_stream import OffsetType

PROTOCOL = "rabbitmq_stream"
ROOT_VHOST: Final = "/"


# --- names --------------------------------------------------------------------------------------


def stream_of_vhost(vhost: str) -> str:
    """The canonical stream of a virtual host (§3: ``/`` -> ``default``)."""
    return DEFAULT_STREAM if vhost == ROOT_VHOST else vhost


def vhost_of_stream(stream: str) -> str:
    return ROOT_VHOST if stream == DEFAULT_STREAM else stream


def partition_stream(topic: str, partition: int, *, super_stream: bool) -> str:
    """The RabbitMQ stream holding ``partition`` of ``topic``: ``<topic>-<i>`` in a super stream,
    the topic's own name for a plain stream (which only has partition 0)."""
    if super_stream:
        return f"{topic}-{partition}"
    if partition != 0:
        raise InvalidRequest(f"plain stream {topic!r} has no partition {partition}")
    return topic


def split_partition_stream(name: str) -> tuple[str, int] | None:
    """``<name>-<i>`` as (name, i), or None when the name does not have that shape."""
    base, sep, index = name.rpartition("-")
    if not sep or not base or not index.isdigit() or (len(index) > 1 and index[0] == "0"):
        return None
    return base, int(index)


def topic_of_stream(name: str, super_streams: Container[str] = ()) -> tuple[str, int]:
    """(topic, partition) of a RabbitMQ stream: a partition stream of one of ``super_streams``
    names its super stream's partition, any other stream is partition 0 of itself."""
    split = split_partition_stream(name)
    if split is not None and split[0] in super_streams:
        return split
    return name, 0


# --- offsets ------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class StartAt:
    """Where a Subscribe starts. ``spec`` None: at ``offset``; else ListOffsets(``spec``,
    ``timestamp_us``) and ``resolve`` its answer."""

    spec: OffsetSpec | None
    offset: int = 0
    timestamp_us: int = 0
    last: bool = False  # LAST: the last message (RabbitMQ sends its whole chunk)

    def resolve(self, listed: int | None, *, latest: int) -> int:
        """The first offset to read, given ListOffsets' answer and the high watermark (a
        timestamp after every message waits for the next one, as ``next`` does)."""
        if self.spec is None:
            return self.offset
        if listed is None:
            return latest
        return max(listed - 1, 0) if self.last else listed


def start_at(spec: WireOffsetSpec) -> StartAt:
    """§4 offset specs: first, last, next, offset n, timestamp (ms)."""
    kind, value = spec.type, spec.value
    if kind == OffsetType.FIRST:
        return StartAt(OffsetSpec.EARLIEST)
    if kind == OffsetType.LAST:
        return StartAt(OffsetSpec.LATEST, last=True)
    if kind == OffsetType.NEXT:
        return StartAt(OffsetSpec.LATEST)
    if kind == OffsetType.OFFSET and value is not None:
        return StartAt(None, offset=value)
    if kind == OffsetType.TIMESTAMP and value is not None:
        return StartAt(OffsetSpec.TIMESTAMP, timestamp_us=value * 1000)
    raise InvalidRequest(f"offset specification type {kind}")


__all__ = [
    "PROTOCOL",
    "ROOT_VHOST",
    "RabbitCode",
    "StartAt",
    "committed_of_stored",
    "partition_stream",
    "response_code",
    "split_partition_stream",
    "start_at",
    "stored_of_committed",
    "stream_of_vhost",
    "topic_of_stream",
    "vhost_of_stream",
]
