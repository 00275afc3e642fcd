"""Producer ids for idempotent Kafka producers (InitProducerId).

Kafka hands out ids from blocks persisted in ZooKeeper/KRaft so an id is never reused. The
gateway derives them from the wall clock instead: milliseconds since 2024 shifted left 20 bits,
plus 20 random bits, so ids stay unique across restarts (the backend's dedup state outlives the
gateway process) and across the gateways on one backend, which grant ids without asking each
other (two collide only when they start producers in the same millisecond and draw the same
one of 2^20 numbers). They stay below 2^62, far from the int64 limit.
"""

from __future__ import annotations

import secrets
import time

_EPOCH_MS = 1_704_067_200_000  # 2024-01-01T00:00:00Z
_SHIFT = 20


class ProducerIds:
    def __init__(self) -> None:
        self._last = 0

    def allocate(self) -> int:
        ms = int(time.time() * 1000) - _EPOCH_MS
        candidate = (ms << _SHIFT) | secrets.randbits(_SHIFT)
        self._last = max(candidate, self._last + 1)
        return self._last


__all__ = ["ProducerIds"]
