"""The data source's options, checked once on the driver into frozen (picklable) records.

Names and meanings follow Spark's Kafka connector where it has the option, so a job can switch
``format("kafka")`` for ``format("streamgate")``: ``startingOffsets``/``endingOffsets`` take
``earliest``, ``latest`` or JSON per topic and partition with -2 for earliest and -1 for
latest, ``startingTimestamp`` is in milliseconds. An option this source does not know is an
error, not silently ignored: a typo would otherwise read the wrong data without a word.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

from gateway.model import DEFAULT_STREAM

from .errors import OptionError

EARLIEST: Final = -2  # in offsets JSON, as in Spark's Kafka connector
LATEST: Final = -1
DEFAULT_TIMEOUT_MS: Final = 10_000  # the client commands' --timeout
# Tasks of one job queue for an embedded store no gateway serves (endpoint.py): as long as the
# tasks before them read, which may be minutes for big partitions.
DEFAULT_LOCK_TIMEOUT_MS: Final = 300_000
DEFAULT_BATCH_SIZE: Final = 5_000  # messages per Append

Named = Literal["earliest", "latest"]
# Per topic, per partition: an offset, or EARLIEST / LATEST; partitions not named take the
# default of the option.
PerPartition = dict[str, dict[int, int]]
OffsetChoice = Named | PerPartition

_COMMON: Final = ("url", "stream", "topic", "timeoutMs", "lockTimeoutMs")
_READ: Final = (
    *_COMMON,
    "startingOffsets",
    "endingOffsets",
    "startingTimestamp",
    "maxOffsetsPerTrigger",
    "minPartitions",
    "includeHeaders",
)
_WRITE: Final = (*_COMMON, "batchSize")
# Spark's own options, handed to the source with the user's (writeStream's checkpoint).
_SPARK: Final = ("checkpointLocation",)
_EXAMPLE: Final = '{"orders":{"0":23,"1":-2}}'


@dataclass(frozen=True, slots=True)
class Connection:
    """Where the topics are and how long to wait for it."""

    url: str
    stream: str
    timeout_s: float
    lock_timeout_s: float


@dataclass(frozen=True, slots=True)
class ReadOptions:
    connection: Connection
    topics: tuple[str, ...]
    starting: OffsetChoice
    ending: OffsetChoice
    starting_timestamp_ms: int | None
    max_offsets_per_trigger: int | None
    min_partitions: int | None
    include_headers: bool


@dataclass(frozen=True, slots=True)
class WriteOptions:
    connection: Connection
    topic: str | None  # None: every row names its own in a ``topic`` column
    batch_size: int


def read_options(options: Mapping[str, str], *, streaming: bool) -> ReadOptions:
    """The options of ``spark.read`` (``streaming`` False) or ``spark.readStream``."""
    given = _known(options, _READ)
    topics = tuple(t.strip() for t in _required(given, "topic").split(","))
    if not all(topics):
        raise OptionError("topic", f"an empty name in {given['topic']!r}")
    if streaming and "endingOffsets" in given:
        raise OptionError("endingOffsets", "a streaming read has no end; use a batch read")
    return ReadOptions(
        connection=_connection(given),
        topics=tuple(dict.fromkeys(topics)),
        starting=parse_offsets(
            "startingOffsets",
            given.get("startingOffsets", "latest" if streaming else "earliest"),
            topics,
        ),
        ending=parse_offsets("endingOffsets", given.get("endingOffsets", "latest"), topics),
        starting_timestamp_ms=_integer(given, "startingTimestamp", minimum=0),
        max_offsets_per_trigger=_integer(given, "maxOffsetsPerTrigger", minimum=1),
        min_partitions=_integer(given, "minPartitions", minimum=1),
        include_headers=_boolean(given, "includeHeaders"),
    )


def write_options(options: Mapping[str, str]) -> WriteOptions:
    given = _known(options, _WRITE)
    topic = given.get("topic")
    if topic is not None and not topic.strip():
        raise OptionError("topic", "must not be empty")
    return WriteOptions(
        connection=_connection(given),
        topic=topic,
        batch_size=_integer(given, "batchSize", minimum=1) or DEFAULT_BATCH_SIZE,
    )


def parse_offsets(option: str, text: str, topics: tuple[str, ...]) -> OffsetChoice:
    """``earliest``, ``latest`` or JSON ``{"topic":{"partition":offset}}`` (Spark's Kafka
    form). The JSON may name only some partitions; it must name no topic that is not read.
    As an end, -2 (earliest) makes no sense, and Spark's connector refuses it too."""
    word = text.strip().lower()
    if word in ("earliest", "latest"):
        if option == "endingOffsets" and word == "earliest":
            raise OptionError(option, "cannot be 'earliest': nothing would be read")
        return "earliest" if word == "earliest" else "latest"
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise OptionError(
            option, f"want 'earliest', 'latest' or JSON like {_EXAMPLE}, not {text!r} ({exc})"
        ) from None
    if not isinstance(data, dict):
        raise OptionError(option, f"want a JSON object like {_EXAMPLE}, not {text!r}")
    chosen: PerPartition = {}
    for topic, partitions in data.items():
        if topic not in topics:
            raise OptionError(option, f"names topic {topic!r}, which is not read ({topics})")
        if not isinstance(partitions, dict):
            raise OptionError(option, f"topic {topic!r} wants {{partition: offset}} in {text!r}")
        chosen[topic] = {
            _partition(option, topic, key): _offset(option, topic, key, value)
            for key, value in partitions.items()
        }
    return chosen


def _partition(option: str, topic: str, key: str) -> int:
    if not key.isdigit():
        raise OptionError(option, f"topic {topic!r}: partition {key!r} is not a number >= 0")
    return int(key)


def _offset(option: str, topic: str, key: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < EARLIEST:
        raise OptionError(
            option,
            f"topic {topic!r} partition {key}: offset {value!r} is not an offset >= 0, "
            f"-2 (earliest) or -1 (latest)",
        )
    if option == "endingOffsets" and value == EARLIEST:
        raise OptionError(option, f"topic {topic!r} partition {key}: an end cannot be -2")
    return value


def _known(options: Mapping[str, str], names: tuple[str, ...]) -> dict[str, str]:
    """The options under their documented spelling (Spark hands them over lower-cased)."""
    spelled = {name.lower(): name for name in (*names, *_SPARK)}
    given: dict[str, str] = {}
    for key, value in options.items():
        name = spelled.get(key.lower())
        if name is None:
            raise OptionError(key, f"unknown to the streamgate data source; it takes {names}")
        if name not in _SPARK:
            given[name] = str(value)
    return given


def _required(given: Mapping[str, str], name: str) -> str:
    value = given.get(name)
    if value is None or not value.strip():
        raise OptionError(name, "is required")
    return value


def _connection(given: Mapping[str, str]) -> Connection:
    stream = given.get("stream", DEFAULT_STREAM)
    if not stream:
        raise OptionError("stream", "must not be empty")
    timeout = _integer(given, "timeoutMs", minimum=1) or DEFAULT_TIMEOUT_MS
    lock_timeout = _integer(given, "lockTimeoutMs", minimum=0)
    return Connection(
        url=_required(given, "url").strip(),
        stream=stream,
        timeout_s=timeout / 1000,
        lock_timeout_s=(DEFAULT_LOCK_TIMEOUT_MS if lock_timeout is None else lock_timeout) / 1000,
    )


def _integer(given: Mapping[str, str], name: str, *, minimum: int) -> int | None:
    text = given.get(name)
    if text is None:
        return None
    try:
        value = int(text.strip())
    except ValueError:
        raise OptionError(name, f"want a whole number, not {text!r}") from None
    if value < minimum:
        raise OptionError(name, f"must be at least {minimum}, not {value}")
    return value


def _boolean(given: Mapping[str, str], name: str) -> bool:
    text = given.get(name, "false").strip().lower()
    if text not in ("true", "false"):
        raise OptionError(name, f"want true or false, not {given[name]!r}")
    return text == "true"


__all__ = [
    "EARLIEST",
    "LATEST",
    "Connection",
    "OffsetChoice",
    "PerPartition",
    "ReadOptions",
    "WriteOptions",
    "parse_offsets",
    "read_options",
    "write_options",
]
