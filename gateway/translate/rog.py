"""Rog frames <-> canonical commands (DESIGN.md §3: log = topic in stream ``default``,
partition byte = partition, group = consumer group, offsets advanced only by ack).

Pure functions: the listener runs the commands in the order these functions describe.
"""

from __future__ import annotations

from gateway.model import (
    DEFAULT_STREAM,
    Append,
    CommitOffset,
    CreateTopic,
    FetchOffset,
    GatewayError,
    InvalidPartitions,
    Message,
    MessageBatch,
    MessageTooLarge,
    Read,
    StorageError,
    Topic,
    TopicExists,
    UnknownPartition,
    UnknownStream,
    UnknownTopic,
)
from gateway.translate.lossy import Lossy, ignore_lossy
from protocols.rog import (
    AT_LEAST_ONE_PARTITION,
    NO_DATA_LEFT,
    UNABLE_TO_SEND_MESSAGE,
    Ack,
    CreateLog,
    Error,
    Fetch,
    FetchOk,
    Publish,
    log_already_exists,
    no_log_registered,
    partition_out_of_range,
)

PROTOCOL = "rog"
WIRE_COMMANDS = {CreateLog: "create_log", Publish: "publish", Fetch: "fetch", Ack: "ack"}


def topic_of(name: str) -> Topic:
    return Topic(DEFAULT_STREAM, name)


def create_topic(req: CreateLog) -> CreateTopic | Error:
    if req.partitions < 1:
        return Error(text=AT_LEAST_ONE_PARTITION)
    return CreateTopic(topic=topic_of(req.name), partitions=req.partitions)


def append(req: Publish) -> Append:
    # Rog's timestamp is the arrival time: timestamp 0 lets the backend stamp it on append.
    return Append(topic=topic_of(req.name), partition=req.partition,
                  batch=MessageBatch([Message(req.data)]), offset_needed=False)  # fmt: skip


def fetch_offset(req: Fetch | Ack) -> FetchOffset:
    return FetchOffset(group=req.group, topic=topic_of(req.name), partition=req.partition)


def read_one(req: Fetch | Ack, offset: int) -> Read:
    # Rog's fetch is "the message whose id equals the group's offset", and never waits.
    return Read(topic=topic_of(req.name), partition=req.partition, offset=offset,
                max_messages=1, max_wait_ms=0)  # fmt: skip


def commit_next(req: Ack, message_offset: int) -> CommitOffset:
    # The canonical store keeps the NEXT offset to read, which is what Rog's offset file holds.
    return CommitOffset(group=req.group, topic=topic_of(req.name), partition=req.partition,
                        offset=message_offset + 1)  # fmt: skip


def first_message(messages: tuple[Message, ...], lossy: Lossy = ignore_lossy) -> FetchOk | Error:
    """Rog carries the value only: a key, headers or an id are dropped and reported to
    ``lossy``. Its timestamp is not: Rog has no time at all, for any message."""
    if not messages:
        return Error(text=NO_DATA_LEFT)
    m = messages[0]
    if m.key is not None:
        lossy("key")
    if m.headers:
        lossy("headers")
    if m.id:
        lossy("id")
    return FetchOk(data=m.value)


def error_response(req: CreateLog | Publish | Fetch | Ack, exc: GatewayError) -> Error:
    """The exact texts of the real server (rog.md §4) where it has one."""
    if isinstance(exc, UnknownTopic | UnknownStream):
        return Error(text=no_log_registered(req.name))
    if isinstance(exc, UnknownPartition) and not isinstance(req, CreateLog):
        return Error(text=partition_out_of_range(req.partition, req.name, exc.partitions))
    if isinstance(exc, TopicExists):
        return Error(text=log_already_exists(req.name))
    if isinstance(exc, InvalidPartitions):
        return Error(text=AT_LEAST_ONE_PARTITION)
    if isinstance(exc, MessageTooLarge):
        return Error(text=exc.message)
    if isinstance(exc, StorageError):  # the real server has no such text: say what happened
        return Error(text=exc.message)
    if isinstance(req, Publish) and exc.retriable:
        return Error(text=UNABLE_TO_SEND_MESSAGE)
    return Error(text=exc.message)
