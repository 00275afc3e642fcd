"""Idempotent-producer state of one partition: per producer id, its epoch, its last 5 batches
and when it last appended.

Kafka's rules (KIP-98): a lower epoch is fenced; a batch equal to one of the last five (same base
sequence and count) is a retry and gets its original offsets back without being stored again; in
the current epoch the next batch must start at last sequence + 1; a new epoch starts at 0.

Expiry, as Kafka's broker expires producer state (``producer.id.expiration.ms``): a producer
that has not appended for the store's expiration time is forgotten, and one that comes back
after it is unknown, which ``check`` accepts at any sequence, as for a new one. Idle time is
measured on the store's clock at append, not by the batches' timestamps: those are the
client's, and a producer copying week-old messages (a mirror) would expire at once. Each Spark
write task of the pipeline is a producer of its own: without expiry their state only grows.

The state is rebuilt on open from a snapshot (``producers.snapshot``, written when a segment is
sealed, so it is valid as of the active segment's base offset) plus the batch headers of the
segments after it; a producer known only from those headers counts as having appended when the
store opened (their append time is not stored), so expiry can come late, never early. A
missing or corrupt snapshot costs a header walk of the whole log, nothing else. Snapshot,
little-endian: ``"SGP2" u64 offset u32 producers`` then per producer ``i64 id i16 epoch u8 n
i64 last_append_us`` and n x ``i32 base_sequence u32 count u64 base_offset``, then a CRC32C of
everything before it. A ``"SGPS"`` snapshot (before expiry: no ``last_append_us``) is read as
if its producers appended when the store opened.
"""

from __future__ import annotations

import contextlib
import os
import struct
from collections import deque
from typing import Final

import crc32c

from gateway.model import InvalidRequest, ProducerFenced, SequenceError

from .batch_format import ATTR_CONTROL, BatchHeader

KEEP_BATCHES: Final = 5
EXPIRATION_MS: Final = 24 * 3600 * 1000  # Kafka's producer.id.expiration.ms default (KIP-854)
_SEQ_MASK: Final = 0x7FFFFFFF  # sequences wrap at i32 max, as in Kafka
_MAGIC: Final = b"SGP2"
_MAGIC_V1: Final = b"SGPS"  # no last_append_us
_HEAD = struct.Struct("<4sQI")
_PRODUCER = struct.Struct("<qhBq")
_PRODUCER_V1 = struct.Struct("<qhB")
_BATCH = struct.Struct("<iIQ")
_CRC = struct.Struct("<I")


class ProducerState:
    __slots__ = ("batches", "epoch", "last_append_us")

    def __init__(self, epoch: int, last_append_us: int) -> None:
        self.epoch = epoch
        self.last_append_us = last_append_us  # the store's clock
        self.batches: deque[tuple[int, int, int]] = deque(maxlen=KEEP_BATCHES)


class Producers:
    __slots__ = ("states",)

    def __init__(self) -> None:
        self.states: dict[int, ProducerState] = {}

    def check(self, producer_id: int, epoch: int, base_sequence: int, count: int) -> int | None:
        """The original base offset when the batch is a retry; raises when it is out of order."""
        if base_sequence < 0:
            raise InvalidRequest("an idempotent batch needs a base sequence >= 0")
        state = self.states.get(producer_id)
        if state is None:
            return None  # unknown producer (new, or its state was never seen here): accept
        if epoch < state.epoch:
            raise ProducerFenced(
                f"producer {producer_id} epoch {epoch} is older than {state.epoch}"
            )
        if epoch > state.epoch:
            if base_sequence != 0:
                raise SequenceError(f"a new epoch must start at sequence 0, not {base_sequence}")
            return None
        for seq, n, base_offset in state.batches:
            if seq == base_sequence and n == count:
                return base_offset
        if state.batches:
            last_seq, last_count, _ = state.batches[-1]
            expected = (last_seq + last_count) & _SEQ_MASK
            if base_sequence != expected:
                raise SequenceError(
                    f"producer {producer_id}: expected sequence {expected}, got {base_sequence}"
                )
        return None

    def record(
        self,
        producer_id: int,
        epoch: int,
        base_sequence: int,
        count: int,
        base_offset: int,
        now_us: int,
    ) -> None:
        state = self.states.get(producer_id)
        if state is None or epoch != state.epoch:
            state = self.states[producer_id] = ProducerState(epoch, now_us)
        state.batches.append((base_sequence, count, base_offset))
        state.last_append_us = now_us

    def marker(self, producer_id: int, epoch: int, now_us: int) -> None:
        """A transaction marker of the producer's (no sequence of its own): a newer epoch
        fences the older one here too, and starts its sequences afresh, as Kafka's."""
        state = self.states.get(producer_id)
        if state is None or epoch > state.epoch:
            state = self.states[producer_id] = ProducerState(epoch, now_us)
        state.last_append_us = now_us

    def replay(self, h: BatchHeader, now_us: int) -> None:
        if h.attributes & ATTR_CONTROL:
            self.marker(h.producer_id, h.producer_epoch, now_us)
        elif h.producer_id >= 0:
            self.record(
                h.producer_id, h.producer_epoch, h.base_sequence, h.records, h.base_offset, now_us
            )

    def expire(self, idle_since_us: int) -> int:
        """Forget every producer whose last append is at or before ``idle_since_us`` (Kafka:
        expired when ``now - last >= producer.id.expiration.ms``); how many went."""
        gone = [pid for pid, s in self.states.items() if s.last_append_us <= idle_since_us]
        for pid in gone:
            del self.states[pid]
        return len(gone)

    # --- snapshot ----------------------------------------------------------------------------

    def dump(self, offset: int) -> bytes:
        parts = [_HEAD.pack(_MAGIC, offset, len(self.states))]
        for pid, state in self.states.items():
            parts.append(_PRODUCER.pack(pid, state.epoch, len(state.batches), state.last_append_us))
            parts.extend(_BATCH.pack(*b) for b in state.batches)
        body = b"".join(parts)
        return body + _CRC.pack(crc32c.crc32c(body))

    def write_snapshot(self, path: str, offset: int) -> None:
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(self.dump(offset))
        os.replace(tmp, path)

    @classmethod
    def read_snapshot(cls, path: str, now_us: int) -> tuple[Producers, int] | None:
        """(state, offset it is valid for), or None when missing or damaged; ``now_us`` is the
        last append of producers an ``SGPS`` snapshot names."""
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError:
            return None
        with contextlib.suppress(struct.error):
            body = data[: -_CRC.size]
            if len(data) < _HEAD.size + _CRC.size:
                return None
            if crc32c.crc32c(body) != _CRC.unpack_from(data, len(body))[0]:
                return None
            magic, offset, n = _HEAD.unpack_from(body)
            if magic not in (_MAGIC, _MAGIC_V1):
                return None
            out = cls()
            pos = _HEAD.size
            for _ in range(n):
                if magic == _MAGIC:
                    pid, epoch, nb, last = _PRODUCER.unpack_from(body, pos)
                    pos += _PRODUCER.size
                else:
                    pid, epoch, nb = _PRODUCER_V1.unpack_from(body, pos)
                    pos += _PRODUCER_V1.size
                    last = now_us
                state = out.states[pid] = ProducerState(epoch, last)
                for _ in range(nb):
                    state.batches.append(_BATCH.unpack_from(body, pos))
                    pos += _BATCH.size
            if pos == len(body):
                return out, offset
        return None
