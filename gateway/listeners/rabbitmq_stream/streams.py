"""RabbitMQ Stream topology (rabbitmq-stream.md §5 Streams and topology): Create, Delete,
Metadata (the gateway's advertised address), MetadataUpdate when a stream in use goes away,
Route, Partitions, CreateSuperStream, DeleteSuperStream, StreamStats.

A stream is partition 0 of a one-partition topic; a super stream a topic with one partition per
partition stream (``rabbitmq_stream_catalog``). Create's arguments map onto the topic's settings:
``max-length-bytes`` -> retention bytes, ``max-age`` (``7D``, ``1h``...) -> retention time,
``stream-max-segment-size-bytes`` -> segment size; the others are kept as they came.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from gateway.listeners.rabbitmq_stream import consume
from gateway.listeners.rabbitmq_stream.catalog import super_stream_of, super_stream_settings
from gateway.listeners.rabbitmq_stream.session import (
    FailureReply,
    FrameHandler,
    Session,
    code_reply,
    fails,
    handles,
)
from gateway.model import (
    CreateTopic,
    DeleteTopic,
    DescribeTopic,
    InvalidRequest,
    Topic,
    TopicConfig,
    TopicExists,
)
from protocols import rabbitmq_stream as rs
from protocols.rabbitmq_stream import ResponseCode

NO_LEADER = 0xFFFF
_AGE = re.compile(r"^(\d+)([YMDhms])$")
_AGE_S = {"Y": 365 * 86400, "M": 30 * 86400, "D": 86400, "h": 3600, "m": 60, "s": 1}
_NAME = re.compile(r"^[^\x00-\x1f/]{1,255}$")


def _int_arg(key: str, value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise InvalidRequest(f"argument {key}={value!r} is not an integer") from None
    if n < 0:
        raise InvalidRequest(f"argument {key}={value!r} is negative")
    return n


def topic_config(
    arguments: Iterable[tuple[str, str]], extra: dict[str, str] | None = None
) -> TopicConfig:
    """Create's arguments as topic settings; a bad value is PRECONDITION_FAILED (0x11)."""
    retention_ms = retention_bytes = segment_bytes = None
    kept = dict(extra or {})
    for key, value in arguments:
        if key == "max-length-bytes":
            retention_bytes = _int_arg(key, value)
        elif key == "max-age":
            m = _AGE.match(value)
            if m is None:
                raise InvalidRequest(f"max-age {value!r} is not <n>[YMDhms]")
            retention_ms = int(m.group(1)) * _AGE_S[m.group(2)] * 1000
        elif key == "stream-max-segment-size-bytes":
            segment_bytes = _int_arg(key, value)
        else:
            kept[f"rabbitmq.{key}"] = value
    return TopicConfig(
        retention_ms=retention_ms,
        retention_bytes=retention_bytes,
        segment_bytes=segment_bytes,
        extra=kept,
    )


def _check_name(name: str) -> None:
    if not _NAME.match(name):
        raise InvalidRequest(f"{name!r} is not a valid stream name")


async def _create_topic(s: Session, name: str, partitions: int, config: TopicConfig) -> None:
    try:
        await s.router.execute(
            CreateTopic(topic=Topic(s.stream, name), partitions=partitions, config=config,
                        create_stream=False),
            s.ctx,
        )  # fmt: skip
    finally:
        s.catalog.invalidate()


async def create(s: Session, f: rs.Create) -> rs.Frame:
    _check_name(f.stream)
    s.require("manage_topics")
    config = topic_config(f.arguments)
    if await s.catalog.taken(s.stream, f.stream, s.ctx):
        raise TopicExists(f"stream {f.stream!r} already exists")
    await _create_topic(s, f.stream, 1, config)
    return rs.CreateResponse(correlation_id=f.correlation_id, code=ResponseCode.OK)


async def delete(s: Session, f: rs.Delete) -> rs.Frame:
    target = await s.catalog.target(s.stream, f.stream, s.ctx)
    s.require("manage_topics", target.info.id)
    if super_stream_of(target.info) is not None:
        raise InvalidRequest(f"{f.stream!r} is a partition of super stream "
                             f"{target.topic.name!r}: delete the super stream")  # fmt: skip
    try:
        await s.router.execute(DeleteTopic(topic=target.topic), s.ctx)
    finally:
        s.catalog.invalidate()
    notify_deleted(s, s.stream, (f.stream,))
    return rs.DeleteResponse(correlation_id=f.correlation_id, code=ResponseCode.OK)


def notify_deleted(s: Session, stream: str, names: Iterable[str]) -> None:
    """MetadataUpdate to every connection of the virtual host that publishes to or consumes
    from one of ``names`` (its publishers and subscriptions there end)."""
    for other in list(s.service.sessions):
        if other.stream != stream:
            continue
        for name in names:
            if any(p.target.name == name for p in other.publishers.values()) or any(
                x.target.name == name for x in other.subscriptions.values()
            ):
                other.spawn(other.stream_gone, name)


async def metadata(s: Session, f: rs.Metadata) -> rs.Frame:
    found: list[rs.StreamMetadata] = []
    for name in f.streams:
        target = await s.catalog.find(s.stream, name, s.ctx)
        if target is None:
            found.append(rs.StreamMetadata(stream=name, code=ResponseCode.STREAM_DOES_NOT_EXIST,
                                           leader=NO_LEADER))  # fmt: skip
        else:
            found.append(rs.StreamMetadata(stream=name, code=ResponseCode.OK, leader=0))
    return rs.MetadataResponse(
        correlation_id=f.correlation_id,
        brokers=(rs.Broker(reference=0, host=s.host, port=s.port),),
        streams=tuple(found),
    )


async def route(s: Session, f: rs.Route) -> rs.Frame:
    ss = await s.catalog.super_stream(s.stream, f.super_stream, s.ctx)
    if ss is None:
        return rs.RouteResponse(correlation_id=f.correlation_id,
                                code=ResponseCode.STREAM_DOES_NOT_EXIST)  # fmt: skip
    return rs.RouteResponse(correlation_id=f.correlation_id, code=ResponseCode.OK,
                            streams=ss.route(f.routing_key))  # fmt: skip


async def partitions(s: Session, f: rs.Partitions) -> rs.Frame:
    ss = await s.catalog.super_stream(s.stream, f.super_stream, s.ctx)
    if ss is None:
        return rs.PartitionsResponse(correlation_id=f.correlation_id,
                                     code=ResponseCode.STREAM_DOES_NOT_EXIST)  # fmt: skip
    return rs.PartitionsResponse(correlation_id=f.correlation_id, code=ResponseCode.OK,
                                 streams=ss.partitions)  # fmt: skip


async def create_super_stream(s: Session, f: rs.CreateSuperStream) -> rs.Frame:
    names = (f.name, *f.partitions)
    for name in names:
        _check_name(name)
    if not f.partitions or len(f.partitions) != len(f.binding_keys):
        raise InvalidRequest("a super stream needs partitions, one binding key each")
    if len(set(names)) != len(names):
        raise InvalidRequest("the super stream and partition names must differ")
    s.require("manage_topics")
    config = topic_config(f.arguments, super_stream_settings(f.partitions, f.binding_keys))
    for name in names:
        if await s.catalog.taken(s.stream, name, s.ctx):
            raise TopicExists(f"stream {name!r} already exists")
    await _create_topic(s, f.name, len(f.partitions), config)
    return rs.CreateSuperStreamResponse(correlation_id=f.correlation_id, code=ResponseCode.OK)


async def delete_super_stream(s: Session, f: rs.DeleteSuperStream) -> rs.Frame:
    ss = await s.catalog.super_stream(s.stream, f.name, s.ctx)
    if ss is None:
        return rs.DeleteSuperStreamResponse(correlation_id=f.correlation_id,
                                            code=ResponseCode.STREAM_DOES_NOT_EXIST)  # fmt: skip
    s.require("manage_topics", ss.info.id)
    try:
        await s.router.execute(DeleteTopic(topic=ss.info.topic), s.ctx)
    finally:
        s.catalog.invalidate()
    notify_deleted(s, s.stream, ss.partitions)
    return rs.DeleteSuperStreamResponse(correlation_id=f.correlation_id, code=ResponseCode.OK)


async def stream_stats(s: Session, f: rs.StreamStats) -> rs.Frame:
    """Chunk ids are offsets of a chunk's first record: the stored batch holding the last
    record starts the last chunk (-1 when the stream is empty, as on RabbitMQ)."""
    target = await s.catalog.target(s.stream, f.stream, s.ctx)
    s.require("read_topics", target.info.id)
    info = (await s.router.execute(DescribeTopic(topic=target.topic), s.ctx)).info
    p = info.partitions[target.partition]
    first = last = -1
    if p.next_offset > p.log_start_offset:
        first = p.log_start_offset
        found = await consume.last_chunk(s, target)
        last = -1 if found is None else found
    return rs.StreamStatsResponse(
        correlation_id=f.correlation_id,
        code=ResponseCode.OK,
        stats=(("first_chunk_id", first), ("committed_chunk_id", last), ("last_chunk_id", last)),
    )


HANDLERS: dict[type[rs.Frame], FrameHandler[rs.Frame]] = dict(
    [
        handles(rs.Create, create),
        handles(rs.Delete, delete),
        handles(rs.Metadata, metadata),
        handles(rs.Route, route),
        handles(rs.Partitions, partitions),
        handles(rs.CreateSuperStream, create_super_stream),
        handles(rs.DeleteSuperStream, delete_super_stream),
        handles(rs.StreamStats, stream_stats),
    ]
)

FAILURES: dict[type[rs.Frame], FailureReply[rs.Frame]] = dict(
    [
        fails(rs.Create, code_reply(rs.CreateResponse)),
        fails(rs.Delete, code_reply(rs.DeleteResponse)),
        fails(rs.Route, code_reply(rs.RouteResponse)),
        fails(rs.Partitions, code_reply(rs.PartitionsResponse)),
        fails(rs.CreateSuperStream, code_reply(rs.CreateSuperStreamResponse)),
        fails(rs.DeleteSuperStream, code_reply(rs.DeleteSuperStreamResponse)),
        fails(rs.StreamStats, code_reply(rs.StreamStatsResponse)),
        fails(
            rs.Metadata,
            lambda f, code: rs.MetadataResponse(
                correlation_id=f.correlation_id,
                streams=tuple(
                    rs.StreamMetadata(stream=n, code=code, leader=NO_LEADER) for n in f.streams
                ),
            ),
        ),
    ]
)

__all__ = ["FAILURES", "HANDLERS", "notify_deleted", "topic_config"]
