"""Kafka topic configs: the types DescribeConfigs v3 reports (KIP-569), and AlterConfigs /
IncrementalAlterConfigs (KIP-339) applied with the canonical UpdateTopic; on a Kafka backend
that is the broker's own IncrementalAlterConfigs.

A setting is accepted by the same rule as CreateTopics (``topic_config``): the four the stores
honour (``retention.ms``, ``retention.bytes``, ``segment.bytes``, ``max.message.bytes``) must be
integers, ``compression.type`` and ``cleanup.policy`` must hold values Kafka knows, anything else
is kept as the topic's own setting and reported by DescribeConfigs. ``cleanup.policy=compact``
is stored but the stores never compact (README, Kafka section). DELETE returns a setting to the
default, and so does leaving a Kafka setting out of a non-incremental AlterConfigs (``_left_out``);
APPEND/SUBTRACT change list settings (``cleanup.policy``) as Kafka does, starting from the default
when the topic sets none. A setting the backend cannot keep (the Iggy backend holds
only Iggy's own options) is refused with INVALID_CONFIG, as is any value the backend refuses;
broker configs are static.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any, Final

from kio.schema.errors import ErrorCode

from gateway.listeners.kafka.session import Session
from gateway.model import (
    DescribeTopic,
    GatewayError,
    InvalidRequest,
    Topic,
    TopicConfig,
    TopicForbidden,
    Unsupported,
    UpdateTopic,
)
from gateway.translate.kafka import requests as tr
from gateway.translate.kafka.messages import config_settings
from protocols.kafka.framing import KafkaRequest

_TOPIC_RESOURCE = 2
# Kafka config name -> the canonical name UpdateTopic.reset takes (else the name itself, a key
# of TopicConfig.extra).
_CANONICAL: Final = {
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "segment.bytes": "segment_bytes",
    "max.message.bytes": "max_message_bytes",
    "compression.type": "compression",
}
# IncrementalAlterConfigs operations (KIP-339); APPEND/SUBTRACT are for list-valued configs.
_SET, _DELETE, _APPEND, _SUBTRACT = 0, 1, 2, 3

# DescribeConfigs v3 config_type (KIP-569, ConfigEntry.ConfigType), as Kafka's TopicConfig /
# LogConfig and KafkaConfig define each key; a name Kafka does not know is UNKNOWN.
UNKNOWN, BOOLEAN, STRING, INT, LONG, DOUBLE, LIST = 0, 1, 2, 3, 5, 6, 7
CONFIG_TYPES: Final[Mapping[str, int]] = MappingProxyType(
    {
        # topic configs
        "cleanup.policy": LIST,
        "compression.type": STRING,
        "compression.gzip.level": INT,
        "compression.lz4.level": INT,
        "compression.zstd.level": INT,
        "delete.retention.ms": LONG,
        "file.delete.delay.ms": LONG,
        "flush.messages": LONG,
        "flush.ms": LONG,
        "follower.replication.throttled.replicas": LIST,
        "index.interval.bytes": INT,
        "leader.replication.throttled.replicas": LIST,
        "local.retention.bytes": LONG,
        "local.retention.ms": LONG,
        "max.compaction.lag.ms": LONG,
        "max.message.bytes": INT,
        "message.downconversion.enable": BOOLEAN,
        "message.format.version": STRING,
        "message.timestamp.after.max.ms": LONG,
        "message.timestamp.before.max.ms": LONG,
        "message.timestamp.difference.max.ms": LONG,
        "message.timestamp.type": STRING,
        "min.cleanable.dirty.ratio": DOUBLE,
        "min.compaction.lag.ms": LONG,
        "min.insync.replicas": INT,
        "preallocate": BOOLEAN,
        "remote.log.copy.disable": BOOLEAN,
        "remote.log.delete.on.disable": BOOLEAN,
        "remote.storage.enable": BOOLEAN,
        "retention.bytes": LONG,
        "retention.ms": LONG,
        "segment.bytes": INT,
        "segment.index.bytes": INT,
        "segment.jitter.ms": LONG,
        "segment.ms": LONG,
        "unclean.leader.election.enable": BOOLEAN,
        # the broker configs DescribeConfigs lists
        "advertised.listeners": STRING,
        "auto.create.topics.enable": BOOLEAN,
        "broker.id": INT,
        "listener.security.protocol.map": STRING,
        "listeners": STRING,
        "node.id": INT,
        "num.partitions": INT,
        "sasl.enabled.mechanisms": LIST,
    }
)
# Values Kafka accepts (TopicConfig's validators); other values are INVALID_CONFIG there too.
_CHOICES: Final = {
    "cleanup.policy": frozenset({"compact", "delete"}),
    "compression.type": frozenset({"uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"}),
}


class _InvalidConfig(Exception):
    pass


def config_type(name: str) -> int:
    return CONFIG_TYPES.get(name, UNKNOWN)


def _check_value(name: str, value: str) -> None:
    choices = _CHOICES.get(name)
    if choices is None:
        return
    # An empty list is valid: Kafka's APPEND/SUBTRACT can leave cleanup.policy empty.
    items = _items(value) if config_type(name) == LIST else [value]
    if not set(items) <= choices:
        raise _InvalidConfig(
            f"invalid value {value!r} for config {name!r}: "
            f"{'a list of ' if config_type(name) == LIST else ''}{', '.join(sorted(choices))}"
        )


def topic_settings(configs: Iterable[tuple[str, str | None]]) -> TopicConfig:
    """CreateTopics' and AlterConfigs' one rule for a topic's settings (module doc); a value
    Kafka would refuse is InvalidRequest, answered as INVALID_CONFIG."""
    pairs = [(n, v) for n, v in configs if v is not None]
    try:
        for name, value in pairs:
            _check_value(name, value)
    except _InvalidConfig as exc:
        raise InvalidRequest(str(exc)) from None
    return tr.topic_config(pairs)


def _items(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


async def incremental_alter_configs(session: Session, req: KafkaRequest) -> Any:
    return await _alter_all(session, req, incremental=True)


async def alter_configs(session: Session, req: KafkaRequest) -> Any:
    return await _alter_all(session, req, incremental=False)


async def _alter_all(session: Session, req: KafkaRequest, *, incremental: bool) -> Any:
    results = []
    for r in req.body.resources:
        code, message = ErrorCode.none, None
        try:
            await _alter(session, r, req.body.validate_only, incremental=incremental)
        except _InvalidConfig as exc:
            code, message = ErrorCode.invalid_config, str(exc)
        except tr.InvalidTopicName as exc:
            code, message = ErrorCode.invalid_topic_exception, exc.message
        except GatewayError as exc:
            code, message = tr.error_code(exc), exc.message
        results.append(
            {"error_code": code, "error_message": message, "resource_type": r.resource_type,
             "resource_name": r.resource_name}
        )  # fmt: skip
    return session.respond(req, {"throttle_time": 0, "responses": results})


async def _alter(session: Session, r: Any, validate_only: bool, *, incremental: bool) -> None:
    assert session.ctx is not None
    if r.resource_type != _TOPIC_RESOURCE:
        raise InvalidRequest(
            f"resource type {r.resource_type} cannot be altered: only topic configs can"
        )
    tr.check_topic_name(r.resource_name)
    topic = Topic(session.settings.stream, r.resource_name)
    info = (await session.router.execute(DescribeTopic(topic=topic), session.ctx)).info
    sets, reset = _changes(r.configs, info.config, info.defaults, incremental=incremental)
    try:
        update = UpdateTopic(topic=topic, config=topic_settings(sets), reset=reset)
    except InvalidRequest as exc:
        raise _InvalidConfig(exc.message) from None
    if validate_only:
        if not await session.router.permits(update, session.ctx):
            raise TopicForbidden(f"may not alter topic {topic}")
        return
    try:
        await session.router.execute(update, session.ctx)
    except (InvalidRequest, Unsupported) as exc:  # a value or setting the backend refuses
        raise _InvalidConfig(exc.message) from None


def _changes(
    configs: Any, current: TopicConfig, defaults: TopicConfig | None, *, incremental: bool
) -> tuple[list[tuple[str, str]], frozenset[str]]:
    """(name, value) to set, and the canonical names to reset. The non-incremental AlterConfigs
    replaces the topic's settings, as in Kafka: every setting of its own it leaves out goes back
    to the default."""
    own = config_settings(current)
    values = tr.config_entries(current, defaults)  # the topic's, else the default
    sets: list[tuple[str, str]] = []
    reset: set[str] = set()
    seen: set[str] = set()
    for c in configs:
        name, op = c.name, (c.config_operation if incremental else _SET)
        if name in seen:
            raise _InvalidConfig(f"config {name!r} is named twice")
        seen.add(name)
        if op == _DELETE:
            if name in own:  # else nothing to do, as in Kafka
                reset.add(_CANONICAL.get(name, name))
        elif op in (_APPEND, _SUBTRACT):
            if config_type(name) != LIST:
                raise _InvalidConfig(
                    f"config {name!r} is not a list: it can only be set or deleted"
                )
            old = _items(values.get(name, ("", True))[0])
            change = _items(c.value or "")
            new = list(dict.fromkeys(old + change)) if op == _APPEND else [
                item for item in old if item not in change
            ]  # fmt: skip
            sets.append((name, ",".join(new)))
        elif op != _SET:
            raise _InvalidConfig(f"unknown operation {op} on config {name!r}")
        elif c.value is None:
            raise _InvalidConfig(f"config {name!r} needs a value")
        else:
            sets.append((name, c.value))
    if not incremental:
        reset.update(_CANONICAL.get(name, name) for name in _left_out(values, seen))
    return sets, frozenset(reset)


def _left_out(values: Mapping[str, tuple[str, bool]], named: set[str]) -> list[str]:
    """What a non-incremental AlterConfigs resets: the Kafka settings the topic has that it does
    not name. A setting Kafka does not know (another protocol's option, such as the Iggy
    server's ``message_expiry``) is outside what a Kafka client replaces and stays; one that
    already holds Kafka's default needs no reset."""
    return [
        name for name, (value, default) in values.items()
        if not default and name not in named and config_type(name) != UNKNOWN
        and _KAFKA_DEFAULTS.get(name) != value
    ]  # fmt: skip


# Kafka's defaults (LogConfig) of the settings the stores honour.
_KAFKA_DEFAULTS: Final = {
    "retention.ms": "604800000",
    "retention.bytes": "-1",
    "segment.bytes": "1073741824",
    "max.message.bytes": "1048588",
}


__all__ = [
    "CONFIG_TYPES",
    "alter_configs",
    "config_type",
    "incremental_alter_configs",
    "topic_settings",
]
