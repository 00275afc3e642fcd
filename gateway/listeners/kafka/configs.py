"""Kafka AlterConfigs and IncrementalAlterConfigs (KIP-339) for topic settings: the ones every
backend's store honours (``retention.ms``, ``retention.bytes``, ``segment.bytes``,
``max.message.bytes``), applied with the canonical UpdateTopic; on a Kafka backend that is the
broker's own IncrementalAlterConfigs. Other names are refused with INVALID_CONFIG, as a broker
refuses a name it does not know, rather than stored and ignored; broker configs are static.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from gateway.listeners.kafka.session import Session
from gateway.model import (
    DescribeTopic,
    GatewayError,
    InvalidRequest,
    Topic,
    TopicConfig,
    TopicForbidden,
    UpdateTopic,
)
from gateway.translate.kafka import requests as tr
from protocols.kafka.framing import KafkaRequest

_TOPIC_RESOURCE = 2
# config name -> TopicConfig field: what UpdateTopic changes
HONOURED = {
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "segment.bytes": "segment_bytes",
    "max.message.bytes": "max_message_bytes",
}
# IncrementalAlterConfigs operations (KIP-339); APPEND/SUBTRACT are for list-valued configs.
_SET, _DELETE = 0, 1


class _InvalidConfig(Exception):
    pass


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
    values = _new_values(r.configs, info.config, incremental=incremental)
    update = UpdateTopic(topic=topic, config=TopicConfig(**values))  # type: ignore[arg-type]
    if validate_only:
        if not await session.router.permits(update, session.ctx):
            raise TopicForbidden(f"may not alter topic {topic}")
        return
    await session.router.execute(update, session.ctx)


def _new_values(configs: Any, current: TopicConfig, *, incremental: bool) -> dict[str, int]:
    """TopicConfig field -> new value. UpdateTopic only sets: a setting cannot go back to the
    backend's default once the topic sets it. So DELETE of a setting the topic does not set is
    done (nothing to do), of one it sets is refused; and the non-incremental AlterConfigs, which
    in Kafka resets every setting it leaves out, leaves them as they are."""
    values: dict[str, int] = {}
    for c in configs:
        field = HONOURED.get(c.name)
        if field is None:
            raise _InvalidConfig(
                f"config {c.name!r} cannot be altered here (alterable: {', '.join(HONOURED)})"
            )
        op = c.config_operation if incremental else _SET
        if op == _DELETE:
            if getattr(current, field) is not None:
                raise _InvalidConfig(
                    f"config {c.name!r} cannot be reset to the default: set a value instead"
                )
        elif op != _SET:
            raise _InvalidConfig(f"config {c.name!r} is not a list: it can only be set or deleted")
        elif c.value is None:
            raise _InvalidConfig(f"config {c.name!r} needs a value")
        else:
            try:
                values[field] = int(c.value)
            except ValueError:
                message = f"config {c.name!r} must be an integer, not {c.value!r}"
                raise _InvalidConfig(message) from None
    return values


__all__ = ["HONOURED", "alter_configs", "incremental_alter_configs"]
