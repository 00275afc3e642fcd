"""Consumer offsets: the NEXT offset to read per (group, stream, topic, partition), plus metadata.

An append-only file ``consumer-offsets.log`` at the root, replayed on open. Records,
little-endian::

    u32 body length · u32 CRC32C(body) · body
    body: u8 op (1 commit, 2 delete, 3 commit with a leader epoch) · u16 len, group UTF-8
          · u16 len, stream · u16 len, topic · u32 partition
          · [commit: i64 offset · u32 len, metadata UTF-8]
          · [commit with a leader epoch: i64 offset · i32 leader epoch · u32 len, metadata]

Op 3 is written only for a commit that names a leader epoch (Kafka's committed_leader_epoch,
KIP-320, which OffsetFetch answers back); a store written by a gateway without it cannot be
read by an older one past its first such record.

A torn or corrupt tail (a crash mid-write) is truncated on open. When the file grows well past
what the live entries need, it is rewritten with only those (tmp + fsync + rename + fsync of the
directory), so a crash during compaction leaves either the old or the new file, both complete.
Writes follow the backend's fsync policy through a ``GroupCommit`` like the logs.
"""

from __future__ import annotations

import contextlib
import os
import struct
from typing import Final

import crc32c
import structlog

from .faults import storage_error
from .files import fsync_dir
from .fsync import GroupCommit

log = structlog.get_logger()

FILE_NAME: Final = "consumer-offsets.log"
_COMMIT: Final = 1
_DELETE: Final = 2
_COMMIT_EPOCH: Final = 3
_COMPACT_MIN_BYTES: Final = 1 << 20
_FRAME = struct.Struct("<II")
_U16 = struct.Struct("<H")
_TAIL = struct.Struct("<Iq")  # partition, offset
_EPOCH = struct.Struct("<i")

Key = tuple[str, str, str, int]  # group, stream, topic, partition
Value = tuple[int, str, int]  # offset, metadata, leader epoch (-1: none)


def _str(s: str) -> bytes:
    b = s.encode("utf-8", "surrogatepass")
    return _U16.pack(len(b)) + b


def encode_record(
    op: int, key: Key, offset: int = 0, metadata: str = "", leader_epoch: int = -1
) -> bytes:
    group, stream, topic, partition = key
    if op == _COMMIT and leader_epoch != -1:
        op = _COMMIT_EPOCH
    body = bytes((op,)) + _str(group) + _str(stream) + _str(topic)
    if op in (_COMMIT, _COMMIT_EPOCH):
        meta = metadata.encode("utf-8", "surrogatepass")
        body += _TAIL.pack(partition, offset)
        if op == _COMMIT_EPOCH:
            body += _EPOCH.pack(leader_epoch)
        body += struct.pack("<I", len(meta)) + meta
    else:
        body += struct.pack("<I", partition)
    return _FRAME.pack(len(body), crc32c.crc32c(body)) + body


def _decode_body(body: bytes) -> tuple[int, Key, Value]:
    op = body[0]
    pos = 1
    parts = []
    for _ in range(3):
        (n,) = _U16.unpack_from(body, pos)
        parts.append(body[pos + 2 : pos + 2 + n].decode("utf-8", "surrogatepass"))
        pos += 2 + n
    if op in (_COMMIT, _COMMIT_EPOCH):
        partition, offset = _TAIL.unpack_from(body, pos)
        pos += _TAIL.size
        epoch = -1
        if op == _COMMIT_EPOCH:
            (epoch,) = _EPOCH.unpack_from(body, pos)
            pos += _EPOCH.size
        (n,) = struct.unpack_from("<I", body, pos)
        meta = body[pos + 4 : pos + 4 + n].decode("utf-8", "surrogatepass")
        return _COMMIT, (parts[0], parts[1], parts[2], partition), (offset, meta, epoch)
    (partition,) = struct.unpack_from("<I", body, pos)
    return op, (parts[0], parts[1], parts[2], partition), (0, "", -1)


class OffsetStore:
    def __init__(self, root: str) -> None:
        self.path = os.path.join(root, FILE_NAME)
        self.live: dict[Key, Value] = {}
        self._live_bytes = 0
        self._size = 0
        self._fd = -1
        self._dirty = False
        self.commit = GroupCommit(self._collect_dirty)

    def open(self) -> None:
        """Replay the file (blocking); a torn tail is cut off."""
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        with open(self.path, "rb") as f:
            data = f.read()
        pos = 0
        while pos + _FRAME.size <= len(data):
            n, crc = _FRAME.unpack_from(data, pos)
            body = data[pos + _FRAME.size : pos + _FRAME.size + n]
            if n == 0 or len(body) != n or crc32c.crc32c(body) != crc:
                break
            try:
                op, key, value = _decode_body(body)
            except (struct.error, UnicodeDecodeError, IndexError):
                break
            self._apply(op, key, value)
            pos += _FRAME.size + n
        if pos != len(data):
            log.warning(
                "embedded.offsets_tail_truncated",
                path=self.path,
                at=pos,
                dropped_bytes=len(data) - pos,
            )
            os.ftruncate(self._fd, pos)
        self._size = pos

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def _apply(self, op: int, key: Key, value: Value) -> None:
        old = self.live.pop(key, None)
        if old is not None:
            self._live_bytes -= self._cost(key, old[1])
        if op == _COMMIT:
            self.live[key] = value
            self._live_bytes += self._cost(key, value[1])

    @staticmethod
    def _cost(key: Key, meta: str) -> int:
        return 40 + len(key[0]) + len(key[1]) + len(key[2]) + len(meta)

    def _write(self, data: bytes) -> None:
        """Write records (small: one syscall); the caller applies them once they are written."""
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self._fd, view) :]
        except OSError as exc:
            # Disk full mid-record: leave no partial record behind (recovery would drop it and
            # every commit after it as a torn tail).
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, self._size)
            raise storage_error(exc, f"writing {self.path}") from exc
        self._size += len(data)
        self._dirty = True

    def _written(self) -> int:
        """The sequence ``GroupCommit`` waits for; compacts when the file is mostly dead."""
        seq = self.commit.note_write()
        if self._size > max(_COMPACT_MIN_BYTES, 4 * self._live_bytes):
            try:
                self._compact()
            except OSError:
                # Disk full: the write itself went through; compaction is retried by a later
                # write, and its half-written copy must not keep the space.
                with contextlib.suppress(OSError):
                    os.unlink(self.path + ".tmp")
        return seq

    def put(self, key: Key, offset: int, metadata: str, leader_epoch: int = -1) -> int:
        self._write(encode_record(_COMMIT, key, offset, metadata, leader_epoch))
        self._apply(_COMMIT, key, (offset, metadata, leader_epoch))
        return self._written()

    def get(self, key: Key) -> Value | None:
        return self.live.get(key)

    def delete(self, keys: list[Key]) -> int | None:
        keys = [k for k in keys if k in self.live]
        if not keys:
            return None
        self._write(b"".join(encode_record(_DELETE, k) for k in keys))
        for k in keys:
            self._apply(_DELETE, k, (0, "", -1))
        return self._written()

    def _where(self, stream: str, topic: str | None, min_partition: int = 0) -> list[Key]:
        return [
            k
            for k in self.live
            if k[1] == stream and (topic is None or k[2] == topic) and k[3] >= min_partition
        ]

    def delete_where(
        self, stream: str, topic: str | None = None, min_partition: int = 0
    ) -> int | None:
        """Forget the offsets of a deleted stream, topic, or of partitions >= min_partition."""
        return self.delete(self._where(stream, topic, min_partition))

    def copy_where(
        self, stream: str, topic: str | None, new_stream: str, new_topic: str | None
    ) -> int | None:
        """Commit the offsets of a stream (``topic`` None) or topic again under its new name.

        A rename copies before its metadata names the new name and deletes the old keys after:
        a crash in between leaves one set orphaned, which the next open forgets. Keys already
        copied with the same value are not written again.
        """
        copies = (
            ((g, new_stream, t if new_topic is None else new_topic, p), self.live[(g, s, t, p)])
            for g, s, t, p in self._where(stream, topic)
        )
        moved = [(k, value) for k, value in copies if self.live.get(k) != value]
        if not moved:
            return None
        self._write(b"".join(encode_record(_COMMIT, k, *value) for k, value in moved))
        for k, value in moved:
            self._apply(_COMMIT, k, value)
        return self._written()

    def group_count(self) -> int:
        return len({k[0] for k in self.live})

    def _compact(self) -> None:
        tmp = self.path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(b"".join(encode_record(_COMMIT, k, *v) for k, v in self.live.items()))
            f.flush()
            os.fsync(f.fileno())
            size = f.tell()
        os.replace(tmp, self.path)
        fsync_dir(os.path.dirname(self.path))
        os.close(self._fd)
        self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND)
        self._size = size
        self._dirty = False  # everything live is on disk now; pending waiters get the next fsync

    def _collect_dirty(self) -> list[int]:
        if not self._dirty or self._fd < 0:
            return []
        self._dirty = False
        return [os.dup(self._fd)]
