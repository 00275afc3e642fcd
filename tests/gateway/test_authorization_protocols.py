"""Issue 17's authorization matrix: one ``streamgate run`` with Kafka SASL on, users made through
its Iggy listener (apache-iggy 0.9.0), then each protocol's real client as a user with read on
one topic only, one with send on it only, and one managing one stream. Every allowed command
works, every other is refused with the protocol's own code and leaves the store as it was; the
two bypasses the issue found (an Iggy read-only user producing through Kafka SASL, an anonymous
Rog client publishing into the SASL-protected topic) are refused; the metric counts refusals.

Streams: ``default`` (Kafka's, RabbitMQ's "/" and Rog's namespace) with topics ``readable`` and
``other``; ``sec`` with topic ``t``. Users: ``reader`` (read on default/readable), ``writer``
(send on default/readable), ``manager`` (manage stream default), ``secreader`` (read stream sec:
the issue's Iggy user).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest
import trio
from apache_iggy import (
    Consumer,
    GlobalPermissions,
    IggyClient,
    Permissions,
    PollingStrategy,
    SendMessage,
    StreamPermissions,
    TcpConfig,
    TcpReconnectionConfig,
    TopicPermissions,
    UserStatus,
)
from confluent_kafka import Consumer as KafkaConsumer
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from rstream import Producer as RabbitProducer
from rstream import RawMessage
from rstream.exceptions import AccessRefused, PublisherDoesNotExist, ServerError

from protocols.rog import Error, FetchOk, Ok
from tests.helpers.gateways import Gateway, running_gateway
from tests.helpers.rog_client import RogClient

T = TypeVar("T")
LIMIT_S = 90.0
QUICK = TcpReconnectionConfig(interval=timedelta(milliseconds=50), reestablish_after=timedelta(0))
SEEDS = [b"seed-0", b"seed-1", b"seed-2"]
OTHER_SEEDS = [b"other-0"]
PASSWORDS = {"reader": "reader-pw", "writer": "writer-pw", "manager": "manager-pw",
             "secreader": "secreader-pw", "iggy": "iggy"}  # fmt: skip
TOPIC_DENIED = KafkaError.TOPIC_AUTHORIZATION_FAILED  # 29
GROUP_DENIED = KafkaError.GROUP_AUTHORIZATION_FAILED  # 30


async def in_thread(fn: Callable[[], T], *, limit_s: float = 45) -> T:
    with trio.fail_after(limit_s):
        return await trio.to_thread.run_sync(fn, abandon_on_cancel=True)


def run_async(scenario: Callable[[], Awaitable[T]], limit_s: float = 30) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(scenario(), limit_s)

    return asyncio.run(bounded())


async def _iggy(gateway: Gateway, user: str) -> IggyClient:
    client = IggyClient(TcpConfig(server_address=gateway.addresses["iggy"], reconnection=QUICK))
    await client.connect()
    await client.login_user(user, PASSWORDS[user])
    return client


def _setup(gateway: Gateway) -> None:
    """As root, through Iggy: the streams, topics, seed messages and users."""

    async def scenario() -> None:
        root = await _iggy(gateway, "iggy")
        await root.create_stream("default")
        await root.create_topic("default", "readable", 1)
        await root.create_topic("default", "other", 1)
        await root.create_stream("sec")
        await root.create_topic("sec", "t", 1)
        await root.send_messages("default", "readable", 0, [SendMessage(s) for s in SEEDS])
        await root.send_messages("default", "other", 0, [SendMessage(s) for s in OTHER_SEEDS])
        default = await root.get_stream("default")
        assert default is not None
        readable = next(t.id for t in default.topics if t.name == "readable")
        sec = await root.get_stream("sec")
        assert sec is not None

        def on_readable(**flags: bool) -> Permissions:
            topics = {readable: TopicPermissions(**flags)}
            return Permissions(GlobalPermissions(), {default.id: StreamPermissions(topics=topics)})

        users = {
            "reader": on_readable(read_topic=True),
            "writer": on_readable(send_messages=True),
            "manager": Permissions(
                GlobalPermissions(), {default.id: StreamPermissions(manage_stream=True)}
            ),
            "secreader": Permissions(
                GlobalPermissions(), {sec.id: StreamPermissions(read_stream=True)}
            ),
        }
        for name, permissions in users.items():
            await root.create_user(name, PASSWORDS[name], UserStatus.Active, permissions)
        await root.ping()

    run_async(scenario)


@asynccontextmanager
async def secured(tmp_path: Path) -> AsyncIterator[Gateway]:
    with trio.fail_after(LIMIT_S):
        async with running_gateway(
            "embedded:./data", tmp_path, "a",
            "--set", "listeners.kafka.sasl=true",
            "--set", "groups.initial_rebalance_delay_ms=0",
        ) as gateway:  # fmt: skip
            await in_thread(lambda: _setup(gateway))
            yield gateway


# --- Kafka (confluent-kafka, SASL/PLAIN) ------------------------------------------------------


def _kafka(gateway: Gateway, user: str, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": gateway.kafka, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "PLAIN", "sasl.username": user,
            "sasl.password": PASSWORDS[user], **extra}  # fmt: skip


def produce(gateway: Gateway, user: str, topic: str, value: bytes) -> int:
    """The delivery report's error code (0 = stored)."""
    codes: list[int] = []
    p = Producer(_kafka(gateway, user, **{"message.timeout.ms": 8000, "retries": 0}))
    p.produce(
        topic, value, on_delivery=lambda err, msg: codes.append(0 if err is None else err.code())
    )
    p.flush(15)
    assert len(codes) == 1, codes
    return codes[0]


def _read(c: KafkaConsumer, *, polls: int, enough: int) -> list[bytes] | int:
    """What ``c`` reads (stopping at a quiet poll once ``enough`` came), or the error code of
    its first failure; closes ``c``."""
    got: list[bytes] = []
    try:
        for _ in range(polls):
            msg = c.poll(0.25)
            if msg is None:
                if len(got) >= enough:
                    break
                continue
            err, value = msg.error(), msg.value()
            if err is not None:
                return int(err.code())
            assert value is not None
            got.append(value)
    finally:
        c.close()
    return got


def fetch_all(gateway: Gateway, user: str, topic: str) -> list[bytes] | int:
    """Every message of partition 0 from the start, or the error code of the first failure."""
    c = KafkaConsumer(_kafka(gateway, user, **{"group.id": f"assign-{user}",
                                               "enable.auto.commit": False}))  # fmt: skip
    c.assign([TopicPartition(topic, 0, 0)])
    return _read(c, polls=40, enough=1)


def subscribe(gateway: Gateway, user: str, topic: str) -> list[bytes] | int:
    """Join a group on ``topic`` and read what there is, or the error code of the failure."""
    c = KafkaConsumer(_kafka(gateway, user, **{"group.id": f"group-{user}",
                                               "auto.offset.reset": "earliest",
                                               "enable.auto.commit": False}))  # fmt: skip
    c.subscribe([topic])
    return _read(c, polls=60, enough=len(SEEDS))


def admin_code(gateway: Gateway, user: str, op: str, topic: str) -> int:
    admin = AdminClient(_kafka(gateway, user))
    if op == "create":
        futures = admin.create_topics([NewTopic(topic, 1)], operation_timeout=10)
    else:
        futures = admin.delete_topics([topic], operation_timeout=10)
    try:
        futures[topic].result(15)
    except KafkaException as exc:
        return int(exc.args[0].code())
    return 0


def listed(gateway: Gateway, user: str) -> set[str]:
    admin = AdminClient(_kafka(gateway, user))
    return set(admin.list_topics(timeout=10).topics)


def groups_listed(gateway: Gateway, user: str) -> set[str]:
    """ListGroups as the user (an authorization refusal would raise here)."""
    admin = AdminClient(_kafka(gateway, user))
    result = admin.list_consumer_groups(request_timeout=10).result(15)
    assert not result.errors, result.errors
    return {g.group_id for g in result.valid}


def described(gateway: Gateway, user: str, topic: str) -> int:
    admin = AdminClient(_kafka(gateway, user))
    found = admin.list_topics(topic, timeout=10).topics[topic]
    return 0 if found.error is None else int(found.error.code())


def denied_total(gateway: Gateway, protocol: str, command: str) -> float:
    url = f"http://{gateway.addresses['admin']}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    wanted = f'streamgate_authorization_denied_total{{command="{command}",protocol="{protocol}"}}'
    for line in text.splitlines():
        if line.startswith(wanted):
            return float(line.split()[-1])
    raise AssertionError(f"{wanted} not in /metrics")


def denied_by_protocol(gateway: Gateway, protocol: str) -> float:
    """Every refusal counted for ``protocol``, the router's and the listener's own."""
    url = f"http://{gateway.addresses['admin']}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    return sum(
        float(line.split()[-1])
        for line in text.splitlines()
        if line.startswith("streamgate_authorization_denied_total{")
        and f'protocol="{protocol}"' in line
    )


async def test_kafka_matrix(tmp_path: Path) -> None:
    async with secured(tmp_path) as gw:

        def scenario() -> None:
            # reader: read on default/readable only
            assert fetch_all(gw, "reader", "readable") == SEEDS
            assert subscribe(gw, "reader", "readable") == SEEDS
            assert listed(gw, "reader") == {"readable"}
            assert described(gw, "reader", "other") == TOPIC_DENIED
            assert produce(gw, "reader", "readable", b"by-reader") == TOPIC_DENIED
            assert admin_code(gw, "reader", "create", "made-by-reader") == TOPIC_DENIED
            assert admin_code(gw, "reader", "delete", "readable") == TOPIC_DENIED
            # a topic it may not describe: librdkafka gets TOPIC_AUTHORIZATION_FAILED in the
            # Metadata answer and never fetches (it may not surface the error to poll())
            assert fetch_all(gw, "reader", "other") in (TOPIC_DENIED, [])
            # writer: send on default/readable only (WRITE implies DESCRIBE, as in Kafka)
            assert produce(gw, "writer", "readable", b"by-writer") == 0
            assert listed(gw, "writer") == {"readable"}
            assert fetch_all(gw, "writer", "readable") == TOPIC_DENIED
            assert subscribe(gw, "writer", "readable") == GROUP_DENIED
            assert produce(gw, "writer", "other", b"by-writer") == TOPIC_DENIED
            assert admin_code(gw, "writer", "delete", "readable") == TOPIC_DENIED
            # manager: manage on stream default: everything in it
            assert listed(gw, "manager") == {"readable", "other"}
            assert admin_code(gw, "manager", "create", "made-by-manager") == 0
            assert produce(gw, "manager", "made-by-manager", b"m") == 0
            assert fetch_all(gw, "manager", "made-by-manager") == [b"m"]
            assert admin_code(gw, "manager", "delete", "made-by-manager") == 0
            # the first bypass: an Iggy user with read on stream sec, through Kafka
            assert listed(gw, "secreader") == set()
            # ListGroups lists what the user may see, never refuses (as Kafka): a group is as
            # readable as its stream's topics
            assert "group-reader" in groups_listed(gw, "reader")
            assert groups_listed(gw, "secreader") == set()
            assert produce(gw, "secreader", "readable", b"injected") == TOPIC_DENIED
            assert produce(gw, "secreader", "auto-created", b"injected") == TOPIC_DENIED
            assert admin_code(gw, "secreader", "create", "made-by-secreader") == TOPIC_DENIED
            assert admin_code(gw, "secreader", "delete", "other") == TOPIC_DENIED
            # nothing a refused command did is in the store
            assert listed(gw, "iggy") == {"readable", "other"}
            assert fetch_all(gw, "iggy", "readable") == [*SEEDS, b"by-writer"]
            assert fetch_all(gw, "iggy", "other") == OTHER_SEEDS
            # refused Produce: reader's; writer's and secreader's stop at the Metadata before
            assert denied_total(gw, "kafka", "append") == 1
            assert denied_total(gw, "kafka", "describe_topic") >= 3
            assert denied_total(gw, "kafka", "create_topic") == 2
            assert denied_total(gw, "kafka", "delete_topic") == 3
            assert denied_total(gw, "kafka", "join_group") >= 1
            assert denied_total(gw, "kafka", "read") >= 1

        await in_thread(scenario, limit_s=LIMIT_S)


# --- Rog (no authentication: the anonymous user) -----------------------------------------------


async def test_anonymous_rog_is_refused_once_kafka_requires_sasl(tmp_path: Path) -> None:
    async with secured(tmp_path) as gw:
        assert "anonymous access denied (kafka (sasl) requires authentication)" in gw.log()
        host, port = gw.addresses["rog"].rsplit(":", 1)
        rog = RogClient(host, int(port))
        with trio.fail_after(20):
            published = await rog.publish("readable", 0, b"injected")
            fetched = await rog.fetch("readable", 0, "g")
            created = await rog.create_log("rog-made", 1)
        for reply in (published, fetched, created):
            assert isinstance(reply, Error) and "anonymous" in reply.text, reply
        assert await in_thread(lambda: fetch_all(gw, "iggy", "readable")) == SEEDS
        assert await in_thread(lambda: listed(gw, "iggy")) == {"readable", "other"}
        assert await in_thread(lambda: denied_total(gw, "rog", "append")) == 1
        assert await in_thread(lambda: denied_total(gw, "rog", "create_topic")) == 1


async def test_anonymous_rog_granted_write(tmp_path: Path) -> None:
    with trio.fail_after(LIMIT_S):
        async with running_gateway(
            "embedded:./data", tmp_path, "a",
            "--set", "listeners.kafka.sasl=true", "--set", "auth.anonymous=write",
        ) as gw:  # fmt: skip
            host, port = gw.addresses["rog"].rsplit(":", 1)
            rog = RogClient(host, int(port))
            assert "anonymous access: write" in gw.log()
            root_creates = await in_thread(lambda: admin_code(gw, "iggy", "create", "logs"))
            assert root_creates == 0
            assert isinstance(await rog.publish("logs", 0, b"hello"), Ok)
            assert await rog.fetch("logs", 0, "g") == FetchOk(data=b"hello")
            refused = await rog.create_log("rog-made", 1)
            assert isinstance(refused, Error) and "anonymous" in refused.text
            assert await in_thread(lambda: fetch_all(gw, "iggy", "logs")) == [b"hello"]


async def test_anonymous_granted_per_topic_by_name_as_a_stored_user(tmp_path: Path) -> None:
    # A stored user "anonymous" grants what auth.anonymous cannot: one topic, not every stream.
    # Granted with `streamgate users` by stream and topic name: on the data directory's users
    # file (names from its catalog), then through the running gateway's Iggy listener.
    async with secured(tmp_path) as gw:
        host, port = gw.addresses["rog"].rsplit(":", 1)
        rog = RogClient(host, int(port))
        (tmp_path / "anon.pw").write_text("anonymous-unused-pw\n")
        await cli_users("create", "anonymous", "--password-file", str(tmp_path / "anon.pw"),
                        cwd=tmp_path)  # fmt: skip
        out = await cli_users("grant", "anonymous", "read_topic", "--stream", "default",
                              "--topic", "readable", cwd=tmp_path)  # fmt: skip
        assert "stream:" in out and "=read_topic" in out, out
        with trio.fail_after(20):
            assert await rog.fetch("readable", 0, "g") == FetchOk(data=SEEDS[0])
            for reply in (
                await rog.fetch("other", 0, "g"),
                await rog.publish("readable", 0, b"injected"),
                await rog.create_log("rog-made", 1),
            ):
                assert isinstance(reply, Error) and "anonymous" in reply.text, reply
        url = f"iggy://iggy@{gw.addresses['iggy']}"
        await cli_users("grant", "anonymous", "send_messages", "--stream", "default",
                        "--topic", "readable", "--url", url, cwd=tmp_path,
                        env={"STREAMGATE_LOGIN_PASSWORD": "iggy"})  # fmt: skip
        with trio.fail_after(20):
            assert isinstance(await rog.publish("readable", 0, b"granted"), Ok)
        assert await in_thread(lambda: fetch_all(gw, "iggy", "readable")) == [*SEEDS, b"granted"]
        bad = await cli_users("grant", "anonymous", "read_topic", "--stream", "default",
                              "--topic", "nope", cwd=tmp_path, code=1)  # fmt: skip
        assert "no topic 'nope'" in bad


async def cli_users(*args: str, cwd: Path, env: dict[str, str] | None = None, code: int = 0) -> str:
    """``streamgate users ...``: stdout (stderr when ``code`` is not 0)."""
    argv = [sys.executable, "-m", "gateway.cli", "users", *args]
    clean = {k: v for k, v in os.environ.items() if not k.startswith("STREAMGATE_")}
    with trio.fail_after(30):
        done = await trio.run_process(
            argv, capture_stdout=True, capture_stderr=True, check=False, cwd=cwd,
            env={**clean, **(env or {})},
        )  # fmt: skip
    assert done.returncode == code, done.stderr.decode()
    return (done.stdout if code == 0 else done.stderr).decode()


# --- Iggy (apache-iggy 0.9.0) ------------------------------------------------------------------


async def test_iggy_matrix(tmp_path: Path) -> None:
    async with secured(tmp_path) as gw:

        async def scenario() -> None:
            reader, writer, manager = [
                await _iggy(gw, name) for name in ("reader", "writer", "manager")
            ]
            root = await _iggy(gw, "iggy")

            async def poll(client: IggyClient, stream: str, topic: str) -> list[bytes]:
                got = await client.poll_messages(
                    stream, topic, consumer=Consumer.Single("c"),
                    polling_strategy=PollingStrategy.Offset(0), count=100, auto_commit=False,
                    partition_id=0,
                )  # fmt: skip
                return [m.payload() for m in got]

            assert await poll(reader, "default", "readable") == SEEDS
            with pytest.raises(RuntimeError, match="Unauthorized"):
                await reader.send_messages("default", "readable", 0, [SendMessage("r")])
            with pytest.raises(RuntimeError, match="Unauthorized"):
                await poll(reader, "default", "other")
            await writer.send_messages("default", "readable", 0, [SendMessage("by-writer")])
            with pytest.raises(RuntimeError, match="Unauthorized"):
                await poll(writer, "default", "readable")
            with pytest.raises(RuntimeError, match="Unauthorized"):
                await writer.delete_topic("default", "readable")
            await manager.create_topic("default", "made-by-manager", 1)
            await manager.delete_topic("default", "made-by-manager")
            with pytest.raises(RuntimeError, match="Unauthorized"):
                await manager.create_topic("sec", "made-by-manager", 1)
            with pytest.raises(RuntimeError, match="Unauthorized"):
                await manager.delete_topic("sec", "t")
            assert await poll(root, "default", "readable") == [*SEEDS, b"by-writer"]
            sec = await root.get_stream("sec")
            assert sec is not None and [t.name for t in sec.topics] == ["t"]
            default = await root.get_stream("default")
            assert default is not None
            assert sorted(t.name for t in default.topics) == ["other", "readable"]
            for client in (reader, writer, manager, root):
                await client.ping()

        await in_thread(lambda: run_async(scenario, 40), limit_s=LIMIT_S)
        # Six refusals above, whichever checked them (the listener's own or the router).
        assert await in_thread(lambda: denied_by_protocol(gw, "iggy")) >= 6


# --- RabbitMQ Stream (rstream) -------------------------------------------------------------------


async def test_rabbitmq_stream_matrix(tmp_path: Path) -> None:
    async with secured(tmp_path) as gw:
        host, port = gw.addresses["rabbitmq_stream"].rsplit(":", 1)

        def rabbit(user: str) -> RabbitProducer:
            return RabbitProducer(host=host, port=int(port), username=user,
                                  password=PASSWORDS[user])  # fmt: skip

        async def refused_publish(user: str, stream: str) -> None:
            producer = rabbit(user)
            await producer.start()
            try:
                # rstream 1.1.1 then deletes the publisher it failed to declare, which the
                # server (rightly) answers PUBLISHER_DOES_NOT_EXIST: that error is raised, the
                # DeclarePublisher's ACCESS_REFUSED is its context
                with pytest.raises(ServerError) as info:
                    await producer.send_wait(stream, RawMessage(f"by-{user}".encode()))
                chain: list[type[BaseException]] = []
                exc: BaseException | None = info.value
                while exc is not None:
                    chain.append(type(exc))
                    exc = exc.__context__
                assert AccessRefused in chain, chain
            finally:
                with contextlib.suppress(PublisherDoesNotExist):
                    await producer.close()

        async def scenario() -> None:
            await refused_publish("reader", "readable")
            async with rabbit("reader") as reader:
                with pytest.raises(AccessRefused):
                    await reader.create_stream("made-by-reader")
            async with rabbit("writer") as writer:
                await writer.send_wait("readable", RawMessage(b"by-writer"))
                with pytest.raises(AccessRefused):
                    await writer.delete_stream("readable")
            await refused_publish("writer", "other")
            async with rabbit("manager") as manager:
                await manager.create_stream("made-by-manager")
                await manager.send_wait("made-by-manager", RawMessage(b"m"))
                await manager.delete_stream("made-by-manager")

        await in_thread(lambda: run_async(scenario, 40), limit_s=LIMIT_S)

        def stored() -> None:
            assert fetch_all(gw, "iggy", "readable") == [*SEEDS, b"by-writer"]
            assert fetch_all(gw, "iggy", "other") == OTHER_SEEDS
            assert listed(gw, "iggy") == {"readable", "other"}

        await in_thread(stored)
        # Four refusals above (two publishes, a create, a delete), all counted.
        assert await in_thread(lambda: denied_by_protocol(gw, "rabbitmq_stream")) >= 4
