"""The one authorization model (gateway/authorization.py) without a network: which permission
each canonical command needs, what a refusal names, anonymous access."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
from prometheus_client import CollectorRegistry

from gateway.authorization import (
    ANONYMOUS,
    Authorizer,
    anonymous_line,
    anonymous_permissions,
    anonymous_summary,
    requiring_authentication,
)
from gateway.backends.embedded import open_embedded
from gateway.config import Config
from gateway.coordination import UserStore
from gateway.metrics import Metrics
from gateway.model import (
    AddToTransaction,
    Append,
    ClusterForbidden,
    Command,
    CommitOffset,
    CommitTransactionOffsets,
    CreateStream,
    CreateTopic,
    DeleteStream,
    DeleteTopic,
    DescribeTopic,
    EndTransaction,
    GroupForbidden,
    Heartbeat,
    InitProducer,
    InitTransaction,
    JoinGroup,
    ListOffsets,
    ListStreams,
    ListStreamsResult,
    ListTopics,
    Message,
    MessageBatch,
    OffsetSpec,
    PartitionInfo,
    Read,
    StreamInfo,
    Topic,
    TopicForbidden,
    TopicInfo,
)
from gateway.model.permissions import (
    GlobalPermissions,
    Permissions,
    StreamPermissions,
    TopicPermissions,
)
from gateway.model.users import UserStatus
from gateway.router import RequestContext, Router

READABLE = Topic("default", "readable")
OTHER = Topic("default", "other")
SECRET = Topic("sec", "t")
DEFAULT_ID, SEC_ID, READABLE_ID, OTHER_ID, SECRET_ID = 1, 2, 1, 2, 1


def _info(topic: Topic, tid: int) -> TopicInfo:
    return TopicInfo(
        topic=topic,
        id=tid,
        partitions=(PartitionInfo(partition=0, log_start_offset=0, next_offset=0),),
    )


STREAMS = (
    StreamInfo(
        name="default",
        id=DEFAULT_ID,
        topics=(_info(READABLE, READABLE_ID), _info(OTHER, OTHER_ID)),
    ),
    StreamInfo(name="sec", id=SEC_ID, topics=(_info(SECRET, SECRET_ID),)),
)


def _on_topic(**flags: bool) -> Permissions:
    topics = {READABLE_ID: TopicPermissions(**flags)}
    return Permissions(streams={DEFAULT_ID: StreamPermissions(topics=topics)})


@pytest.fixture
async def authorizer() -> Authorizer:
    users = UserStore(path=None)
    for name, permissions in (
        ("reader", _on_topic(read_topic=True)),
        ("writer", _on_topic(send_messages=True)),
        ("manager", Permissions(streams={SEC_ID: StreamPermissions(manage_stream=True)})),
    ):
        await users.create_user(name, f"{name}-pw", permissions=permissions)

    async def list_streams(cmd: ListStreams) -> ListStreamsResult:
        return ListStreamsResult(streams=STREAMS)

    return Authorizer(
        users, list_streams, anonymous=anonymous_permissions("none", authentication_required=True)
    )


def _append(topic: Topic) -> Append:
    return Append(topic=topic, partition=0, batch=MessageBatch([Message(b"x")]))


def _read(topic: Topic) -> Read:
    return Read(topic=topic, partition=0, offset=0)


async def _refusal(a: Authorizer, cmd: Command[Any], user: str | None) -> type | None:
    try:
        await a.check(cmd, user)
    except (TopicForbidden, GroupForbidden, ClusterForbidden) as exc:
        return type(exc)
    return None


async def test_reader_may_read_and_describe_its_topic_only(authorizer: Authorizer) -> None:
    a = authorizer
    assert await _refusal(a, _read(READABLE), "reader") is None
    assert (
        await _refusal(
            a, ListOffsets(topic=READABLE, partition=0, spec=OffsetSpec.EARLIEST), "reader"
        )
        is None
    )
    assert await _refusal(a, DescribeTopic(topic=READABLE), "reader") is None
    commit = CommitOffset(group="g", topic=READABLE, partition=0, offset=1)
    assert await _refusal(a, commit, "reader") is None
    assert (
        await _refusal(a, JoinGroup(group="g", stream="default", topics=(READABLE,)), "reader")
        is None
    )
    assert (
        await _refusal(
            a, Heartbeat(group="g", stream="default", generation=1, member_id="m"), "reader"
        )
        is None
    )
    assert await _refusal(a, _append(READABLE), "reader") is TopicForbidden
    assert await _refusal(a, _read(OTHER), "reader") is TopicForbidden
    assert await _refusal(a, DescribeTopic(topic=OTHER), "reader") is TopicForbidden
    assert await _refusal(a, DeleteTopic(topic=READABLE), "reader") is TopicForbidden
    assert (
        await _refusal(a, CreateTopic(topic=Topic("default", "new"), partitions=1), "reader")
        is TopicForbidden
    )
    both = JoinGroup(group="g", stream="default", topics=(READABLE, OTHER))
    assert await _refusal(a, both, "reader") is GroupForbidden
    assert (
        await _refusal(a, Heartbeat(group="g", stream="sec", generation=1, member_id="m"), "reader")
        is GroupForbidden
    )
    assert await _refusal(a, InitProducer(), "reader") is ClusterForbidden
    assert await _refusal(a, CreateStream(stream="x"), "reader") is ClusterForbidden


async def test_writer_may_send_and_describe_but_not_read(authorizer: Authorizer) -> None:
    a = authorizer
    assert await _refusal(a, _append(READABLE), "writer") is None
    assert (
        await _refusal(a, DescribeTopic(topic=READABLE), "writer") is None
    )  # Kafka: WRITE implies DESCRIBE
    assert await _refusal(a, InitProducer(), "writer") is None
    assert await _refusal(a, _read(READABLE), "writer") is TopicForbidden
    assert await _refusal(a, _append(OTHER), "writer") is TopicForbidden
    assert (
        await _refusal(a, JoinGroup(group="g", stream="default", topics=(READABLE,)), "writer")
        is GroupForbidden
    )


async def test_manager_manages_its_stream_only(authorizer: Authorizer) -> None:
    a = authorizer
    assert (
        await _refusal(a, CreateTopic(topic=Topic("sec", "new"), partitions=1), "manager") is None
    )
    assert await _refusal(a, DeleteTopic(topic=SECRET), "manager") is None
    assert await _refusal(a, DeleteStream(stream="sec"), "manager") is None
    assert await _refusal(a, _append(SECRET), "manager") is None
    assert await _refusal(a, _read(SECRET), "manager") is None
    assert (
        await _refusal(a, CreateTopic(topic=Topic("default", "new"), partitions=1), "manager")
        is TopicForbidden
    )
    assert await _refusal(a, DeleteStream(stream="default"), "manager") is ClusterForbidden
    assert await _refusal(a, CreateStream(stream="another"), "manager") is ClusterForbidden
    assert await _refusal(a, _read(READABLE), "manager") is TopicForbidden


async def test_listings_are_not_refused_but_filtered_by_the_listener(
    authorizer: Authorizer,
) -> None:
    assert await _refusal(authorizer, ListStreams(), None) is None
    assert await _refusal(authorizer, ListTopics(stream="default"), None) is None


async def test_anonymous_and_deleted_users(authorizer: Authorizer) -> None:
    a = authorizer
    assert await _refusal(a, _append(READABLE), None) is TopicForbidden
    assert await a.permits(_read(READABLE), None) is False
    # a name the store does not hold (a certificate's principal, a deleted user): nothing
    assert await _refusal(a, _read(READABLE), "nobody-of-that-name") is TopicForbidden
    assert await _refusal(a, JoinGroup(group="g", stream="default"), "nobody") is GroupForbidden
    assert await _refusal(a, _read(READABLE), "reader") is None
    a.users.delete_user("reader")
    assert await _refusal(a, _read(READABLE), "reader") is TopicForbidden


async def test_a_stored_anonymous_user_grants_per_topic(authorizer: Authorizer) -> None:
    # auth.anonymous is all or nothing per stream; a stored user "anonymous" grants per topic
    a = authorizer
    assert await _refusal(a, _read(READABLE), None) is TopicForbidden
    await a.users.create_user(ANONYMOUS, "unused-pw", permissions=_on_topic(read_topic=True))
    assert await _refusal(a, _read(READABLE), None) is None
    assert await _refusal(a, _read(OTHER), None) is TopicForbidden
    assert await _refusal(a, _append(READABLE), None) is TopicForbidden
    line = anonymous_line("none", ("kafka (sasl)",), a.users.find_user(ANONYMOUS))
    assert line.startswith("anonymous access: the grants of the stored user 'anonymous'")
    a.users.update_user(ANONYMOUS, status=UserStatus.INACTIVE)
    assert await _refusal(a, _read(READABLE), None) is TopicForbidden
    a.users.delete_user(ANONYMOUS)  # auth.anonymous applies again
    assert await _refusal(a, _read(READABLE), None) is TopicForbidden
    assert anonymous_line("none", (), None) == anonymous_summary("none", ())


async def test_an_inactive_user_may_do_nothing(authorizer: Authorizer) -> None:
    a = authorizer
    a.users.update_user("writer", status=UserStatus.INACTIVE)
    assert await _refusal(a, _append(READABLE), "writer") is TopicForbidden
    assert await _refusal(a, InitProducer(), "writer") is ClusterForbidden


async def test_permission_changes_apply_at_once(authorizer: Authorizer) -> None:
    a = authorizer
    assert await _refusal(a, _append(READABLE), "reader") is TopicForbidden
    a.users.update_permissions("reader", _on_topic(send_messages=True))
    assert await _refusal(a, _append(READABLE), "reader") is None


def test_anonymous_levels() -> None:
    assert anonymous_permissions("auto", authentication_required=False) == Permissions.all()
    assert anonymous_permissions("auto", authentication_required=True) == Permissions()
    assert anonymous_permissions("none", authentication_required=False) == Permissions()
    read = anonymous_permissions("read", authentication_required=True).global_permissions
    assert (read.read_streams, read.send_messages, read.manage_streams) == (True, False, False)
    write = anonymous_permissions("write", authentication_required=True).global_permissions
    assert (write.read_streams, write.send_messages, write.manage_streams) == (True, True, False)
    manage = anonymous_permissions("manage", authentication_required=True).global_permissions
    assert (manage.manage_streams, manage.manage_users) == (True, False)
    with pytest.raises(ValueError, match=r"auth\.anonymous"):
        anonymous_permissions("root", authentication_required=False)


def test_what_requires_authentication_and_the_start_line() -> None:
    config = Config()
    assert requiring_authentication(config) == ()
    assert anonymous_summary("auto", ()).startswith("anonymous access: everything")
    config.listeners.kafka.sasl = True
    required = requiring_authentication(config)
    assert required == ("kafka (sasl)",)
    assert anonymous_summary("auto", required).startswith("anonymous access denied (kafka (sasl)")
    assert anonymous_summary("read", required) == (
        "anonymous access: read on every stream (auth.anonymous=read)"
    )
    config.listeners.kafka.enabled = False
    assert requiring_authentication(config) == ()


async def test_global_grants_need_no_resolution() -> None:
    users = UserStore(path=None)

    async def list_streams(cmd: ListStreams) -> ListStreamsResult:
        raise AssertionError("resolved names for a user whose global flags decide")

    a = Authorizer(users, list_streams, anonymous=Permissions.all())
    await a.check(_append(READABLE), None)
    await a.check(_read(SECRET), "iggy")  # the root
    await users.create_user(
        "global-poller",
        "g-pw",
        permissions=Permissions(global_permissions=GlobalPermissions(poll_messages=True)),
    )
    assert await _refusal(a, _read(SECRET), "global-poller") is None
    assert await _refusal(a, _append(SECRET), "global-poller") is TopicForbidden


async def test_the_router_refuses_before_running_and_counts(tmp_path: Path) -> None:
    registry = CollectorRegistry()
    with trio.fail_after(10):
        async with open_embedded(tmp_path, fsync="never") as backend:
            users = UserStore(path=None)
            r = Router(
                backend,
                Metrics(registry, backend=backend.name),
                users=users,
                authorizer=Authorizer(users, backend.list_streams, anonymous=Permissions()),
            )
            root = RequestContext("kafka", "w", user="iggy")
            await r.execute(CreateTopic(topic=READABLE, partitions=1), root)
            await r.execute(CreateTopic(topic=OTHER, partitions=1), root)
            (default,) = (await r.execute(ListStreams(), root)).streams
            (readable,) = (t.id for t in default.topics if t.topic == READABLE)
            topics = {readable: TopicPermissions(read_topic=True)}
            permissions = Permissions(streams={default.id: StreamPermissions(topics=topics)})
            await users.create_user("reader", "reader-pw", permissions=permissions)

            def denied(protocol: str, command: str) -> float:
                labels = {"protocol": protocol, "command": command}
                value = registry.get_sample_value("streamgate_authorization_denied_total", labels)
                assert value is not None  # created at start, so dashboards show 0
                return value

            assert denied("rog", "append") == 0
            anonymous = RequestContext("rog", "publish")
            with pytest.raises(TopicForbidden, match="'anonymous' may not send to"):
                await r.execute(_append(READABLE), anonymous)
            assert (denied("rog", "append"), anonymous.errors) == (1, 1)
            # the ids of the topics the root created are resolved afresh for the reader
            reader = RequestContext("kafka", "fetch", user="reader")
            assert (await r.execute(_read(READABLE), reader)).count == 0
            with pytest.raises(TopicForbidden):
                await r.execute(_read(OTHER), reader)
            with pytest.raises(TopicForbidden):
                await r.execute(DeleteTopic(topic=READABLE), reader)
            assert denied("kafka", "read") == 1 and denied("kafka", "delete_topic") == 1
            assert await r.permits(DescribeTopic(topic=READABLE), reader)
            assert not await r.permits(DescribeTopic(topic=OTHER), reader)
            assert denied("kafka", "describe_topic") == 0  # asking is not a refusal
            # what the gateway runs for itself is not a client's request
            system = RequestContext("iggy", "consumer_group", system=True)
            assert (await r.execute(_append(OTHER), system)).count == 1
            listed = await r.execute(ListTopics(stream="default"), root)
            assert sorted(t.topic.name for t in listed.topics) == ["other", "readable"]


async def test_a_deleted_topics_or_streams_grants_go_with_it(tmp_path: Path) -> None:
    """The embedded store gives a freed topic id to the next topic: a grant kept on the id of a
    deleted topic would pass on to a new, unrelated one."""
    with trio.fail_after(10):
        async with open_embedded(tmp_path, fsync="never") as backend:
            users = UserStore(path=None)
            r = Router(
                backend,
                Metrics(CollectorRegistry(), backend=backend.name),
                users=users,
                authorizer=Authorizer(
                    users, backend.list_streams, anonymous=Permissions(), ttl_s=0
                ),
            )
            root = RequestContext("kafka", "w", user="iggy")
            for topic in (OTHER, READABLE, SECRET):
                await r.execute(CreateTopic(topic=topic, partitions=1), root)
            ids = {
                t.topic: (s.id, t.id)
                for s in (await r.execute(ListStreams(), root)).streams
                for t in s.topics
            }
            sid, tid = ids[READABLE]
            sec_id, _ = ids[SECRET]
            grants = {tid: TopicPermissions(read_topic=True)}
            await users.create_user("reader", "reader-pw", permissions=Permissions(streams={
                sid: StreamPermissions(topics=grants),
                sec_id: StreamPermissions(read_stream=True),
            }))  # fmt: skip
            reader = RequestContext("kafka", "fetch", user="reader")
            assert (await r.execute(_read(READABLE), reader)).count == 0
            assert (await r.execute(_read(SECRET), reader)).count == 0

            await r.execute(DeleteTopic(topic=READABLE), root)
            assert users.get_user("reader").permissions.streams[sid].topics == {}
            newcomer = Topic("default", "newcomer")
            await r.execute(CreateTopic(topic=newcomer, partitions=1), root)
            (reused,) = (
                t.id
                for s in (await r.execute(ListStreams(), root)).streams
                for t in s.topics
                if t.topic == newcomer
            )
            assert reused == tid  # the freed id, given again
            with pytest.raises(TopicForbidden):
                await r.execute(_read(newcomer), reader)

            await r.execute(DeleteStream(stream=SECRET.stream), root)
            assert sec_id not in users.get_user("reader").permissions.streams
            await r.execute(CreateTopic(topic=SECRET, partitions=1), root)  # the stream again
            with pytest.raises(TopicForbidden):
                await r.execute(_read(SECRET), reader)


async def test_transaction_commands(authorizer: Authorizer) -> None:
    """Kafka transactions: a transactional id needs send permission somewhere (no
    TRANSACTIONAL_ID resource here); AddPartitionsToTxn send on each topic, AddOffsetsToTxn
    reading somewhere, TxnOffsetCommit reading each topic."""
    a = authorizer
    tid, pid, epoch = "t", 1, 0
    init = InitTransaction(transactional_id=tid, timeout_ms=60_000)
    end = EndTransaction(transactional_id=tid, producer_id=pid, producer_epoch=epoch, commit=True)

    def adding(topic: Topic | None = None, group: str | None = None) -> AddToTransaction:
        return AddToTransaction(
            transactional_id=tid, producer_id=pid, producer_epoch=epoch,
            partitions=((topic, 0),) if topic else (), groups=(group,) if group else (),
        )  # fmt: skip

    add, groups = adding(READABLE), adding(group="g")
    offsets = CommitTransactionOffsets(
        transactional_id=tid, producer_id=pid, producer_epoch=epoch, group="g",
        stream="default", offsets=((READABLE, 0, 5, "", -1),),
    )  # fmt: skip
    assert [await _refusal(a, c, "writer") for c in (init, end, add)] == [None, None, None]
    assert await _refusal(a, adding(OTHER), "writer") is TopicForbidden
    assert await _refusal(a, groups, "writer") is GroupForbidden  # reads nowhere
    assert await _refusal(a, offsets, "writer") is TopicForbidden
    assert [await _refusal(a, c, "reader") for c in (init, end)] == [ClusterForbidden] * 2
    assert await _refusal(a, add, "reader") is TopicForbidden
    assert [await _refusal(a, c, "reader") for c in (groups, offsets)] == [None, None]
