"""Kafka metadata and admin APIs: Metadata, CreateTopics, DeleteTopics, CreatePartitions,
DescribeConfigs. Discovery answers always carry the gateway's own address (DESIGN.md §3)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from gateway.listeners.kafka.configs import config_type, topic_settings
from gateway.listeners.kafka.session import Session
from gateway.model import (
    CreatePartitions,
    CreateTopic,
    DeleteTopic,
    DescribeTopic,
    GatewayError,
    InvalidPartitions,
    InvalidRequest,
    ListTopics,
    NotFound,
    Topic,
    TopicExists,
    TopicForbidden,
    TopicInfo,
)
from gateway.translate.kafka import requests as tr
from protocols.kafka.framing import KafkaRequest

_TOPIC_RESOURCE = 2
_BROKER_RESOURCE = 4


def _partitions(session: Session, info: TopicInfo) -> list[dict[str, Any]]:
    node = session.settings.node_id
    return [
        {"error_code": ErrorCode.none, "partition_index": p.partition, "leader_id": node,
         "leader_epoch": 0, "replica_nodes": [node], "isr_nodes": [node], "offline_replicas": []}
        for p in info.partitions
    ]  # fmt: skip


def _topic_error(name: str, code: ErrorCode) -> dict[str, Any]:
    return {"error_code": code, "name": name, "is_internal": False, "partitions": []}


async def metadata(session: Session, req: KafkaRequest) -> Any:
    assert session.ctx is not None
    s = session.settings
    execute = session.router.execute
    stream = s.stream
    requested = req.body.topics
    topics: list[dict[str, Any]] = []
    if requested is None:  # null = every topic (v1+)
        try:
            infos = (await execute(ListTopics(stream=stream), session.ctx)).topics
        except NotFound:  # the listener's stream appears with its first topic
            infos = ()
        for info in sorted(infos, key=lambda i: i.topic.name):
            # Only what the user may describe, as a Kafka broker lists (DESCRIBE ACL); a topic
            # asked for by name is refused with TOPIC_AUTHORIZATION_FAILED instead (_describe).
            if not await session.router.permits(DescribeTopic(topic=info.topic), session.ctx):
                continue
            topics.append({"error_code": ErrorCode.none, "name": info.topic.name,
                           "is_internal": False,
                           "partitions": _partitions(session, info)})  # fmt: skip
    else:
        # Before v4 a broker with auto.create.topics.enable creates on any Metadata request.
        auto = s.auto_create_topics and getattr(req.body, "allow_auto_topic_creation", True)
        for t in requested:
            topics.append(await _describe(session, t.name, auto))
    node = s.node_id
    return session.respond(
        req,
        {
            "throttle_time": 0,
            "brokers": [{"node_id": node, "host": session.host, "port": session.port}],
            "cluster_id": s.cluster_id,
            "controller_id": node,
            "topics": topics,
        },
    )


async def _describe(session: Session, name: str, auto_create: bool) -> dict[str, Any]:
    assert session.ctx is not None
    execute = session.router.execute
    topic = Topic(session.settings.stream, name)
    try:
        tr.check_topic_name(name)
        info = (await execute(DescribeTopic(topic=topic), session.ctx)).info
    except tr.InvalidTopicName:
        return _topic_error(name, ErrorCode.invalid_topic_exception)
    except NotFound:
        if not auto_create:
            return _topic_error(name, ErrorCode.unknown_topic_or_partition)
        try:
            info = (
                await execute(
                    CreateTopic(topic=topic, partitions=session.settings.default_partitions),
                    session.ctx,
                )
            ).info
            session.conn.log.info("topic auto-created", topic=name)
        except TopicExists:  # created by someone else meanwhile
            info = (await execute(DescribeTopic(topic=topic), session.ctx)).info
        except GatewayError as exc:
            return _topic_error(name, tr.error_code(exc))
    except GatewayError as exc:
        return _topic_error(name, tr.error_code(exc))
    return {"error_code": ErrorCode.none, "name": name, "is_internal": False,
            "partitions": _partitions(session, info)}  # fmt: skip


async def create_topics(session: Session, req: KafkaRequest) -> Any:
    assert session.ctx is not None
    body = req.body
    validate_only = getattr(body, "validate_only", False)
    results = []
    for t in body.topics:
        code, message = ErrorCode.none, None
        try:
            tr.check_topic_name(t.name)
            partitions = t.num_partitions
            if partitions == -1:  # v4+: the broker's default
                partitions = session.settings.default_partitions
            if t.assignments:
                partitions = len(t.assignments)
            if partitions <= 0:
                raise InvalidPartitions(f"number of partitions must be positive, not {partitions}")
            try:
                config = topic_settings((c.name, c.value) for c in t.configs)
            except InvalidRequest as exc:
                code, message = ErrorCode.invalid_config, exc.message
                results.append({"name": t.name, "error_code": code, "error_message": message})
                continue
            topic = Topic(session.settings.stream, t.name)
            if validate_only:
                create = CreateTopic(topic=topic, partitions=partitions, config=config)
                if not await session.router.permits(create, session.ctx):
                    raise TopicForbidden(f"may not create topic {topic}")
                session.router.check_partitions(create)
                await _check_absent(session, topic)
            else:
                await session.router.execute(
                    CreateTopic(topic=topic, partitions=partitions, config=config), session.ctx
                )
        except tr.InvalidTopicName as exc:
            code, message = ErrorCode.invalid_topic_exception, exc.message
        except GatewayError as exc:
            code, message = tr.error_code(exc), exc.message
        results.append({"name": t.name, "error_code": code, "error_message": message})
    return session.respond(req, {"throttle_time": 0, "topics": results})


async def _check_absent(session: Session, topic: Topic) -> None:
    assert session.ctx is not None
    try:
        await session.router.execute(DescribeTopic(topic=topic), session.ctx)
    except NotFound:
        return
    raise TopicExists(f"topic {topic.name!r} already exists")


async def delete_topics(session: Session, req: KafkaRequest) -> Any:
    assert session.ctx is not None
    results = []
    for name in req.body.topic_names:
        code = ErrorCode.none
        try:
            await session.router.execute(
                DeleteTopic(topic=Topic(session.settings.stream, name)), session.ctx
            )
        except GatewayError as exc:
            code = tr.error_code(exc)
        results.append({"name": name, "error_code": code})
    return session.respond(req, {"throttle_time": 0, "responses": results})


async def create_partitions(session: Session, req: KafkaRequest) -> Any:
    assert session.ctx is not None
    body = req.body
    results = []
    for t in body.topics:
        code, message = ErrorCode.none, None
        topic = Topic(session.settings.stream, t.name)
        try:
            if body.validate_only:
                info = (await session.router.execute(DescribeTopic(topic=topic), session.ctx)).info
                if t.count <= len(info.partitions):
                    raise InvalidPartitions(
                        f"topic has {len(info.partitions)} partitions, cannot grow to {t.count}"
                    )
            else:
                await session.router.execute(
                    CreatePartitions(topic=topic, total=t.count), session.ctx
                )
        except GatewayError as exc:
            code, message = tr.error_code(exc), exc.message
        results.append({"name": t.name, "error_code": code, "error_message": message})
    return session.respond(req, {"throttle_time": 0, "results": results})


# DescribeConfigs config_source (v1+)
_DYNAMIC_TOPIC_CONFIG, _STATIC_BROKER_CONFIG, _DEFAULT_CONFIG = 1, 4, 5
# Broker configs Kafka marks read-only (not dynamically updatable).
_READ_ONLY = frozenset({"broker.id", "node.id"})


def _broker_configs(session: Session) -> dict[str, tuple[str, int]]:
    """name -> (value, config_source). The listener keys describe the listener this client is
    connected to (a TLS port beside a plaintext one is a listener of its own), named by its
    security protocol as Kafka names listeners without a ``listener.security.protocol.map``;
    tools (kcat -L, the admin clients' describe-cluster views) read them to find the broker.
    ``advertised.listeners`` is a default, as in Kafka, unless an advertised host was configured
    (kafka-python's suite checks DEFAULT_CONFIG against a broker that sets none)."""
    s = session.settings
    protocol = ("SASL_" if s.sasl else "") + ("SSL" if session.conn.secure else "PLAINTEXT")
    bound = session.conn.local or (session.host, session.port)
    static = _STATIC_BROKER_CONFIG
    advertised = static if s.advertised_host else _DEFAULT_CONFIG
    configs = {
        "auto.create.topics.enable": (str(s.auto_create_topics).lower(), static),
        "num.partitions": (str(s.default_partitions), static),
        "broker.id": (str(s.node_id), static),
        "node.id": (str(s.node_id), static),
        "listeners": (f"{protocol}://{bound[0]}:{bound[1]}", static),
        "advertised.listeners": (f"{protocol}://{session.host}:{session.port}", advertised),
        "listener.security.protocol.map": (f"{protocol}:{protocol}", static),
    }
    if s.sasl:
        configs["sasl.enabled.mechanisms"] = ("PLAIN,SCRAM-SHA-256,SCRAM-SHA-512", static)
    return configs


async def describe_configs(session: Session, req: KafkaRequest) -> Any:
    assert session.ctx is not None
    results = []
    for r in req.body.resources:
        keys = None if r.configuration_keys is None else set(r.configuration_keys)
        entry: dict[str, Any] = {
            "error_code": ErrorCode.none, "error_message": None, "resource_type": r.resource_type,
            "resource_name": r.resource_name, "configs": [],
        }  # fmt: skip
        if r.resource_type == _TOPIC_RESOURCE:
            topic = Topic(session.settings.stream, r.resource_name)
            try:
                info = (await session.router.execute(DescribeTopic(topic=topic), session.ctx)).info
            except GatewayError as exc:
                entry.update(error_code=tr.error_code(exc), error_message=exc.message)
                results.append(entry)
                continue
            configs = {
                name: (value, _DEFAULT_CONFIG if is_default else _DYNAMIC_TOPIC_CONFIG)
                for name, (value, is_default) in tr.config_entries(
                    info.config, info.defaults
                ).items()
            }
        elif r.resource_type == _BROKER_RESOURCE:
            configs = _broker_configs(session)
        else:
            entry.update(
                error_code=ErrorCode.invalid_request,
                error_message=f"resource type {r.resource_type} is not supported",
            )
            results.append(entry)
            continue
        entry["configs"] = [
            {
                "name": name,
                "value": value,
                "read_only": name in _READ_ONLY,
                "config_source": source,
                "is_sensitive": False,
                "synonyms": [],
                "config_type": config_type(name),  # v3+ (KIP-569)
                "documentation": None,
            }
            for name, (value, source) in sorted(configs.items())
            if keys is None or name in keys
        ]
        results.append(entry)
    return session.respond(req, {"throttle_time": 0, "results": results})


__all__ = ["create_partitions", "create_topics", "delete_topics", "describe_configs", "metadata"]
