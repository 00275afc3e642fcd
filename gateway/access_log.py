"""The per-command access log (DESIGN.md §5): one JSON object per line for every command the
gateway executes, failed ones included, read by the pipeline's ``report`` job (and by ``jq``).

Off unless ``access_log.path`` is set; the request path then pays one ``is None`` check per
command and per wire request. When on,
a command costs a small list appended to an in-memory queue that is never waited for: when it
holds ``capacity`` lines the new one is dropped and counted in
``streamgate_access_log_dropped_total{reason="queue_full"}``. A trio task hands the queue to a
worker thread every ``flush_interval_s`` (sooner once ``WAKE_AT`` lines wait), which turns the
lines into JSON and appends them to the file in one write, rotating by size like
``logging.handlers.RotatingFileHandler`` (``path``, ``path.1`` .. ``path.<backups>``, the
oldest deleted). Each flush reaches the OS (no fsync): a gateway killed with SIGKILL loses at most
the last interval's lines; on a graceful stop (SIGTERM: the listeners drain first) the rest is
written before the file closes. Under ``streamgate run --workers N`` each worker writes a file of
its own (``worker_path``): never two processes appending to, or rotating, one file.

One object per line, every key always present, null where it does not apply:

- ``time``: when the command finished, ISO-8601 UTC with microseconds:
  ``2025-01-31T12:00:00.123456Z``.
- ``protocol``: the listener's: ``kafka``, ``rabbitmq_stream``, ``iggy``, ``rog``.
- ``command``: the canonical command (``append``, ``read``, ``create_topic``...). An Iggy or
  RabbitMQ Stream request answered without one (a ``ping``, ``peer_properties``) has a line
  named by its wire command, as ``streamgate_command_duration_seconds`` labels it; so has one
  that the listener failed after its commands succeeded (an Iggy topic looked up by name and
  not found: ``list_streams`` ok, then ``poll_messages`` not_found).
- ``wire_command``: the protocol request it served (``produce``, ``fetch``, ``send_messages``;
  ``deliver`` for a RabbitMQ Stream subscription's reads).
- ``stream``, ``topic``, ``partition``: what the command names (``stream`` alone for stream and
  group commands).
- ``messages``, ``bytes``: of ``append`` (the batch sent, also when it failed) and of ``read``
  (what it returned). Bytes: a batch's wire or stored form when it travels in one (record
  framing included, the bytes that moved), else values plus keys.
- ``duration_s``: the wire request's time in the gateway, from the decoded request to its answer
  queued for the socket (translation, backend, encoding), long-poll waits excluded: the latency
  the gateway and its backend add (``gateway_overhead_seconds`` plus the commands' time). Every
  command of one request carries the same value; a command no wire request waits on (a
  subscription's delivery, single-active-consumer coordination) carries its own ``backend_s``.
- ``backend_s``: this command's own execution by the backend (or what the gateway puts in front
  of it: group coordinator, user store), long-poll wait excluded: the value
  ``streamgate_command_duration_seconds`` observes. Null for a request answered without one.
- ``waited_s``: reads: how long it long-polled for data (counted in neither duration); else null.
- ``outcome``: ``ok`` or ``error``; ``error_type``: the bounded error type when ``error``.
- ``user``: the authenticated user's name (for ``authenticate``, the name it tried), never a
  password, token or SASL payload; ``peer``: the client's ``host:port``. Null where the gateway
  issues the command itself.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

import structlog
import trio

from gateway.metrics import Metrics
from gateway.model import (
    Append,
    Authenticate,
    AuthenticateResult,
    Command,
    MessageBatch,
    ReadResult,
    Topic,
)

log = structlog.get_logger("streamgate.access_log")

CAPACITY = 65536  # lines waiting for the writer (a few MB at most)
WAKE_AT = 4096  # lines that wake the writer before its interval is up
FLUSH_INTERVAL_S = 0.25
CLOSE_WITHIN_S = 10.0  # the last write on shutdown

# A line as the request path leaves it: plain values, turned into JSON by the writer thread.
Line = list[Any]
_TIME, _PROTOCOL, _COMMAND, _WIRE, _STREAM, _TOPIC, _PARTITION = 0, 1, 2, 3, 4, 5, 6
_MESSAGES, _BYTES, _DURATION, _BACKEND, _WAITED, _ERROR, _USER, _PEER = range(7, 15)


@dataclass(slots=True)
class Client:
    """Whom a connection's lines name: its peer address and, once it authenticated, its user."""

    peer: str | None = None
    user: str | None = None


class LineContext(Protocol):
    """What a line takes from the request it belongs to (``gateway.router.RequestContext``)."""

    protocol: str
    wire_command: str
    client: Client | None
    waited_s: float
    # The lines of the commands run so far, while the wire request is being served (they get
    # its duration when it ends); None once it ended or where no wire request waits.
    access_lines: list[Line] | None


def worker_path(path: str, index: int) -> str:
    """The file of ``--workers``' worker ``index``: ``access.jsonl`` -> ``access.worker0.jsonl``."""
    p = Path(path)
    return str(p.with_name(f"{p.stem}.worker{index}{p.suffix}"))


def batch_bytes(batch: MessageBatch) -> int:
    wire = batch.wire
    if wire is not None:
        return len(wire.data)
    return sum(len(m.value) + len(m.key or b"") for m in batch.messages)


class AccessLog:
    def __init__(
        self,
        path: str,
        *,
        max_bytes: int,
        backups: int,
        metrics: Metrics,
        capacity: int = CAPACITY,
        flush_interval_s: float = FLUSH_INTERVAL_S,
    ) -> None:
        self.path = path
        self._file = RotatingFile(path, max_bytes=max_bytes, backups=backups)
        self._queue: list[Line] = []
        self._capacity = capacity
        self._wake_at = min(WAKE_AT, max(1, capacity // 2))
        self._wake = trio.Event()
        self._interval = flush_interval_s
        self._writing = trio.Lock()  # one batch at a time, in order
        self._full = metrics.access_log_dropped.labels("queue_full")
        self._write_error = metrics.access_log_dropped.labels("write_error")
        self._failing = False
        self._stamp_s = -1
        self._stamp = ""

    # --- the request path (trio thread) ----------------------------------------------------

    def command(
        self,
        cmd: Command[Any],
        ctx: LineContext,
        result: object,
        backend_s: float,
        waited_s: float | None,
        error_type: str,
    ) -> None:
        """One executed command: queued now, or held by its wire request until it ends."""
        stream: str | None = None
        name: str | None = None
        topic = getattr(cmd, "topic", None)
        if isinstance(topic, Topic):
            stream, name = topic.stream, topic.name
        else:
            stream = getattr(cmd, "stream", None)
        messages: int | None = None
        size: int | None = None
        if isinstance(cmd, Append):
            messages, size = len(cmd.batch), batch_bytes(cmd.batch)
        elif isinstance(result, ReadResult):
            messages = size = 0
            for batch in result.batches:
                messages += len(batch)
                size += batch_bytes(batch)
        client = ctx.client
        user, peer = (None, None) if client is None else (client.user, client.peer)
        if isinstance(cmd, Authenticate):  # the name it logs in as; never its secret
            user = result.username if isinstance(result, AuthenticateResult) else cmd.username
        line = [
            time.time_ns(), ctx.protocol, cmd.name, ctx.wire_command, stream, name,
            getattr(cmd, "partition", None), messages, size, backend_s, backend_s, waited_s,
            error_type, user or None, peer,
        ]  # fmt: skip
        held = ctx.access_lines
        if held is not None:
            held.append(line)
        else:
            self._put(line)

    def request_done(self, ctx: LineContext, elapsed_s: float, name: str, error: str) -> None:
        """The wire request ended after ``elapsed_s``: its commands' lines get its duration. A
        request the listener ``name``s (it answers some by itself) gets a line of its own when
        no command ran, or when it answered with an error none of them had (an Iggy topic
        looked up by name and not there: the lookup succeeded, the listener refused)."""
        held = ctx.access_lines
        ctx.access_lines = None  # commands still running on this context log on their own
        duration = max(0.0, elapsed_s - ctx.waited_s)
        if held:
            for line in held:
                line[_DURATION] = max(duration, line[_BACKEND])
                self._put(line)
        if name and (not held or (error and all(line[_ERROR] != error for line in held))):
            client = ctx.client
            user, peer = (None, None) if client is None else (client.user, client.peer)
            self._put([
                time.time_ns(), ctx.protocol, name, ctx.wire_command, None, None, None, None,
                None, duration, None, None, error, user, peer,
            ])  # fmt: skip

    def _put(self, line: Line) -> None:
        queue = self._queue
        if len(queue) >= self._capacity:
            self._full.inc()
            return
        queue.append(line)
        if len(queue) == self._wake_at:
            self._wake.set()

    # --- the writer ------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Write queued lines until cancelled, then what is left, and close the file."""
        try:
            await trio.to_thread.run_sync(self._file.open)
        except OSError as exc:
            why = exc.strerror or str(exc)
            raise OSError(f"access_log.path: cannot open {self.path}: {why}") from exc
        log.info("access log", path=self.path)
        task_status.started()
        try:
            while True:
                with trio.move_on_after(self._interval):
                    await self._wake.wait()
                await self.flush()
        finally:
            with trio.move_on_after(CLOSE_WITHIN_S) as scope:
                scope.shield = True
                await self.flush()
            self._file.close()

    async def flush(self) -> None:
        """Write every line queued so far (in a worker thread)."""
        async with self._writing:
            if self._wake.is_set():
                self._wake = trio.Event()
            lines, self._queue = self._queue, []
            if lines:
                # Taken off the queue, so written even when cancelled (a thread cannot be).
                with trio.CancelScope(shield=True):
                    await trio.to_thread.run_sync(self._write, lines)

    def _write(self, lines: list[Line]) -> None:
        encoded = [self.format(line).encode() for line in lines]
        try:
            self._file.write(encoded)
        except OSError as exc:
            self._write_error.inc(len(lines))
            if not self._failing:  # once per failing spell, not once per batch
                log.error("access log write failed", path=self.path, error=str(exc))
            self._failing = True
            return
        if self._failing:
            log.info("access log writing again", path=self.path)
            self._failing = False

    def format(self, line: Line) -> str:
        """One line of the file (the writer thread's only caller but tests). Written out rather
        than through ``json.dumps`` of a dict: a third of the cost, the same JSON (every string
        escaped by json's own encoder, ASCII only)."""
        seconds, ns = divmod(line[_TIME], 1_000_000_000)
        if seconds != self._stamp_s:
            self._stamp_s = seconds
            self._stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
        error = line[_ERROR]
        return (
            f'{{"time":"{self._stamp}.{ns // 1000:06d}Z","protocol":{_str(line[_PROTOCOL])},'
            f'"command":{_str(line[_COMMAND])},"wire_command":{_str(line[_WIRE])},'
            f'"stream":{_str(line[_STREAM])},"topic":{_str(line[_TOPIC])},'
            f'"partition":{_int(line[_PARTITION])},"messages":{_int(line[_MESSAGES])},'
            f'"bytes":{_int(line[_BYTES])},"duration_s":{_seconds(line[_DURATION])},'
            f'"backend_s":{_seconds(line[_BACKEND])},"waited_s":{_seconds(line[_WAITED])},'
            f'"outcome":"{"error" if error else "ok"}","error_type":{_str(error or None)},'
            f'"user":{_str(line[_USER])},"peer":{_str(line[_PEER])}}}\n'
        )


_quote = json.encoder.encode_basestring_ascii  # json's own C string encoder


def _str(value: str | None) -> str:
    return "null" if value is None else _quote(value)


def _int(value: int | None) -> str:
    return "null" if value is None else str(int(value))


def _seconds(value: float | None) -> str:
    return "null" if value is None else f"{value:.6f}"


class RotatingFile:
    """Whole lines appended to ``path``; a line that would take it past ``max_bytes`` goes to a
    new file, the full one renamed ``path.1`` (``path.1`` -> ``path.2``...; beyond ``backups``
    deleted; with ``backups`` 0 the full file is dropped). ``max_bytes`` 0: never rotated.

    logging.handlers.RotatingFileHandler's naming and order, written here because that handler
    takes one LogRecord at a time (a ``stat`` and a flush per line, and a root-logger set-up to
    keep it out of), where this takes a batch in one write and keeps the size in a counter."""

    def __init__(self, path: str, *, max_bytes: int, backups: int) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.backups = backups
        self._file: IO[bytes] | None = None
        self._size = 0

    def open(self) -> None:
        # Unbuffered: each batch is one write(2) of whole lines, nothing left to flush at close.
        self._file = open(self.path, "ab", buffering=0)  # noqa: SIM115 (open until close())
        self._size = self._file.seek(0, os.SEEK_END)

    def close(self) -> None:
        f, self._file = self._file, None
        if f is not None:
            f.close()

    def write(self, lines: list[bytes]) -> None:
        if self._file is None:  # a write failed: try a fresh file
            self.open()
        size, limit, start = self._size, self.max_bytes, 0
        try:
            for i, line in enumerate(lines):
                if limit and size and size + len(line) > limit:
                    self._append(lines[start:i])
                    self._rotate()
                    size, start = 0, i
                size += len(line)
            self._append(lines[start:])
        except OSError:
            self.close()
            raise
        self._size = size

    def _append(self, lines: list[bytes]) -> None:
        assert self._file is not None
        data = memoryview(b"".join(lines))
        while data:
            data = data[self._file.write(data) :]

    def _rotate(self) -> None:
        self.close()
        path = self.path
        if self.backups > 0:
            for i in range(self.backups - 1, 0, -1):
                if os.path.exists(f"{path}.{i}"):
                    os.replace(f"{path}.{i}", f"{path}.{i + 1}")
            with contextlib.suppress(FileNotFoundError):  # removed by hand meanwhile
                os.replace(path, f"{path}.1")
        else:
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)
        self.open()


__all__ = ["AccessLog", "Client", "Line", "LineContext", "RotatingFile", "worker_path"]
