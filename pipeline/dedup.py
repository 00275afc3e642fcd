"""A task's appends carry what lets the backend drop them when the task runs again: Spark retries
a failed task with the same input, and a restarted streaming query replays its last unfinished
micro-batch. Each run of a task sends the same messages in the same batches (``TaskWriter``
batches deterministically), tagged from the same ``Attempt``, so the backend can tell a repeat:

* ``publisher_dedup`` (RabbitMQ, and a streamgate's RabbitMQ Stream listener): a publisher
  reference per writer and Spark partition, and publishing ids that only grow, across the
  micro-batches of a query too (``batch << 32`` + the message's number in the task). The broker
  drops every id not above the highest it stored for the reference: exactly once.
* ``idempotent_producers`` where the gateway grants the ids (the embedded store opened directly): a
  Kafka idempotent producer id derived from the writer and Spark partition, a new epoch per
  micro-batch (a new producer id every 32,767 batches, epochs being int16), sequences from 0
  per target partition. A repeated batch among the last five of its producer is a duplicate;
  an older one is refused as out of order, and since a task appends its batches one after the
  other and each waits for its acknowledgement, what a run stored is a prefix of what it
  meant to: an out-of-order refusal of a repeated batch means it was stored before. The store
  forgets a producer idle for its producer id expiration (1 day by default, as Kafka): a task or
  micro-batch run again after that is stored again.
* otherwise (Iggy; and any ``kafka://`` URL, a broker's or a streamgate Kafka listener's: a
  Kafka broker refuses producer ids it did not grant): nothing tells a repeat; a retried task
  may store its rows twice.

The repeat must see the same rows in the same order (Spark's guarantee for deterministic
plans); a task over non-deterministic input is not protected.
"""

from __future__ import annotations

import enum
import hashlib
from dataclasses import dataclass, field
from typing import Final

from gateway.backends.base import Backend, NativeProducerIds
from gateway.model import Append, Message, MessageBatch, ProducerFenced, SequenceError, Topic

EPOCHS: Final = 32767  # producer epochs 0..32766 (int16; Kafka keeps 32767 for exhaustion)
_PRODUCER_BASE: Final = 1 << 62  # above the ids gateways grant (coordination/producer_ids.py)
_IDS_PER_BATCH: Final = 1 << 32  # messages one task may publish per target in one batch


class Mode(enum.Enum):
    PUBLISHER = "publisher reference"
    PRODUCER = "idempotent producer"
    NONE = "none"


def mode_of(backend: Backend) -> Mode:
    capabilities = backend.capabilities
    if capabilities.publisher_dedup:
        return Mode.PUBLISHER
    if isinstance(backend, NativeProducerIds):
        # A Kafka broker knows only the producer ids it granted (a real one answers
        # UNKNOWN_PRODUCER_ID to a writer's own), and one it grants a retry cannot share: a
        # write through a kafka:// URL is at least once, as Spark's own Kafka sink is.
        return Mode.NONE
    if capabilities.idempotent_producers:
        return Mode.PRODUCER
    return Mode.NONE


@dataclass(frozen=True, slots=True)
class Attempt:
    """What every run of one task shares: the writer (a DataFrame write's own id, or a
    streaming query's id, which its checkpoint keeps), Spark's partition id, and the micro-batch
    (0 for a batch write)."""

    writer: str
    partition: int
    batch: int = 0

    def digest(self, *extra: object) -> int:
        text = "/".join(str(x) for x in (self.writer, self.partition, *extra))
        return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


@dataclass(slots=True)
class Tagger:
    """The Append commands of one task, each tagged for its mode."""

    attempt: Attempt
    mode: Mode
    _sent: dict[tuple[Topic, int], int] = field(default_factory=dict)  # per target: messages

    def append(self, topic: Topic, partition: int, messages: list[Message]) -> Append:
        before = self._sent.get((topic, partition), 0)
        self._sent[(topic, partition)] = before + len(messages)
        batch = MessageBatch(messages)
        a = self.attempt
        match self.mode:
            case Mode.PUBLISHER:
                first = a.batch * _IDS_PER_BATCH + before + 1
                return Append(
                    topic=topic,
                    partition=partition,
                    batch=batch,
                    offset_needed=False,
                    publisher=f"streamgate-spark-{a.digest():016x}",
                    publishing_ids=tuple(range(first, first + len(messages))),
                )
            case Mode.PRODUCER:
                return Append(
                    topic=topic,
                    partition=partition,
                    batch=batch,
                    producer_id=_PRODUCER_BASE | (a.digest(a.batch // EPOCHS) >> 2),
                    producer_epoch=a.batch % EPOCHS,
                    base_sequence=before,
                )
            case Mode.NONE:
                return Append(topic=topic, partition=partition, batch=batch)


def stored_before(mode: Mode, exc: Exception) -> bool:
    """Whether a refused append is one an earlier run of the task stored (see above)."""
    return (
        mode is Mode.PRODUCER
        and isinstance(exc, SequenceError)
        and not isinstance(exc, ProducerFenced)
    )


__all__ = ["EPOCHS", "Attempt", "Mode", "Tagger", "mode_of", "stored_before"]
