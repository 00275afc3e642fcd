"""Where the transaction coordinator keeps its state: ``transactions.log`` in the store's root,
append-only, one record per change of one transactional id (Kafka's ``__transaction_state``
log), so a change costs one small write and an fsync however many ids there are.

A record: ``u32 length · u32 CRC32C(body) · body``, the body a JSON object ``{"id": <the
transactional id>, "txn": <its state, or null when it is forgotten>, "next": <the next producer
id to give out>}``. Replayed on open, the last record of an id wins; a torn or corrupt tail (a
crash mid-write) is cut off. When the file is four times what the live ids need (and over
1 MiB), it is rewritten with one record per live id (tmp + fsync + rename + fsync of the
directory): a crash then leaves the old file or the new one, each complete.

Blocking: the coordinator calls these in a worker thread.
"""

from __future__ import annotations

import contextlib
import json
import os
import struct
from collections.abc import Callable
from typing import Any, Final

import crc32c
import structlog

from .files import fsync_dir

log = structlog.get_logger()

FILE_NAME: Final = "transactions.log"
_FRAME = struct.Struct("<II")
_COMPACT_MIN_BYTES: Final = 1 << 20


def _record(tid: str, txn: dict[str, Any] | None, next_id: int) -> bytes:
    body = json.dumps({"id": tid, "txn": txn, "next": next_id}, sort_keys=True).encode()
    return _FRAME.pack(len(body), crc32c.crc32c(body)) + body


class TxnLog:
    def __init__(self, root: str) -> None:
        self.path = os.path.join(root, FILE_NAME)
        self._size = 0
        self._live_bytes: dict[str, int] = {}

    def load(self) -> tuple[dict[str, dict[str, Any]], int]:
        """Every live id's state, and the next producer id (0: none recorded)."""
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            data = b""
        states: dict[str, dict[str, Any]] = {}
        next_id = pos = 0
        while pos + _FRAME.size <= len(data):
            n, crc = _FRAME.unpack_from(data, pos)
            body = data[pos + _FRAME.size : pos + _FRAME.size + n]
            if len(body) != n or crc32c.crc32c(body) != crc:
                break
            try:
                rec = json.loads(body)
                tid, txn, next_id = str(rec["id"]), rec["txn"], max(next_id, int(rec["next"]))
            except (ValueError, KeyError, TypeError):
                break
            if txn is None:
                states.pop(tid, None)
                self._live_bytes.pop(tid, None)
            else:
                states[tid] = txn
                self._live_bytes[tid] = _FRAME.size + n
            pos += _FRAME.size + n
        if pos != len(data):
            log.warning("embedded.transactions_tail_truncated", path=self.path, at=pos,
                        dropped_bytes=len(data) - pos)  # fmt: skip
            os.truncate(self.path, pos)
        self._size = pos
        return states, next_id

    def write(
        self,
        tid: str,
        txn: dict[str, Any] | None,
        next_id: int,
        live: Callable[[], dict[str, dict[str, Any]]],
        *,
        sync: bool = True,
    ) -> None:
        """One id's new state (None: forgotten), durable on return unless not ``sync`` (then
        with the next record that is); ``live`` gives every live id's, called only for a
        compaction."""
        record = _record(tid, txn, next_id)
        with open(self.path, "ab") as f:
            try:
                f.write(record)
                f.flush()
                if sync:
                    os.fsync(f.fileno())
            except OSError:
                # leave no partial record behind: the next open would cut every later one
                with contextlib.suppress(OSError):
                    f.truncate(self._size)
                raise
        if self._size == 0:
            fsync_dir(os.path.dirname(self.path))  # the file's name is durable too
        self._size += len(record)
        if txn is None:
            self._live_bytes.pop(tid, None)
        else:
            self._live_bytes[tid] = len(record)
        if self._size > max(_COMPACT_MIN_BYTES, 4 * sum(self._live_bytes.values())):
            self._compact(live(), next_id)

    def _compact(self, live: dict[str, dict[str, Any]], next_id: int) -> None:
        tmp = self.path + ".tmp"
        records = {tid: _record(tid, txn, next_id) for tid, txn in live.items()}
        with open(tmp, "wb") as f:
            f.write(b"".join(records.values()))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        fsync_dir(os.path.dirname(self.path))
        self._live_bytes = {tid: len(r) for tid, r in records.items()}
        self._size = sum(self._live_bytes.values())


__all__ = ["FILE_NAME", "TxnLog"]
