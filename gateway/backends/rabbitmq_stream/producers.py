"""Kafka idempotent producers on RabbitMQ's publisher deduplication.

A Kafka batch with producer fields is published under the RabbitMQ publisher reference of its
producer id and epoch (``kafka_reference``), each record's sequence + 1 its publishing id, so the
broker drops a retry that any gateway stored before. ``Producers`` plans a batch's ids against
the broker's last stored id for that reference (asked once, then remembered while this gateway
publishes for it): a batch wholly at or below it is a duplicate; one that does not follow it is a
gap, refused as Kafka does, after the broker is asked again (another gateway may have stored the
batches in between). An older epoch is fenced only where this gateway saw a newer one: the
gateway never bumps an epoch (InitProducerId gives a new id).
"""

from __future__ import annotations

from typing import Final

from gateway.backends.rabbitmq_stream.conn import check
from gateway.backends.rabbitmq_stream.link import Link
from gateway.model import Append, ProducerFenced, SequenceError
from protocols import rabbitmq_stream as rs

# Kafka sequences are 31-bit and wrap; RabbitMQ's publishing ids only grow (u64).
_SEQUENCE_SPAN: Final = 1 << 31
MAX_REMEMBERED: Final = 100_000  # (stream, producer reference) -> last id


def kafka_reference(producer_id: int, epoch: int) -> str:
    """The RabbitMQ publisher reference of a Kafka producer id and epoch (a new epoch starts
    its sequences at 0 again: a reference of its own)."""
    return f"__streamgate-kafka-{producer_id}-{epoch}"


def kafka_publishing_ids(base_sequence: int, records: int, last: int) -> list[int]:
    """The publishing ids of a batch's records: sequence + 1 (RabbitMQ's ids start above 0),
    unwrapped past 2^31 to lie nearest the last id the broker stored."""
    first = base_sequence + 1
    laps = max(last - first, 0) // _SEQUENCE_SPAN
    first += laps * _SEQUENCE_SPAN
    if last - first > _SEQUENCE_SPAN // 2:  # the sequence wrapped since: the next lap
        first += _SEQUENCE_SPAN
    return list(range(first, first + records))


async def stored_sequence(link: Link, stream: str, reference: str) -> int:
    """The broker's last publishing id stored under ``reference`` on ``stream`` (0: none)."""

    async def once() -> int:
        conn = await link.connection()
        reply = await conn.call(
            lambda c: rs.QueryPublisherSequence(
                correlation_id=c, reference=reference, stream=stream
            )
        )
        check(reply, f"QueryPublisherSequence on {stream!r}")
        assert isinstance(reply, rs.QueryPublisherSequenceResponse)
        return reply.sequence

    return await link.retry(once)


class Producers:
    def __init__(self, link: Link) -> None:
        self.link = link
        self._last: dict[tuple[str, str], int] = {}  # (stream, reference) -> last stored id
        self._epochs: dict[int, int] = {}  # producer id -> newest epoch seen here

    async def plan(self, cmd: Append, stream: str, records: int) -> tuple[str, list[int]] | None:
        """(reference, publishing ids) to publish ``cmd``'s records with; None: a duplicate."""
        newest = self._epochs.get(cmd.producer_id, cmd.producer_epoch)
        if cmd.producer_epoch < newest:
            raise ProducerFenced(
                f"producer {cmd.producer_id} epoch {cmd.producer_epoch} is older than {newest}"
            )
        self._epochs[cmd.producer_id] = cmd.producer_epoch
        reference = kafka_reference(cmd.producer_id, cmd.producer_epoch)
        last = self._last.get((stream, reference))
        if last is None:
            last = await stored_sequence(self.link, stream, reference)
        ids = kafka_publishing_ids(cmd.base_sequence, records, last)
        if ids[0] != last + 1 and ids[-1] > last:
            # Not next here: maybe stored meanwhile through another gateway; else a gap.
            last = await stored_sequence(self.link, stream, reference)
            ids = kafka_publishing_ids(cmd.base_sequence, records, last)
            if ids[0] != last + 1 and ids[-1] > last:
                raise SequenceError(
                    f"producer {cmd.producer_id}: sequence {cmd.base_sequence} on {stream!r} "
                    f"does not follow {(last - 1) % _SEQUENCE_SPAN}"
                )
        return None if ids[-1] <= last else (reference, ids)

    async def stored_elsewhere(self, stream: str, reference: str, last_id: int) -> bool:
        """Whether the broker holds up to ``last_id`` for ``reference`` (another gateway's copy
        of a batch this one published and did not see land)."""
        return await stored_sequence(self.link, stream, reference) >= last_id

    def stored(self, stream: str, reference: str, last_id: int) -> None:
        if len(self._last) >= MAX_REMEMBERED:
            self._last.clear()  # asked of the broker again on next use
            self._epochs.clear()
        key = (stream, reference)
        self._last[key] = max(self._last.get(key, 0), last_id)


__all__ = ["Producers", "kafka_publishing_ids", "kafka_reference", "stored_sequence"]
