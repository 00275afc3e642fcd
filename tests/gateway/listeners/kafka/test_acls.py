"""CreateAcls / DescribeAcls / DeleteAcls with confluent-kafka's AdminClient and kafka-python's
KafkaAdminClient on a SASL gateway: an ACL created is enforced on a real client logging in as
that user (READ lets bob consume, not produce), reads back exactly, and once deleted bob is
refused again; what the allow-only model cannot hold exactly (DENY, PREFIXED, GROUP, DELETE
alone on a topic, ...) is refused with a reason; a user without manage_users gets
CLUSTER_AUTHORIZATION_FAILED; flags set outside Kafka show as their ACLs."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import trio
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
)
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer  # type: ignore[import-untyped]
from kafka import errors as kafka_errors
from kafka.admin import (  # type: ignore[import-untyped]
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    ResourcePattern,
    ResourcePatternFilter,
)
from kafka.admin import ResourceType as KpResourceType
from kafka.structs import TopicPartition as KpTopicPartition  # type: ignore[import-untyped]

from gateway.app import Running, users_path
from gateway.coordination import UserStore
from gateway.model import ListStreams
from gateway.model.permissions import (
    GlobalPermissions,
    Permissions,
    StreamPermissions,
    TopicPermissions,
)
from tests.conftest import gateway_config, start_gateway
from tests.helpers.kafka_roundtrip import subscribed, take

from .conftest import bootstrap, in_thread

PASSWORDS = {"alice": "alice-pw-1", "bob": "bob-pw-2", "iggy": "iggy"}
N = 3


class AclGateway:
    def __init__(self, running: Running, store: UserStore) -> None:
        self.running = running
        self.servers = bootstrap(running)
        self.store = store  # the gateway's user store, through its file (as `streamgate users`)

    async def namespace_ids(self, topic: str) -> tuple[int, int]:
        """(stream id, topic id) of a topic of the Kafka namespace, as Iggy numbers them."""
        assert self.running.backend is not None
        with trio.fail_after(10):
            streams = (await self.running.backend.list_streams(ListStreams())).streams
        stream = next(s for s in streams if s.name == "default")
        return stream.id, next(t.id for t in stream.topics if t.topic.name == topic)


@pytest.fixture
async def acl_gateway(tmp_path: Path, nursery: trio.Nursery) -> AsyncIterator[AclGateway]:
    users = ",".join(f"{n}:{p}" for n, p in PASSWORDS.items() if n != "iggy")
    config = gateway_config(
        tmp_path / "data", **{"listeners.kafka.sasl": True, "auth.users": users}
    )
    running = await start_gateway(nursery, config)
    path = users_path(config)
    assert path is not None
    store = UserStore(path=path)
    # Users from the configuration get every data permission: bob starts with none.
    store.update_permissions("bob", Permissions())
    yield AclGateway(running, store)


def confluent_creds(user: str) -> dict[str, Any]:
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN",
            "sasl.username": user, "sasl.password": PASSWORDS[user]}  # fmt: skip


def kp_creds(user: str) -> dict[str, Any]:
    return {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
            "sasl_plain_username": user, "sasl_plain_password": PASSWORDS[user]}  # fmt: skip


def admin_for(servers: str, user: str = "iggy") -> AdminClient:
    return AdminClient({"bootstrap.servers": servers, **confluent_creds(user)})


def make_topic(servers: str, topic: str) -> None:
    """The topic, with N records in it, made by the root user."""
    admin = admin_for(servers)
    admin.create_topics([NewTopic(topic, 1)], request_timeout=10)[topic].result(timeout=15)
    p = Producer({"bootstrap.servers": servers, **confluent_creds("iggy")})
    for i in range(N):
        p.produce(topic, b"v%d" % i)
    assert p.flush(15) == 0


def topic_acl(topic: str, op: AclOperation, user: str = "bob", **kw: Any) -> AclBinding:
    fields: dict[str, Any] = {
        "restype": ResourceType.TOPIC, "name": topic,
        "resource_pattern_type": ResourcePatternType.LITERAL, "principal": f"User:{user}",
        "host": "*", "operation": op, "permission_type": AclPermissionType.ALLOW,
    }  # fmt: skip
    fields.update(kw)
    return AclBinding(**fields)


def bob_filter(**kw: Any) -> AclBindingFilter:
    fields: dict[str, Any] = {
        "restype": ResourceType.ANY, "name": None,
        "resource_pattern_type": ResourcePatternType.ANY, "principal": "User:bob",
        "host": None, "operation": AclOperation.ANY, "permission_type": AclPermissionType.ANY,
    }  # fmt: skip
    fields.update(kw)
    return AclBindingFilter(**fields)


def create(servers: str, acls: list[AclBinding], user: str = "iggy") -> list[KafkaError | None]:
    """Each ACL's outcome: None (created) or the broker's error."""
    admin = admin_for(servers, user)  # referenced until the futures are done
    futures = admin.create_acls(acls, request_timeout=10)
    out: list[KafkaError | None] = []
    for acl in acls:
        try:
            futures[acl].result(timeout=15)
            out.append(None)
        except KafkaException as exc:
            out.append(exc.args[0])
    return out


def describe(servers: str, f: AclBindingFilter) -> set[AclBinding]:
    admin = admin_for(servers)
    return set(admin.describe_acls(f, request_timeout=10).result(timeout=15))


def delete(servers: str, f: AclBindingFilter) -> list[AclBinding]:
    admin = admin_for(servers)
    result: list[AclBinding] = admin.delete_acls([f], request_timeout=10)[f].result(timeout=15)
    return result


def delete_error(servers: str, f: AclBindingFilter) -> KafkaError:
    with pytest.raises(KafkaException) as info:
        delete(servers, f)
    error: KafkaError = info.value.args[0]
    return error


def confluent_reads(servers: str, topic: str) -> list[bytes]:
    """bob consumes the topic in a group (JoinGroup, offsets, Fetch all authorized)."""
    return take(subscribed(servers, topic, confluent_creds("bob")), N)


def confluent_read_error(servers: str, topic: str) -> int:
    """The error bob's group consumer gets subscribing to the topic."""
    c = Consumer({"bootstrap.servers": servers, "group.id": f"refused-{topic}",
                  "auto.offset.reset": "earliest", **confluent_creds("bob")})  # fmt: skip
    c.subscribe([topic])
    try:
        for _ in range(10):
            msg = c.poll(2)
            if msg is None:
                continue
            error = msg.error()
            assert error is not None, f"bob read {msg.value()!r}"
            return int(error.code())
        raise AssertionError("no error within 20 s")
    finally:
        c.close()


def confluent_write_error(servers: str, topic: str) -> int | None:
    reports: list[KafkaError | None] = []
    p = Producer({"bootstrap.servers": servers, "message.timeout.ms": 10_000,
                  **confluent_creds("bob")})  # fmt: skip
    p.produce(topic, b"from bob", on_delivery=lambda err, _msg: reports.append(err))
    p.flush(15)
    assert len(reports) == 1
    return None if reports[0] is None else int(reports[0].code())


async def test_confluent_create_enforce_describe_delete(acl_gateway: AclGateway) -> None:
    servers, topic = acl_gateway.servers, "acl-confluent"
    await in_thread(lambda: make_topic(servers, topic))
    denied = KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert await in_thread(lambda: confluent_read_error(servers, topic)) == denied

    read = topic_acl(topic, AclOperation.READ)
    assert await in_thread(lambda: create(servers, [read])) == [None]
    assert await in_thread(lambda: confluent_reads(servers, topic)) == [b"v0", b"v1", b"v2"]
    assert await in_thread(lambda: confluent_write_error(servers, topic)) == denied
    assert await in_thread(lambda: describe(servers, bob_filter())) == {read}
    # Kafka's filter semantics: MATCH by name finds it; another operation or DENY does not.
    match = bob_filter(name=topic, resource_pattern_type=ResourcePatternType.MATCH)
    assert await in_thread(lambda: describe(servers, match)) == {read}
    assert await in_thread(lambda: describe(servers, bob_filter(operation=AclOperation.WRITE))) == (
        set()
    )
    deny = bob_filter(permission_type=AclPermissionType.DENY)
    assert await in_thread(lambda: describe(servers, deny)) == set()

    assert await in_thread(lambda: delete(servers, bob_filter())) == [read]
    assert await in_thread(lambda: describe(servers, bob_filter())) == set()
    assert await in_thread(lambda: confluent_read_error(servers, topic)) == denied


async def test_confluent_refusals(acl_gateway: AclGateway) -> None:
    servers, topic = acl_gateway.servers, "acl-refusals"
    await in_thread(lambda: make_topic(servers, topic))
    refused = [
        topic_acl(topic, AclOperation.READ, permission_type=AclPermissionType.DENY),
        topic_acl(topic, AclOperation.READ, resource_pattern_type=ResourcePatternType.PREFIXED),
        topic_acl(topic, AclOperation.READ, restype=ResourceType.GROUP),
        topic_acl(topic, AclOperation.READ, user="nobody"),
        topic_acl(topic, AclOperation.READ, host="10.0.0.1"),
        topic_acl(topic, AclOperation.DESCRIBE),
        topic_acl(topic, AclOperation.DELETE),
        topic_acl(topic, AclOperation.ALL),
        topic_acl("no-such-topic", AclOperation.READ),
    ]
    errors = await in_thread(lambda: create(servers, refused))
    assert all(e is not None for e in errors), errors
    codes = [e.code() for e in errors if e is not None]
    assert codes[:-1] == [KafkaError.INVALID_REQUEST] * (len(refused) - 1)
    assert codes[-1] == KafkaError.UNKNOWN_TOPIC_OR_PART
    messages = [e.str() for e in errors if e is not None]
    assert "DENY" in messages[0] and "only allow" in messages[0]
    assert "PREFIXED" in messages[1]
    assert "group" in messages[2]
    assert "'nobody' does not exist" in messages[3]
    # nothing was stored by any of them
    assert await in_thread(lambda: describe(servers, bob_filter())) == set()


async def test_non_admin_gets_cluster_authorization_failed(acl_gateway: AclGateway) -> None:
    servers, topic = acl_gateway.servers, "acl-non-admin"
    await in_thread(lambda: make_topic(servers, topic))
    acl = topic_acl(topic, AclOperation.READ)
    assert await in_thread(lambda: create(servers, [acl])) == [None]
    write = topic_acl(topic, AclOperation.WRITE)
    errors = await in_thread(lambda: create(servers, [write], user="alice"))
    assert errors[0] is not None and errors[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED

    def alice_deletes() -> KafkaError:
        admin = admin_for(servers, "alice")
        f = bob_filter()
        future = admin.delete_acls([f], request_timeout=10)[f]
        with pytest.raises(KafkaException) as info:
            future.result(timeout=15)
        error: KafkaError = info.value.args[0]
        return error

    error = await in_thread(alice_deletes)
    assert error.code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED

    def alice_describes() -> list[AclBinding]:
        admin = admin_for(servers, "alice")
        found: list[AclBinding] = admin.describe_acls(bob_filter(), request_timeout=10).result(15)
        return found

    # The answer is CLUSTER_AUTHORIZATION_FAILED (kafka-python shows it, in its test below), but
    # librdkafka drops DescribeAcls' error code: alice just sees nothing.
    assert await in_thread(alice_describes) == []
    assert await in_thread(lambda: describe(servers, bob_filter())) == {acl}
    # CLUSTER ALTER (manage_users) granted to alice lets her do it.
    cluster_alter = AclBinding(ResourceType.BROKER, "kafka-cluster",
                               ResourcePatternType.LITERAL, "User:alice", "*",
                               AclOperation.ALTER, AclPermissionType.ALLOW)  # fmt: skip
    assert await in_thread(lambda: create(servers, [cluster_alter])) == [None]
    assert acl_gateway.store.get_user("alice").permissions.global_permissions.manage_users
    assert await in_thread(lambda: create(servers, [write], user="alice")) == [None]
    assert await in_thread(lambda: describe(servers, bob_filter())) == {acl, write}


async def test_flags_set_outside_kafka_show_as_acls(acl_gateway: AclGateway) -> None:
    servers, topic = acl_gateway.servers, "acl-flags"
    await in_thread(lambda: make_topic(servers, topic))
    store = acl_gateway.store
    sid, tid = await acl_gateway.namespace_ids(topic)
    # Iggy's manage_topic on the topic, and send_messages on the whole stream.
    store.update_permissions("bob", Permissions(streams={sid: StreamPermissions(
        send_messages=True, topics={tid: TopicPermissions(manage_topic=True)})}))  # fmt: skip
    five = [AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER,
            AclOperation.ALTER_CONFIGS]  # fmt: skip
    expected = {topic_acl(topic, op) for op in five} | {topic_acl("*", AclOperation.WRITE)}
    assert await in_thread(lambda: describe(servers, bob_filter())) == expected

    # DELETE alone cannot go: manage_topic grants the five together. Nothing changes.
    only_delete = bob_filter(name=topic, operation=AclOperation.DELETE)
    error = await in_thread(lambda: delete_error(servers, only_delete))
    assert error.code() == KafkaError.INVALID_REQUEST
    assert "nothing deleted" in error.str() and "delete them together" in error.str()
    assert await in_thread(lambda: describe(servers, bob_filter())) == expected
    # Nor a filter that takes '*' WRITE while global flags grant it: nothing of bob's goes.
    granted = replace(store.get_user("bob").permissions,
                      global_permissions=GlobalPermissions(send_messages=True))  # fmt: skip
    store.update_permissions("bob", granted)
    error = await in_thread(lambda: delete_error(servers, bob_filter()))
    assert error.code() == KafkaError.INVALID_REQUEST and "global" in error.str()
    assert await in_thread(lambda: describe(servers, bob_filter())) == expected
    revoked = replace(granted, global_permissions=GlobalPermissions())
    store.update_permissions("bob", revoked)
    # All of the topic's at once: the flag goes; '*' WRITE stays.
    on_topic = bob_filter(restype=ResourceType.TOPIC, name=topic)
    assert set(await in_thread(lambda: delete(servers, on_topic))) == expected - {
        topic_acl("*", AclOperation.WRITE)
    }
    assert store.get_user("bob").permissions.streams[sid].topics == {}
    # The five in one CreateAcls are manage_topic again; DELETE alone is refused.
    errors = await in_thread(lambda: create(servers, [topic_acl(topic, AclOperation.DELETE)]))
    assert errors[0] is not None and errors[0].code() == KafkaError.INVALID_REQUEST
    assert (
        await in_thread(lambda: create(servers, [topic_acl(topic, op) for op in five]))
        == [None] * 5
    )
    assert store.get_user("bob").permissions.streams[sid].topics[tid] == TopicPermissions(
        manage_topic=True
    )
    # ALL on '*' is the stream's manage_topics: bob may create topics.
    assert await in_thread(lambda: create(servers, [topic_acl("*", AclOperation.ALL)])) == [None]
    assert store.get_user("bob").permissions.streams[sid].manage_topics

    def bob_creates_a_topic() -> None:
        admin = admin_for(servers, "bob")
        admin.create_topics([NewTopic("by-bob", 1)], request_timeout=10)["by-bob"].result(15)

    await in_thread(bob_creates_a_topic)


async def test_kafka_python_create_enforce_describe_delete(acl_gateway: AclGateway) -> None:
    servers, topic = acl_gateway.servers, "acl-kafka-python"
    await in_thread(lambda: make_topic(servers, topic))
    acl = ACL(principal="User:bob", host="*", operation=ACLOperation.READ,
              permission_type=ACLPermissionType.ALLOW,
              resource_pattern=ResourcePattern(KpResourceType.TOPIC, topic))  # fmt: skip
    bob_any = ACLFilter(principal="User:bob", host=None, operation=ACLOperation.ANY,
                        permission_type=ACLPermissionType.ANY,
                        resource_pattern=ResourcePatternFilter(
                            KpResourceType.ANY, None, ACLResourcePatternType.ANY))  # fmt: skip

    def admin(call: Callable[[Any], Any], user: str = "iggy") -> Any:
        client = KafkaAdminClient(bootstrap_servers=servers, request_timeout_ms=10_000,
                                  **kp_creds(user))  # fmt: skip
        try:
            return call(client)
        finally:
            client.close()

    def reads() -> list[bytes]:
        c = KafkaConsumer(bootstrap_servers=servers, consumer_timeout_ms=10_000,
                          enable_auto_commit=False, **kp_creds("bob"))  # fmt: skip
        try:
            c.assign([KpTopicPartition(topic, 0)])
            c.seek(KpTopicPartition(topic, 0), 0)
            return [next(c).value for _ in range(N)]
        finally:
            c.close()

    def read_refused() -> None:
        c = KafkaConsumer(topic, bootstrap_servers=servers, group_id=f"refused-{topic}",
                          enable_auto_commit=False, **kp_creds("bob"))  # fmt: skip
        # The group join (READ on each subscribed topic) or the topic's metadata, whichever
        # comes first, is refused: either way bob does not read.
        refused = (kafka_errors.GroupAuthorizationFailedError,
                   kafka_errors.TopicAuthorizationFailedError)  # fmt: skip
        try:
            with pytest.raises(refused):
                c.poll(timeout_ms=10_000)
        finally:
            c.close()

    def write_refused() -> None:
        p = KafkaProducer(bootstrap_servers=servers, enable_idempotence=False, acks=1,
                          retries=0, **kp_creds("bob"))  # fmt: skip
        try:
            with pytest.raises(kafka_errors.TopicAuthorizationFailedError):
                p.send(topic, b"from bob").get(timeout=15)
        finally:
            p.close(timeout=5)

    await in_thread(read_refused)
    created = await in_thread(lambda: admin(lambda a: a.create_acls([acl])))
    assert created == {"succeeded": [acl], "failed": []}
    assert await in_thread(reads) == [b"v0", b"v1", b"v2"]
    await in_thread(write_refused)
    described, error = await in_thread(lambda: admin(lambda a: a.describe_acls(bob_any)))
    assert described == [acl] and error is kafka_errors.NoError

    deny = ACL(principal="User:bob", host="*", operation=ACLOperation.WRITE,
               permission_type=ACLPermissionType.DENY,
               resource_pattern=ResourcePattern(KpResourceType.TOPIC, topic))  # fmt: skip
    prefixed = ACL(principal="User:bob", host="*", operation=ACLOperation.WRITE,
                   permission_type=ACLPermissionType.ALLOW,
                   resource_pattern=ResourcePattern(KpResourceType.TOPIC, "acl-",
                                                    ACLResourcePatternType.PREFIXED))  # fmt: skip
    refused = await in_thread(lambda: admin(lambda a: a.create_acls([deny, prefixed])))
    assert refused == {"succeeded": [], "failed": [kafka_errors.InvalidRequestError] * 2}
    not_admin = await in_thread(lambda: admin(lambda a: a.create_acls([acl]), "alice"))
    assert not_admin["failed"] == [kafka_errors.ClusterAuthorizationFailedError]

    def alice_describes() -> None:
        with pytest.raises(kafka_errors.ClusterAuthorizationFailedError, match="CLUSTER DESCRIBE"):
            admin(lambda a: a.describe_acls(bob_any), "alice")

    await in_thread(alice_describes)
    alice_deletes = await in_thread(lambda: admin(lambda a: a.delete_acls([bob_any]), "alice"))
    assert alice_deletes == [(bob_any, [], kafka_errors.ClusterAuthorizationFailedError)]

    deleted = await in_thread(lambda: admin(lambda a: a.delete_acls([bob_any])))
    assert deleted == [(bob_any, [acl], kafka_errors.NoError)]
    described, _ = await in_thread(lambda: admin(lambda a: a.describe_acls(bob_any)))
    assert described == []
    await in_thread(read_refused)


async def test_cluster_describe_lets_a_user_describe_not_alter(acl_gateway: AclGateway) -> None:
    servers = acl_gateway.servers
    bob_any = ACLFilter(principal="User:bob", host=None, operation=ACLOperation.ANY,
                        permission_type=ACLPermissionType.ANY,
                        resource_pattern=ResourcePatternFilter(
                            KpResourceType.ANY, None, ACLResourcePatternType.ANY))  # fmt: skip
    cluster_describe = AclBinding(ResourceType.BROKER, "kafka-cluster",
                                  ResourcePatternType.LITERAL, "User:bob", "*",
                                  AclOperation.DESCRIBE, AclPermissionType.ALLOW)  # fmt: skip

    def bob_describes() -> Any:
        client = KafkaAdminClient(bootstrap_servers=servers, request_timeout_ms=10_000,
                                  **kp_creds("bob"))  # fmt: skip
        try:
            return client.describe_acls(bob_any)
        finally:
            client.close()

    def bob_refused() -> None:
        with pytest.raises(kafka_errors.ClusterAuthorizationFailedError):
            bob_describes()

    await in_thread(bob_refused)
    assert await in_thread(lambda: create(servers, [cluster_describe])) == [None]
    assert acl_gateway.store.get_user("bob").permissions.global_permissions.read_users
    acls, error = await in_thread(bob_describes)
    assert error is kafka_errors.NoError
    assert [(a.resource_pattern.resource_name, a.operation) for a in acls] == [
        ("kafka-cluster", ACLOperation.DESCRIBE)
    ]
    # DESCRIBE is not ALTER: bob still may not create ACLs.
    errors = await in_thread(lambda: create(servers, [cluster_describe], user="bob"))
    assert errors[0] is not None and errors[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
