"""Idempotent-producer state of one partition: per producer id, its epoch and last 5 batches.

Kafka's rules (KIP-98): a lower epoch is fenced; a batch equal to one of the last five (same base
sequence and count) is a retry and gets its original offsets back without being stored again; in
the current epoch the next batch must start at last sequence + 1; a new epoch starts at 0.

The state is rebuilt on open from a snapshot (``producers.snapshot``, written when a segment is
sealed, so it is valid as of the active segment's base offset) plus the batch headers of the
segments after it. A missing or corrupt snapshot costs a header walk of the whole log, nothing
else. Snapshot, little-endian: ``"SGPS" u64 offset u32 producers`` then per producer
``i64 id i16 epoch u8 n`` and n x ``i32 base_sequence u32 count u64 base_offset``, then a CRC32C
of everything before it.
"""

from __future__ import annotations

import contextlib
import os
import struct
from collections import deque
from typing import Final

import crc32c

from gateway.model import InvalidRequest, ProducerFenced, SequenceError

from .batch_format import BatchHeader

KEEP_BATCHES: Final = 5
_SEQ_MASK: Final = 0x7FFFFFFF  # sequences wrap at i32 max, as in Kafka
_HEAD = struct.Struct("<4sQI")
_PRODUCER = struct.Struct("<qhB")
_BATCH = struct.Struct("<iIQ")
_CRC = struct.Struct("<I")


class ProducerState:
    __slots__ = ("batches", "epoch")

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
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
        self, producer_id: int, epoch: int, base_sequence: int, count: int, base_offset: int
    ) -> None:
        state = self.states.get(producer_id)
        if state is None or epoch != state.epoch:
            state = self.states[producer_id] = ProducerState(epoch)
        state.batches.append((base_sequence, count, base_offset))

    def replay(self, h: BatchHeader) -> None:
        if h.producer_id >= 0:
            self.record(h.producer_id, h.producer_epoch, h.base_sequence, h.records, h.base_offset)

    # --- snapshot ----------------------------------------------------------------------------

    def dump(self, offset: int) -> bytes:
        parts = [_HEAD.pack(b"SGPS", offset, len(self.states))]
        for pid, state in self.states.items():
            parts.append(_PRODUCER.pack(pid, state.epoch, len(state.batches)))
            parts.extend(_BATCH.pack(*b) for b in state.batches)
        body = b"".join(parts)
        return body + _CRC.pack(crc32c.crc32c(body))

    def write_snapshot(self, path: str, offset: int) -> None:
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(self.dump(offset))
        os.replace(tmp, path)

    @classmethod
    def read_snapshot(cls, path: str) -> tuple[Producers, int] | None:
        """(state, offset it is valid for), or None when missing or damaged."""
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
            if magic != b"SGPS":
                return None
            out = cls()
            pos = _HEAD.size
            for _ in range(n):
                pid, epoch, nb = _PRODUCER.unpack_from(body, pos)
                pos += _PRODUCER.size
                state = out.states[pid] = ProducerState(epoch)
                for _ in range(nb):
                    state.batches.append(_BATCH.unpack_from(body, pos))
                    pos += _BATCH.size
            if pos == len(body):
                return out, offset
        return None
