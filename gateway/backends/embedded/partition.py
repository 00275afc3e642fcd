"""One partition's log: its segments; append, read, roll, retention, purge, long-poll wake-up.

Opening one after a crash is ``recovery``'s job. Everything here runs in the trio thread and
never awaits between checking state and writing, so appends to one partition are serialised
without a lock; only fsyncs (``fsync.GroupCommit``) and long-poll waits yield. Files:
``<20-digit base>.log/.index/.timeindex`` per segment and ``producers.snapshot``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import trio

from gateway.model import (
    AppendResult,
    CorruptMessage,
    GatewayError,
    InvalidRequest,
    Isolation,
    ListOffsetsResult,
    Message,
    MessageBatch,
    MessageTooLarge,
    OffsetOutOfRange,
    OffsetSpec,
    PartitionInfo,
    Read,
    ReadResult,
    WireBatch,
)

from . import batch_codec
from .batch_format import (
    ATTR_COMMIT,
    ATTR_CONTROL,
    ATTR_TRANSACTIONAL,
    FORMAT_IDS,
    MAX_BATCH_BYTES,
    Payload,
    encode_messages,
    message_size,
    pack_header,
    stamp_uniform_sg1,
)
from .faults import storage_error
from .files import read_json, write_json
from .fsync import GroupCommit
from .partition_read import has_bytes, read_at_end, read_batches, wait_for, wait_past_skipped
from .producers import Producers
from .scan import Damage
from .segment import NO_TIMESTAMP, Segment
from .txn_index import TxnIndex

SNAPSHOT = "producers.snapshot"
# Kafka DeleteRecords moves the log start inside a segment: the offset is kept here (Kafka's
# log-start-offset checkpoint); whole segments below it are deleted at once.
LOG_START = "log-start.json"
_SG1 = FORMAT_IDS[batch_codec.FORMAT]
_MAX_RELATIVE = 0xFFFFFFFF  # offsets in a segment's index are u32 relative to its base


@dataclass(slots=True)
class LogConfig:
    """A topic's effective settings (defaults applied); None = unlimited."""

    segment_bytes: int
    max_message_bytes: int
    retention_ms: int | None = None
    retention_bytes: int | None = None


class Partition:
    def __init__(self, directory: str, number: int, config: LogConfig) -> None:
        self.dir = directory
        self.number = number
        self.config = config
        self.segments: list[Segment] = []
        self.bases: list[int] = []
        self.size_bytes = 0
        self.producers = Producers()
        self.txns = TxnIndex()
        self.commit = GroupCommit(self._collect_dirty)
        self._dirty: dict[int, Segment] = {}
        self._dir_dirty = False
        self.appended = trio.Event()
        self._watchers: set[trio.Event] = set()  # many-partition long polls (``watch``)
        self._gone: Callable[[], GatewayError] | None = None
        self.damage: list[Damage] = []  # damaged ranges recovery skipped when it opened this
        self._cut_failed = False  # see _check_cut
        start = read_json(os.path.join(directory, LOG_START))
        self._start_floor = int(start.get("offset", 0)) if start else 0  # DeleteRecords

    # --- lifecycle ---------------------------------------------------------------------------

    @classmethod
    def create(cls, directory: str, number: int, config: LogConfig) -> Partition:
        os.makedirs(directory, exist_ok=True)
        part = cls(directory, number, config)
        part.add_segment(Segment.create(directory, 0))
        return part

    def add_segment(self, seg: Segment) -> None:
        self.segments.append(seg)
        self.bases.append(seg.base_offset)
        self.size_bytes += seg.size

    def close(self) -> None:
        for seg in self.segments:
            seg.close()

    def drop(self, gone: Callable[[], GatewayError]) -> None:
        """The partition is deleted: wake its long-pollers (they raise ``gone()``), close files."""
        self._gone = gone
        self._dirty.clear()
        self._dir_dirty = False  # the directory is about to move to the trash
        self._wake()
        self.close()

    # --- state -------------------------------------------------------------------------------

    @property
    def active(self) -> Segment:
        return self.segments[-1]

    @property
    def log_start(self) -> int:
        return max(self.segments[0].base_offset, min(self._start_floor, self.next_offset))

    @property
    def next_offset(self) -> int:
        return self.segments[-1].next_offset

    def info(self) -> PartitionInfo:
        return PartitionInfo(
            partition=self.number,
            log_start_offset=self.log_start,
            next_offset=self.next_offset,
            size_bytes=self.size_bytes,
            max_timestamp_us=max(0, max(s.max_ts for s in self.segments)),
        )

    def check_open(self) -> None:
        if self._gone is not None:
            raise self._gone()

    def _wake(self) -> None:
        ev, self.appended = self.appended, trio.Event()
        ev.set()
        for watcher in self._watchers:
            watcher.set()

    def watch(self, event: trio.Event) -> None:
        """Set ``event`` on the next append, truncation or deletion (until ``unwatch``)."""
        self._watchers.add(event)

    def unwatch(self, event: trio.Event) -> None:
        self._watchers.discard(event)

    def has_news(self, offset: int) -> bool:
        """Whether a reader at ``offset`` need not wait: a message is there, the offset is out
        of range, or the partition is gone (the read that follows says which)."""
        return self._gone is not None or offset != self.next_offset

    # --- append ------------------------------------------------------------------------------

    async def append(
        self,
        batch: MessageBatch,
        now_us: int,
        *,
        sync: bool,
        producer_id: int = -1,
        producer_epoch: int = -1,
        base_sequence: int = -1,
        transactional: bool = False,
    ) -> AppendResult:
        self.check_open()
        limit = self.config.max_message_bytes
        wire = batch.wire
        payload: Payload
        as_is = wire is not None and wire.format in FORMAT_IDS
        if wire is not None and as_is:
            fmt, count, payload = FORMAT_IDS[wire.format], wire.count, (wire.data,)
            first_ts, max_ts = wire.first_timestamp_us, wire.max_timestamp_us
            if fmt == _SG1 and int.from_bytes(wire.data[:4], "little") != count:
                raise CorruptMessage(f"sg1 batch says {wire.data[:4]!r} records, not {count}")
        else:
            fmt, count, payload, first_ts, max_ts = _SG1, len(batch), (), 0, 0  # encoded below
        if count <= 0:
            raise InvalidRequest("an append needs at least one message")
        if producer_id >= 0:
            original = self.producers.check(producer_id, producer_epoch, base_sequence, count)
            if original is not None:
                if sync:
                    await self.commit.flush()  # the original may still be on its way to disk
                return AppendResult(
                    base_offset=original,
                    count=count,
                    log_append_time_us=now_us,
                    log_start_offset=self.log_start,
                    duplicate=True,
                )
        if not as_is:
            payload, first_ts, max_ts = encode_messages(batch.messages, now_us)
        elif wire is not None and max_ts == 0 and fmt == _SG1:
            # Stored as-is, but unstamped records still get the append time when that is cheap
            # (all of them unset); a mixed batch keeps its zeros.
            stamped = stamp_uniform_sg1(wire.data, now_us)
            if stamped is not None:
                payload, first_ts, max_ts = stamped, now_us, now_us
        payload_size = sum(map(len, payload))
        if payload_size > limit:  # only then can one record be over the limit
            _check_sizes(batch.messages, limit)
        if payload_size > MAX_BATCH_BYTES - 64:
            raise MessageTooLarge(f"a stored batch is limited to {MAX_BATCH_BYTES} bytes")
        base = self.next_offset
        header = pack_header(
            base_offset=base,
            format_id=fmt,
            count=count,
            first_timestamp_us=first_ts,
            max_timestamp_us=max_ts,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
            payload=payload,
            attributes=ATTR_TRANSACTIONAL if transactional else 0,
        )
        seq = self._write(header, payload, base, count, max_ts, len(header) + payload_size)
        if producer_id >= 0:
            self.producers.record(producer_id, producer_epoch, base_sequence, count, base, now_us)
        if transactional:
            self.txns.begin(producer_id, base)
        self._wake()
        if sync:
            await self.commit.wait_durable(seq)
        else:
            await trio.lowlevel.checkpoint()
        return AppendResult(
            base_offset=base,
            count=count,
            log_append_time_us=now_us,
            log_start_offset=self.log_start,
        )

    def _write(
        self, header: bytes, payload: Payload, base: int, count: int, max_ts: int, size: int
    ) -> int:
        """One batch onto the active segment (rolled first when full): its group-commit seq."""
        seg = self.active
        try:
            if seg.size and (
                self._cut_failed
                or seg.size + size > self.config.segment_bytes
                or base + count - seg.base_offset > _MAX_RELATIVE
            ):
                seg = self._roll()
            # A failed or short write leaves no partial batch behind (Segment.append), so the
            # next append after space returns continues the log where it was.
            seg.append(header, payload, base, count, max_ts, size, self.config.segment_bytes)
        except OSError as exc:
            self._check_cut(seg)
            raise storage_error(exc, f"writing {seg.path}.log") from exc
        self.size_bytes += size
        self._dirty[seg.base_offset] = seg
        return self.commit.note_write()

    async def append_marker(
        self, marker: WireBatch, producer_id: int, producer_epoch: int, commit: bool, now_us: int
    ) -> int:
        """A transaction's commit or abort marker (a Kafka control batch), durable on return:
        the producer's transaction here ends (its offset, or -1 when none was open here)."""
        self.check_open()
        if producer_id not in self.txns.open:
            return -1  # nothing of this transaction here (or its marker is already written)
        base = self.next_offset
        attributes = ATTR_TRANSACTIONAL | ATTR_CONTROL | (ATTR_COMMIT if commit else 0)
        payload = (marker.data,)
        header = pack_header(
            base_offset=base,
            format_id=FORMAT_IDS[marker.format],
            count=1,
            first_timestamp_us=marker.first_timestamp_us,
            max_timestamp_us=marker.max_timestamp_us,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=-1,
            payload=payload,
            attributes=attributes,
        )
        seq = self._write(
            header, payload, base, 1, marker.max_timestamp_us, len(header) + len(marker.data)
        )
        self.producers.marker(producer_id, producer_epoch, now_us)
        self.txns.end(producer_id, base, commit)
        self._wake()
        await self.commit.wait_durable(seq)
        return base

    def _check_cut(self, seg: Segment) -> None:
        """If even cutting a failed write back failed, the file holds a partial batch past
        ``seg.size``: the next append starts a new segment rather than write after it (readers
        never read past ``size``; recovery cuts that tail off the sealed segment)."""
        with contextlib.suppress(OSError):
            if os.stat(seg.path + ".log").st_size != seg.size:
                self._cut_failed = True

    def _roll(self) -> Segment:
        # Each step may fail (disk full): sealing only writes index files, and nothing changes
        # in memory until the new segment exists, so a failed roll is retried by the next append.
        self.active.seal()
        seg = Segment.create(self.dir, self.next_offset)
        self.add_segment(seg)
        self._dir_dirty = True
        self._cut_failed = False
        # Valid as of the new segment's base, so recovery only replays headers after it. A
        # snapshot that could not be written leaves the older one, which recovery replays from.
        with contextlib.suppress(OSError):
            self.producers.write_snapshot(os.path.join(self.dir, SNAPSHOT), seg.base_offset)
        with contextlib.suppress(OSError):
            self.txns.write_snapshot(self.dir, seg.base_offset)
        return seg

    def _collect_dirty(self) -> list[int]:
        fds: list[int] = []
        try:
            for seg in self._dirty.values():
                fds.append(seg.dup_fd())
            if self._dir_dirty:
                fds.append(os.open(self.dir, os.O_RDONLY))
        except OSError:
            # Out of descriptors (EMFILE): nothing is forgotten, the next flush tries again.
            for fd in fds:
                os.close(fd)
            raise
        self._dirty.clear()
        self._dir_dirty = False
        return fds

    # --- read --------------------------------------------------------------------------------

    def check_range(self, offset: int) -> None:
        self.check_open()
        if not self.log_start <= offset <= self.next_offset:
            raise OffsetOutOfRange(
                f"offset {offset} outside [{self.log_start}, {self.next_offset}]",
                log_start=self.log_start,
                log_end=self.next_offset,
            )

    @property
    def stable(self) -> int:
        """The last stable offset: reads of committed data stop there."""
        return self.txns.stable(self.next_offset) if self.txns.open else self.next_offset

    def visible(self, isolation: Isolation) -> int:
        return self.next_offset if isolation is Isolation.UNCOMMITTED else self.stable

    async def read(self, cmd: Read) -> ReadResult:
        if (at_end := read_at_end(self, cmd)) is not None:
            await trio.lowlevel.checkpoint_if_cancelled()
            return at_end
        self.check_range(cmd.offset)
        waited = 0.0
        isolation = cmd.isolation
        if cmd.max_wait_ms > 0 and not has_bytes(self, cmd.offset, cmd.min_bytes, isolation):
            waited = await wait_for(self, cmd.offset, cmd.min_bytes, cmd.max_wait_ms, isolation)
            self.check_range(cmd.offset)
        else:
            # Cancellable, but no trip through the scheduler: a fetch reads up to thousands of
            # partitions in a row, and the listener yields when it writes the answer.
            await trio.lowlevel.checkpoint_if_cancelled()
        batches: tuple[MessageBatch, ...] = ()
        end = self.visible(isolation)
        if cmd.offset < end:  # a consumer polling at the end costs no I/O
            batches = read_batches(
                self, cmd.offset, cmd.max_messages, cmd.max_bytes, cmd.whole_batches, end, isolation
            )
            if (
                not batches
                and cmd.max_wait_ms > 0
                and cmd.max_messages > 0  # 0: a wait for data, not a read of it
                and isolation is Isolation.CLEAN
            ):
                # All there was to see were markers and aborted batches: a long poll waits for
                # what comes after them (else a subscription would read them again and again).
                batches, more = await wait_past_skipped(self, cmd, waited)
                waited += more
                end = self.visible(isolation)
        aborted: tuple[tuple[int, int], ...] = ()
        if isolation is Isolation.COMMITTED and self.txns.aborted and batches:
            last = batches[-1]
            upto = (last.wire.base_offset + last.wire.count) if last.wire else end
            aborted = self.txns.aborted_between(cmd.offset, upto)
        return ReadResult(
            batches=batches,
            high_watermark=self.next_offset,
            log_start_offset=self.log_start,
            waited_s=waited,
            last_stable_offset=self.stable,
            aborted=aborted,
        )

    def list_offsets(
        self, spec: OffsetSpec, timestamp_us: int, isolation: Isolation = Isolation.UNCOMMITTED
    ) -> ListOffsetsResult:
        self.check_open()
        if spec is OffsetSpec.EARLIEST:
            return ListOffsetsResult(offset=self.log_start)
        if spec is OffsetSpec.LATEST:
            return ListOffsetsResult(offset=self.visible(isolation))
        if spec is OffsetSpec.TIMESTAMP:
            for seg in self.segments:
                found = seg.find_timestamp(timestamp_us)
                if found is not None:
                    return ListOffsetsResult(offset=found[0], timestamp_us=found[1])
            return ListOffsetsResult(offset=None)
        best = max(self.segments, key=lambda s: s.max_ts)  # the first of equals: max() keeps it
        if best.max_ts == NO_TIMESTAMP or best.size == 0:
            return ListOffsetsResult(offset=None)
        offset, ts = best.max_timestamp_record()
        return ListOffsetsResult(offset=offset, timestamp_us=ts)

    # --- retention and purge -----------------------------------------------------------------

    def enforce_retention(self, now_us: int) -> int:
        """Delete whole sealed segments past retention; returns how many went."""
        cfg = self.config
        dropped = 0
        while len(self.segments) > 1:
            seg = self.segments[0]
            expired = cfg.retention_ms is not None and seg.max_ts < now_us - cfg.retention_ms * 1000
            oversize = (
                cfg.retention_bytes is not None
                and self.size_bytes - seg.size >= cfg.retention_bytes
            )
            if not (expired or oversize):
                break
            self._delete_first()
            dropped += 1
        if dropped:
            self.txns.trim(self.log_start)
        return dropped

    def _delete_first(self) -> None:
        seg = self.segments.pop(0)
        self.bases.pop(0)
        self._dirty.pop(seg.base_offset, None)
        self.size_bytes -= seg.size
        seg.delete()
        self._dir_dirty = True

    def delete_before(self, offset: int) -> int:
        """Kafka DeleteRecords: records below ``offset`` (-1: the high watermark) are gone; the
        new log start is returned. Raises OffsetOutOfRange past the high watermark."""
        self.check_open()
        if offset == -1:
            offset = self.next_offset
        if not 0 <= offset <= self.next_offset:
            raise OffsetOutOfRange(
                f"offset {offset} outside [{self.log_start}, {self.next_offset}]",
                log_start=self.log_start,
                log_end=self.next_offset,
            )
        if offset <= self.log_start:
            return self.log_start
        write_json(os.path.join(self.dir, LOG_START), {"offset": offset})
        self._start_floor = offset
        while len(self.segments) > 1 and self.segments[1].base_offset <= offset:
            self._delete_first()
        self.txns.trim(self.log_start)
        self._wake()
        return self.log_start

    def purge(self) -> None:
        """Drop every message; the next append gets the offset it would have had anyway."""
        self.check_open()
        if self.active.size:
            # The new, empty segment exists before any old one is deleted: a crash in between
            # leaves the old data readable, never a log without its next offset.
            self.add_segment(Segment.create(self.dir, self.next_offset))
            self._dir_dirty = True
        while len(self.segments) > 1:
            self._delete_first()
        self.producers.write_snapshot(os.path.join(self.dir, SNAPSHOT), self.next_offset)
        self.txns.trim(self.next_offset)
        self.txns.write_snapshot(self.dir, self.next_offset)
        self._wake()


def _check_sizes(messages: Sequence[Message], limit: int) -> None:
    for m in messages:
        size = message_size(m)
        if size > limit:
            raise MessageTooLarge(f"a message of {size} bytes is over the limit of {limit}")
