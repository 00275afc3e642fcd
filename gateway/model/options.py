"""Options shared by commands and results: acknowledgement level, offset lookup, topic config."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field


class Acks(enum.Enum):
    NONE = "none"  # the client wants no answer; the backend still has to accept it
    LEADER = "leader"
    ALL = "all"


class OffsetSpec(enum.Enum):
    EARLIEST = "earliest"
    LATEST = "latest"  # the next offset to be written (high watermark)
    TIMESTAMP = "timestamp"  # first offset whose timestamp >= timestamp_us
    MAX_TIMESTAMP = "max_timestamp"


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicConfig:
    """Per-topic settings; ``None`` = the backend's default, -1 = unlimited."""

    retention_ms: int | None = None
    retention_bytes: int | None = None  # per partition, as in Kafka
    segment_bytes: int | None = None
    max_message_bytes: int | None = None
    compression: str | None = None
    extra: Mapping[str, str] = field(default_factory=dict)  # settings the gateway only stores


__all__ = ["Acks", "OffsetSpec", "TopicConfig"]
