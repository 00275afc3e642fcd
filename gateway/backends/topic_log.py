"""A shared log made of a backend's own topic, through the canonical commands: what a backend
whose server has no other way to share state (Iggy) offers ``coordination.shared_groups``.

The log is topic ``coordination`` (one partition, kept an hour) in stream ``__streamgate``. One
task reads it from where the applier stands (``Read`` long-polls, as the backend emulates them),
handing every message's value to the applier with its offset and time (the writer's clock:
the canonical commands give no broker time); a write appends one message and returns once that
task applied it, so what a command reads afterwards includes it in the log's order. At start a
``sync`` record is written: once it comes back, the replay is complete and the log is ready. A
log truncated below the applier's position (retention) is read on from its earliest offset; the
applier copes (snapshots).
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from typing import Any, Final

import structlog
import trio

from gateway.backends.base import Backend, LogApplier
from gateway.model import (
    Append,
    BackendUnavailable,
    CreateTopic,
    GatewayError,
    ListOffsets,
    Message,
    MessageBatch,
    OffsetOutOfRange,
    OffsetSpec,
    Read,
    Timeout,
    Topic,
    TopicConfig,
    TopicExists,
)

log = structlog.get_logger("streamgate.backend")

LOG_TOPIC: Final = Topic("__streamgate", "coordination")
RETENTION_MS: Final = 3_600_000
_POLL_WAIT_MS: Final = 500
_RETRY_S: Final = 0.5
_WRITE_TIMEOUT_S: Final = 10.0


class TopicLog:
    def __init__(
        self,
        backend: Backend,
        applier: LogApplier,
        topic: Topic = LOG_TOPIC,
        *,
        retention_ms: int | None = RETENTION_MS,
    ) -> None:
        self.backend = backend
        self.retention_ms = retention_ms
        self.applier = applier
        self.topic = topic
        self._waiting: dict[str, trio.Event] = {}
        self._ready = False
        self.last_error = "coordination log not read yet"

    @property
    def ready(self) -> bool:
        return self._ready

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Follow the log until cancelled (started with the backend)."""
        task_status.started()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._follow)
            while True:
                try:
                    await self._create()
                    await self._append({"op": "sync"})
                    self._ready = True
                    return
                except GatewayError as exc:
                    self.last_error = f"coordination log: {exc.message}"
                    log.info("coordination log not available yet", error=exc.message)
                    await trio.sleep(_RETRY_S)

    async def write(self, record: dict[str, Any]) -> None:
        if not self._ready:
            raise BackendUnavailable(self.last_error)
        await self._append(record)

    async def caught_up(self) -> None:
        """Return once the applier applied every record the log held when this was called:
        what another gateway wrote before is seen here after."""
        end = await self.backend.list_offsets(
            ListOffsets(topic=self.topic, partition=0, spec=OffsetSpec.LATEST)
        )
        with trio.move_on_after(_WRITE_TIMEOUT_S):
            while self.applier.next_offset < (end.offset or 0):  # noqa: ASYNC110 (the follower)
                await trio.sleep(0.01)
            return
        raise Timeout("coordination log not read up to its end in time")

    async def _create(self) -> None:
        config = TopicConfig(retention_ms=self.retention_ms)
        cmd = CreateTopic(topic=self.topic, partitions=1, config=config, create_stream=True)
        with contextlib.suppress(TopicExists):  # made by another gateway, or before
            await self.backend.create_topic(cmd)

    async def _append(self, record: dict[str, Any]) -> None:
        rid = record.get("rid") or uuid.uuid4().hex
        data = json.dumps({**record, "rid": rid}, separators=(",", ":")).encode()
        seen = self._waiting[rid] = trio.Event()
        try:
            # Stamped here: the time every replica applies the record at (``Message``'s 0 would
            # let a backend leave it unset).
            batch = MessageBatch([Message(value=data, timestamp_us=time.time_ns() // 1000)])
            await self.backend.append(Append(topic=self.topic, partition=0, batch=batch))
            with trio.move_on_after(_WRITE_TIMEOUT_S):
                await seen.wait()
            if not seen.is_set():
                raise Timeout("coordination record appended but not read back in time")
        finally:
            self._waiting.pop(rid, None)

    async def _follow(self) -> None:
        while True:
            at = self.applier.next_offset
            try:
                result = await self.backend.read(
                    Read(topic=self.topic, partition=0, offset=at, max_wait_ms=_POLL_WAIT_MS)
                )
            except OffsetOutOfRange:
                earliest = await self.backend.list_offsets(
                    ListOffsets(topic=self.topic, partition=0, spec=OffsetSpec.EARLIEST)
                )
                self.applier.next_offset = max(at, earliest.offset or 0)
                continue
            except GatewayError as exc:  # not created yet, backend away: try again
                self.last_error = f"coordination log: {exc.message}"
                await trio.sleep(_RETRY_S)
                continue
            for batch in result.batches:
                for m in batch.messages:
                    if m.offset < self.applier.next_offset:
                        continue  # whole stored batches may start before the offset asked
                    rid = self.applier.apply_entry(
                        m.value, offset=m.offset, timestamp_ms=m.timestamp_us // 1000
                    )
                    self.applier.next_offset = m.offset + 1
                    seen = self._waiting.get(rid) if rid is not None else None
                    if seen is not None:
                        seen.set()


__all__ = ["LOG_TOPIC", "TopicLog"]
