"""The router's dispatch: every canonical command class is bound to what executes it, or answered
``Unsupported``; results and failures are measured (over a real embedded store in a tmp dir)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, cast

import pytest
import trio
from prometheus_client import CollectorRegistry

import gateway.model as model
from gateway.authorization import Authorizer
from gateway.backends import Backend
from gateway.backends.embedded import EmbeddedBackend, open_embedded
from gateway.backends.kafka import KafkaBackend
from gateway.backends.rabbitmq_stream import RabbitStreamBackend
from gateway.coordination import GroupCoordinator, UserStore
from gateway.metrics import Metrics
from gateway.model import (
    COMMAND_NAMES,
    AddToTransaction,
    Append,
    AppendResult,
    Authenticate,
    AwaitData,
    BackendUnavailable,
    Command,
    CommitOffset,
    CommitTransactionOffsets,
    CreateTopic,
    DeleteGroup,
    DeleteRecords,
    DescribeGroup,
    EndTransaction,
    FetchOffset,
    GatewayError,
    Heartbeat,
    IllegalGeneration,
    InitProducer,
    InitTransaction,
    JoinGroup,
    LeaveGroup,
    ListGroups,
    Message,
    MessageBatch,
    PublisherSequence,
    Read,
    ReadResult,
    SyncGroup,
    Topic,
    TopicConfig,
    Unsupported,
)
from gateway.model.errors import Forbidden
from gateway.model.permissions import GlobalPermissions, Permissions
from gateway.router import RequestContext, Router

TOPIC = Topic("s", "t")
COMMAND_CLASSES: list[type[Command[Any]]] = [
    obj
    for name in model.__all__
    if isinstance(obj := getattr(model, name), type)
    and issubclass(obj, Command)
    and obj is not Command
]
# What goes to the coordinator and the user store rather than the backend, one instance each.
NOT_BACKEND: list[Command[Any]] = [
    JoinGroup(group="g", stream="s"),
    SyncGroup(group="g", stream="s", generation=1, member_id="m"),
    Heartbeat(group="g", stream="s", generation=1, member_id="m"),
    LeaveGroup(group="g", stream="s", member_ids=("m",)),
    DescribeGroup(group="g", stream="s"),
    ListGroups(),
    DeleteGroup(group="g", stream="s"),
    Authenticate(mechanism="PLAIN", username="u", secret=b"p"),
    InitProducer(),
]
# What only a backend whose broker deduplicates publishers answers (RabbitMQ's).
BROKER_ONLY: list[Command[Any]] = [
    PublisherSequence(topic=Topic("s", "t"), partition=0, publisher="ref"),
]
# What only some backends implement (a Protocol of their own, backends.base).
OPTIONAL: list[Command[Any]] = [
    DeleteRecords(topic=Topic("s", "t"), partition=0, offset=-1),
    AwaitData(targets=((Topic("s", "t"), 0, 0),), max_wait_ms=0),  # the router's own otherwise
    # Kafka transactions (backends.base.Transactions: the embedded store, a Kafka broker)
    InitTransaction(transactional_id="t", timeout_ms=60_000),
    AddToTransaction(transactional_id="t", producer_id=1, producer_epoch=0),
    CommitTransactionOffsets(
        transactional_id="t", producer_id=1, producer_epoch=0, group="g", stream="s", offsets=()
    ),
    EndTransaction(transactional_id="t", producer_id=1, producer_epoch=0, commit=True),
]
TRANSACTIONS = tuple(type(c) for c in OPTIONAL[2:])
GROUP_COMMANDS = [c for c in NOT_BACKEND if not isinstance(c, Authenticate | InitProducer)]


def router(
    backend: Backend, *, groups: bool = True, users: bool = True
) -> tuple[Router, CollectorRegistry]:
    registry = CollectorRegistry()
    r = Router(
        backend,
        Metrics(registry, backend=backend.name),
        coordinator=GroupCoordinator() if groups else None,
        users=UserStore() if users else None,
    )
    return r, registry


def commands_seen(registry: CollectorRegistry, command: str, error_type: str = "") -> float:
    labels = {
        "protocol": "kafka",
        "command": command,
        "wire_command": "w",
        "backend": "embedded",
        "outcome": "error" if error_type else "ok",
        "error_type": error_type,
    }
    value = registry.get_sample_value("streamgate_command_duration_seconds_count", labels)
    return value or 0.0


def test_the_command_classes_are_every_command() -> None:
    assert sorted(c.name for c in COMMAND_CLASSES) == sorted(COMMAND_NAMES)
    assert {type(c) for c in (*NOT_BACKEND, *BROKER_ONLY, *OPTIONAL)} == {
        c for c in COMMAND_CLASSES if not hasattr(Backend, c.name)
    }


def test_every_command_is_bound_with_a_coordinator_and_users(tmp_path: Path) -> None:
    r, _ = router(EmbeddedBackend(tmp_path))
    assert [c.name for c in COMMAND_CLASSES if not r.supports(c)] == ["publisher_sequence"]


async def test_without_coordinator_and_users_only_backend_commands_run(tmp_path: Path) -> None:
    backend = EmbeddedBackend(tmp_path)
    r, registry = router(backend, groups=False, users=False)
    for cls in COMMAND_CLASSES:
        # Producer ids: the gateway grants them when the backend does not.
        backend_or_gateway = hasattr(Backend, cls.name) or cls in (
            InitProducer, DeleteRecords, AwaitData, *TRANSACTIONS
        )  # fmt: skip
        assert r.supports(cls) == backend_or_gateway, cls.name
    for cmd in NOT_BACKEND[:-1]:
        with pytest.raises(Unsupported) as info:
            await r.execute(cmd, RequestContext("kafka", "w"))
        assert str(info.value) == f"{cmd.name} is not supported by the embedded backend"
        assert commands_seen(registry, cmd.name, "unsupported") == 1
        backend_errors = registry.get_sample_value(
            "streamgate_backend_request_duration_seconds_count",
            {"backend": "embedded", "command": cmd.name, "outcome": "error"},
        )
        assert backend_errors == 1


async def test_group_commands_need_a_coordinator(tmp_path: Path) -> None:
    # Users alone (a backend with native groups would leave the coordinator out) do not make
    # the gateway answer group membership.
    r, _ = router(EmbeddedBackend(tmp_path), groups=False, users=True)
    assert r.supports(Authenticate)
    for cmd in GROUP_COMMANDS:
        assert not r.supports(type(cmd))
        with pytest.raises(Unsupported, match=rf"^{cmd.name} is not supported"):
            await r.execute(cmd, RequestContext("kafka", "w"))
    r, _ = router(EmbeddedBackend(tmp_path), groups=True, users=False)
    result = await r.execute(ListGroups(), RequestContext("kafka", "w"))
    assert result.groups == ()
    with pytest.raises(Unsupported, match=r"^authenticate is not supported"):
        await r.execute(NOT_BACKEND[-2], RequestContext("kafka", "w"))


async def test_a_broker_that_runs_groups_and_grants_producer_ids_gets_them(
    tmp_path: Path,
) -> None:
    """The Kafka backend is where groups and producer ids are decided for every gateway in
    front of its broker: the router sends them there even with a coordinator at hand (neither
    runs here, so whichever the router picked shows in how the command fails)."""
    backend = KafkaBackend("kafka://127.0.0.1:1")
    r, _ = router(backend)
    ctx = RequestContext("kafka", "w")
    at_default = [
        dataclasses.replace(cast(Any, c), stream="default") if hasattr(c, "stream") else c
        for c in GROUP_COMMANDS
    ]
    for cmd in (*at_default, InitProducer()):
        with pytest.raises(BackendUnavailable, match="not running"):
            await r.execute(cmd, ctx)
    # The embedded store: the gateway's coordinator (not running: an internal error) and
    # producer ids of the gateway's own.
    r, _ = router(EmbeddedBackend(tmp_path))
    with pytest.raises(GatewayError, match="internal error in join_group"):
        await r.execute(JoinGroup(group="g", stream="s"), ctx)
    first = await r.execute(InitProducer(), ctx)
    second = await r.execute(InitProducer(), ctx)
    assert second.producer_id > first.producer_id >= 0 and first.producer_epoch == 0


async def test_append_read_round_trip_through_execute(tmp_path: Path) -> None:
    with trio.fail_after(10):
        async with open_embedded(tmp_path, fsync="never") as backend:
            r, registry = router(backend)
            ctx = RequestContext("kafka", "w")
            await r.execute(CreateTopic(topic=TOPIC, partitions=2, config=TopicConfig()), ctx)
            sent = [Message(value=b"v%d" % i, key=b"k", timestamp_us=1_000 + i) for i in range(3)]
            appended = await r.execute(
                Append(topic=TOPIC, partition=1, batch=MessageBatch(sent)), ctx
            )
            assert isinstance(appended, AppendResult)
            assert (appended.base_offset, appended.count) == (0, 3)
            read = await r.execute(Read(topic=TOPIC, partition=1, offset=1), ctx)
            assert isinstance(read, ReadResult)
            got = [m for b in read.batches for m in b.messages if m.offset >= 1]
            assert [(m.offset, m.value, m.key, m.timestamp_us) for m in got] == [
                (1, b"v1", b"k", 1_001),
                (2, b"v2", b"k", 1_002),
            ]
            assert commands_seen(registry, "append") == 1
            assert commands_seen(registry, "read") == 1
            seen_in = {"protocol": "kafka"}
            assert registry.get_sample_value("streamgate_messages_in_total", seen_in) == 3
            seen_out = registry.get_sample_value("streamgate_messages_out_total", seen_in)
            assert seen_out == read.count
            assert ctx.command_s > 0


async def test_commits_are_checked_against_the_group_then_stored(tmp_path: Path) -> None:
    with trio.fail_after(10):
        async with open_embedded(tmp_path, fsync="never") as backend:
            r, registry = router(backend)
            ctx = RequestContext("kafka", "w")
            await r.execute(CreateTopic(topic=TOPIC, partitions=1, config=TopicConfig()), ctx)
            stale = CommitOffset(group="g", topic=TOPIC, partition=0, offset=5, generation=3)
            with pytest.raises(IllegalGeneration):
                await r.execute(stale, ctx)
            assert commands_seen(registry, "commit_offset", IllegalGeneration.error_type) == 1
            await r.execute(CommitOffset(group="g", topic=TOPIC, partition=0, offset=5), ctx)
            fetched = await r.execute(FetchOffset(group="g", topic=TOPIC, partition=0), ctx)
            assert fetched.offset == 5


def test_publisher_sequences_are_asked_of_a_broker_that_deduplicates(tmp_path: Path) -> None:
    """RabbitMQ's broker deduplicates publishers itself: the router sends it the query; on the
    embedded store the RabbitMQ listener keeps the sequence itself, and the router has none."""
    rabbit = RabbitStreamBackend.from_url("rabbitmq-stream://guest:guest@127.0.0.1:1/%2F")
    assert router(rabbit)[0].supports(PublisherSequence)
    assert not router(EmbeddedBackend(tmp_path))[0].supports(PublisherSequence)


async def test_internal_names_are_not_listed(tmp_path: Path) -> None:
    # Hidden from every client listing; reachable by name (another gateway chained in front
    # keeps its own internal topics here through this one's listeners, as Kafka's internal
    # topics are readable by name).
    internal = Topic("default", "__streamgate_iggy_groups")
    with trio.fail_after(10):
        async with open_embedded(tmp_path, fsync="never") as backend:
            r, _ = router(backend)
            client = RequestContext("kafka", "w")
            await backend.create_topic(CreateTopic(topic=internal, partitions=1))
            await r.execute(CreateTopic(topic=Topic("default", "t"), partitions=1), client)
            listed = await r.execute(model.ListTopics(stream="default"), client)
            assert [t.topic.name for t in listed.topics] == ["t"]
            streams = await r.execute(model.ListStreams(), client)
            assert [t.topic.name for s in streams.streams for t in s.topics] == ["t"]
            await r.execute(model.CreateStream(stream="__streamgate"), client)
            assert [s.name for s in (await r.execute(model.ListStreams(), client)).streams] == [
                "default"
            ]
            system = RequestContext("iggy", "g", system=True)  # the gateway's own view
            everything = await r.execute(model.ListStreams(), system)
            assert {s.name for s in everything.streams} == {"default", "__streamgate"}
            # a listener resolving a name asks for them too
            resolving = await r.execute(model.ListStreams(internal=True), client)
            assert {s.name for s in resolving.streams} == {"default", "__streamgate"}
            appended = await r.execute(
                Append(topic=internal, partition=0, batch=MessageBatch([Message(b"x")])), client
            )
            assert appended.base_offset == 0


async def test_a_request_authorizes_each_topic_once_a_subscription_every_read(
    tmp_path: Path,
) -> None:
    """A request's context keeps what it was allowed (a Fetch over a thousand partitions of a
    topic is checked once); a context without that set (a RabbitMQ subscription's deliveries)
    is checked on every command, so a revoked permission stops it at once."""
    readers = Permissions(global_permissions=GlobalPermissions(read_topics=True))
    with trio.fail_after(10):
        async with open_embedded(tmp_path, fsync="never") as backend:
            users = UserStore()
            await users.create_user("reader", "secret-pw", permissions=readers)
            authz = Authorizer(users, backend.list_streams, anonymous=Permissions.all())
            r = Router(backend, Metrics(CollectorRegistry()), users=users, authorizer=authz)
            await r.execute(
                CreateTopic(topic=TOPIC, partitions=2, config=TopicConfig()),
                RequestContext("kafka", "CreateTopics"),
            )
            request = RequestContext("kafka", "Fetch", user="reader", allowed=set())
            subscription = RequestContext("rabbitmq_stream", "deliver", user="reader")
            for ctx in (request, subscription):
                await r.execute(Read(topic=TOPIC, partition=0, offset=0), ctx)
            users.update_permissions("reader", Permissions())  # revoked
            # the request goes on with what it was allowed, for any partition of the topic
            await r.execute(Read(topic=TOPIC, partition=1, offset=0), request)
            assert request.allowed == {(Read, TOPIC)}
            with pytest.raises(Forbidden):
                await r.execute(Read(topic=TOPIC, partition=1, offset=0), subscription)
            with pytest.raises(Forbidden):  # the next request is checked afresh
                await r.execute(
                    Read(topic=TOPIC, partition=0, offset=0),
                    RequestContext("kafka", "Fetch", user="reader", allowed=set()),
                )
