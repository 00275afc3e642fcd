"""One RabbitMQ publisher (rabbitmq-stream.md §5 Publishing): DeclarePublisher, Publish v1
frames within the negotiated frame_max, and the wait for PublishConfirm / PublishError of every
publishing id. Publish v2 is never sent: 3.10 would close the connection (§10).

Without a reference, publishing ids are numbered per publisher from 1; a batch takes a
contiguous range, so a confirm finds its batch by bisection. With a reference (a RabbitMQ Stream
client's own, ``Append.publisher``) the broker deduplicates: the entries go with the client's
publishing ids, and an id not above the highest the stream stored for that reference is
confirmed without being stored, whichever gateway sent it; such a batch is found by its ids.

The publisher dies with its connection or its stream
(MetadataUpdate): every waiting batch then fails with ``BackendUnavailable`` (retriable).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from typing import Final

import trio

from gateway.backends.rabbitmq_stream.conn import Connection, check
from gateway.model import (
    BackendUnavailable,
    CorruptMessage,
    GatewayError,
    MessageTooLarge,
    Timeout,
)
from gateway.translate.rabbitmq_stream.errors import code_name, error_of
from protocols import rabbitmq_stream as rs
from protocols._wire import LocalProtocolError, Piece

CONFIRM_TIMEOUT_S: Final = 30.0  # for every confirm of one batch
_ITEM_OVERHEAD: Final = 8  # the publishing id before each entry


class Batch:
    """Publishing ids ``first .. first + count - 1``, waiting for their confirms."""

    __slots__ = ("count", "done", "error", "first", "ids", "on_error", "remaining", "run")

    def __init__(
        self,
        first: int,
        count: int,
        on_error: Callable[[], None] | None,
        ids: frozenset[int] | None = None,
    ) -> None:
        self.first = first
        self.count = count
        self.ids = ids  # a reference publisher's: the client's ids, maybe not contiguous
        # One entry for each id of first .. first + count - 1 (the publisher's own numbering,
        # or a client's ids that happen to be so: the usual case).
        self.run = ids is None or (len(ids) == count and max(ids) - first == count - 1)
        self.remaining = count
        self.done = trio.Event()
        self.error: GatewayError | None = None
        self.on_error = on_error  # called as soon as it fails (by the connection's reader)


class Publisher:
    def __init__(self, conn: Connection, stream: str, reference: str = "") -> None:
        self.conn = conn
        self.stream = stream
        self.reference = reference
        self.id = -1
        self.lock = trio.Lock()  # held while a batch is registered and sent: Publish in order
        self.error: GatewayError | None = None
        self._next_id = 1
        self._starts: list[int] = []
        self._batches: list[Batch] = []

    @classmethod
    async def declare(cls, conn: Connection, stream: str, reference: str = "") -> Publisher:
        publisher = cls(conn, stream, reference)
        publisher.id = conn.add_publisher(publisher)
        try:
            reply = await conn.call(
                lambda c: rs.DeclarePublisher(
                    correlation_id=c, publisher_id=publisher.id, reference=reference,
                    stream=stream,
                )
            )  # fmt: skip
            check(reply, f"DeclarePublisher on {stream!r}")
        except BaseException:
            conn.remove_publisher(publisher.id, delete=False)
            raise
        return publisher

    @property
    def usable(self) -> bool:
        return self.error is None and self.conn.alive

    @property
    def idle(self) -> bool:
        """No batch out or being sent: may be closed now."""
        return not self._batches and not self.lock.locked()

    def drop(self, why: GatewayError) -> None:
        self.conn.remove_publisher(self.id)
        self.closed(why)

    # --- publishing ------------------------------------------------------------------------------

    async def send(
        self,
        stored: bytes,
        on_error: Callable[[], None] | None = None,
        ids: Sequence[int] | None = None,
    ) -> Batch:
        """Send the entries ``stored`` (encoded as a chunk holds them; call with ``lock`` held
        so batches go out in order); then ``await wait(batch)``. ``on_error`` runs the moment
        the batch fails. ``ids``: a reference publisher's publishing ids, one per entry."""
        if self.error is not None:
            raise self.error
        if (ids is not None) != bool(self.reference):
            raise CorruptMessage("publishing ids go with a publisher reference, and only there")
        try:
            frames, count, largest = rs.publish_frames(
                self.id, self._next_id, stored, self.conn.frame_max, ids
            )
        except LocalProtocolError as exc:
            raise CorruptMessage(f"entries to publish: {exc}") from None
        if largest + _ITEM_OVERHEAD > self.conn.frame_max - rs.PUBLISH_HEAD_SIZE:
            raise MessageTooLarge(f"a {largest}-byte entry does not fit frame_max")
        if ids is not None:
            batch = Batch(min(ids, default=0), count, on_error, frozenset(ids))
        else:
            batch = Batch(self._next_id, count, on_error)
            self._next_id += count
        return await self._sent(batch, [(frame,) for frame in frames])

    async def send_as_sent(self, frame: bytes, ids: Sequence[int]) -> Batch:
        """A client's Publish v1 frame (after its size prefix; ``ids``: its publishing ids, in
        order) sent on as this publisher's, as it came; a reference publisher's only (the
        broker deduplicates by the client's ids). Call with ``lock`` held, then ``wait``."""
        if self.error is not None:
            raise self.error
        if not self.reference or not ids:
            raise CorruptMessage("a Publish frame goes on as sent with its reference and ids")
        try:
            head, rest = rs.readdressed(self.id, frame, len(ids))
        except LocalProtocolError as exc:
            raise CorruptMessage(f"entries to publish: {exc}") from None
        batch = Batch(min(ids), len(ids), None, frozenset(ids))
        return await self._sent(batch, [(head, rest)])  # one frame in two pieces

    async def _sent(self, batch: Batch, frames: Sequence[Sequence[Piece]]) -> Batch:
        """``batch`` registered, then its ``frames`` (each in pieces) to the outbox."""
        self._starts.append(batch.first)
        self._batches.append(batch)
        try:
            for pieces in frames:
                await self.conn.send_encoded(*pieces)
        except BaseException:
            # Cancelled or failed while the outbox was full: part of it may be out, the rest
            # never will, so no confirm settles it. Settled here, or the publisher is never
            # idle again and the batch is kept for as long as the connection lives.
            self._settle(batch, BackendUnavailable(f"Publish to {self.stream!r} not all sent"))
            raise
        return batch

    async def wait(self, batch: Batch) -> None:
        """Wait until the broker confirmed every entry of ``batch``; its failure otherwise."""
        with self.conn.watchdog.bound(CONFIRM_TIMEOUT_S):
            await batch.done.wait()
        if not batch.done.is_set():
            self._settle(batch, Timeout(f"no PublishConfirm within {CONFIRM_TIMEOUT_S} s"))
        if batch.error is not None:
            raise batch.error

    # --- the connection's callbacks (PublishSink) ----------------------------------------------

    def _find(self, publishing_id: int) -> Batch | None:
        if self.reference:  # the client's ids: few batches in flight, found by membership
            return next((b for b in self._batches if publishing_id in (b.ids or ())), None)
        i = bisect.bisect_right(self._starts, publishing_id) - 1
        if i < 0:
            return None
        batch = self._batches[i]
        return batch if publishing_id < batch.first + batch.count else None

    def _settle(self, batch: Batch, error: GatewayError | None = None) -> None:
        if error is not None and batch.error is None:
            batch.error = error
            if batch.on_error is not None:
                batch.on_error()
        batch.done.set()
        if self.reference:
            for i, kept in enumerate(self._batches):
                if kept is batch:
                    del self._starts[i], self._batches[i]
                    break
            return
        i = bisect.bisect_left(self._starts, batch.first)
        if i < len(self._batches) and self._batches[i] is batch:
            del self._starts[i], self._batches[i]

    def confirmed(self, ids: tuple[int, ...]) -> None:
        if ids and self._confirmed_run(ids):
            return
        batch: Batch | None = None
        for publishing_id in ids:  # mostly in order: the last batch found is tried first
            if batch is None or not _holds(batch, publishing_id):
                batch = self._find(publishing_id)
                if batch is None:
                    continue
            batch.remaining -= 1
            if batch.remaining <= 0:
                self._settle(batch)
                batch = None

    def _confirmed_run(self, ids: tuple[int, ...]) -> bool:
        """The usual confirm, settled in one step: distinct consecutive ids (in any order), all
        of one run batch. False (nothing done) for any other."""
        first, last = min(ids), max(ids)
        if last - first != len(ids) - 1:
            return False
        batch = self._find(first)
        if batch is None or not batch.run or last >= batch.first + batch.count:
            return False
        if len(ids) > 1 and len(set(ids)) != len(ids):
            return False
        batch.remaining -= len(ids)
        if batch.remaining <= 0:
            self._settle(batch)
        return True

    def failed(self, errors: tuple[rs.PublishingError, ...]) -> None:
        for e in errors:
            batch = self._find(e.publishing_id)
            if batch is not None:
                what = f"Publish to {self.stream!r} ({code_name(e.code)})"
                self._settle(batch, error_of(e.code, what))

    def closed(self, why: GatewayError) -> None:
        self.error = why
        for batch in list(self._batches):
            self._settle(batch, why)


def _holds(batch: Batch, publishing_id: int) -> bool:
    if batch.ids is not None:
        return publishing_id in batch.ids
    return batch.first <= publishing_id < batch.first + batch.count


__all__ = ["Batch", "Publisher"]
