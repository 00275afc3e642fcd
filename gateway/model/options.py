"""Options shared by commands and results: acknowledgement level, offset lookup, topic config."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field


class Acks(enum.Enum):
    NONE = "none"  # the client wants no answer; the backend still has to accept it
    LEADER = "leader"
    ALL = "all"


class Isolation(enum.Enum):
    """Which stored messages a read returns around Kafka transactions (KIP-98)."""

    # Everything stored, control batches (transaction markers) included: Kafka's
    # read_uncommitted (Kafka clients skip control batches themselves).
    UNCOMMITTED = "uncommitted"
    # Up to the last stable offset (the first offset of the oldest open transaction), with the
    # aborted transactions the returned range overlaps named in the result: Kafka's
    # read_committed (the client drops their records and the markers).
    COMMITTED = "committed"
    # Up to the last stable offset, without markers and without the batches of aborted
    # transactions: what every other protocol delivers (it has no way to say "skip these").
    CLEAN = "clean"


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


__all__ = ["Acks", "Isolation", "OffsetSpec", "TopicConfig"]
