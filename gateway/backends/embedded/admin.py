"""Stream, topic and partition commands: validation, ids, file work, then the in-memory change.

Each command holds the store's metadata lock, does its file work in a worker thread (mkdir,
JSON tmp + fsync + rename, directory fsyncs), and only then changes the catalog in memory, so a
reader never sees a topic whose files do not exist yet. Deletions go the other way: out of the
catalog first (long-pollers wake and raise), then an atomic rename into the trash.

Renames keep every directory: the name lives in stream.json/topic.json (see ``catalog``), so a
rename is one atomic JSON replace, open partitions keep their paths and long-pollers keep
waiting on the same log (an append under the new name wakes them). Committed offsets, keyed by
name, are copied under the new name before the JSON names it and the old keys are forgotten
after (``_commit_metadata``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Final

import trio

from gateway.model import (
    CreateStream,
    CreateTopic,
    DeletePartitions,
    InvalidPartitions,
    StreamExists,
    Topic,
    TopicConfig,
    TopicExists,
    UnknownPartition,
    UnknownTopic,
    check_name,
)

from . import catalog, files
from .catalog import StreamEntry, TopicEntry
from .faults import storage_error
from .partition import Partition
from .store import Store

MAX_PARTITIONS: Final = 10_000  # per topic; a typo of a few zeros should not make a million dirs

Name = tuple[str, str | None]  # (stream, topic), or (stream, None) for a whole stream


class Admin:
    def __init__(self, store: Store) -> None:
        self.store = store

    async def create_stream(self, cmd: CreateStream) -> StreamEntry:
        check_name("stream", cmd.stream)
        async with self.store.lock:
            self.store.check_open()
            return await self._create_stream(cmd.stream, cmd.id)

    async def _create_stream(self, name: str, wanted: int | None) -> StreamEntry:
        streams = self.store.streams
        if name in streams:
            raise StreamExists(f"stream {name!r} already exists")
        sid = catalog.free_id((s.id for s in streams.values()), wanted)
        if sid is None or sid < 0:
            raise StreamExists(f"stream id {wanted} is taken")
        entry = StreamEntry(name, sid, "", self.store.now_us())

        def create() -> None:
            entry.dir = files.make_dir(self.store.root, name)
            try:
                files.write_json(os.path.join(entry.dir, catalog.STREAM_FILE), entry.meta())
            except BaseException:
                files.remove_tree(entry.dir)
                raise

        with _os_errors():
            await trio.to_thread.run_sync(create)
        streams[name] = entry
        return entry

    async def delete_stream(self, name: str) -> None:
        async with self.store.lock:
            stream = self.store.stream(name)
            del self.store.streams[name]
            for topic in stream.topics.values():
                _drop(topic.partitions, UnknownTopic, f"topic {topic.name!r} was deleted")
            await self.store.durable(self.store.offsets.delete_where(name))
            await self.store.trash(stream.dir)

    async def update_stream(self, name: str, new_name: str) -> StreamEntry:
        check_name("stream", new_name)
        async with self.store.lock:
            streams = self.store.streams
            stream = self.store.stream(name)
            if new_name != stream.name and new_name in streams:
                raise StreamExists(f"stream {new_name!r} already exists")
            path = os.path.join(stream.dir, catalog.STREAM_FILE)
            meta = stream.meta(name=new_name)

            def rename() -> None:
                del streams[stream.name]
                stream.name = new_name
                streams[new_name] = stream

            await self._commit_metadata((name, None), (new_name, None), path, meta, rename)
            return stream

    async def purge_stream(self, name: str) -> None:
        async with self.store.lock:
            topics = self.store.stream(name).topics.values()
            await self._purge([p for topic in topics for p in topic.partitions])

    async def create_topic(self, cmd: CreateTopic) -> TopicEntry:
        check_name("stream", cmd.topic.stream)
        check_name("topic", cmd.topic.name)
        catalog.check_config(cmd.config)
        if not 1 <= cmd.partitions <= MAX_PARTITIONS:
            raise InvalidPartitions(f"partitions must be in 1..{MAX_PARTITIONS}")
        async with self.store.lock:
            self.store.check_open()
            if cmd.topic.stream in self.store.streams or not cmd.create_stream:
                stream = self.store.stream(cmd.topic.stream)
                return await self._create_topic(cmd, stream)
            stream = await self._create_stream(cmd.topic.stream, None)
            try:
                return await self._create_topic(cmd, stream)
            except BaseException:
                # The stream was made for this topic only: a failed create leaves nothing.
                del self.store.streams[stream.name]
                files.remove_tree(stream.dir)
                raise

    async def _create_topic(self, cmd: CreateTopic, stream: StreamEntry) -> TopicEntry:
        """Under the store's lock (create_topic)."""
        if cmd.topic.name in stream.topics:
            raise TopicExists(f"topic {cmd.topic} already exists")
        tid = catalog.free_id((t.id for t in stream.topics.values()), cmd.id)
        if tid is None or tid < 0:
            raise TopicExists(f"topic id {cmd.id} is taken in stream {stream.name!r}")
        topic = TopicEntry(
            name=cmd.topic.name,
            id=tid,
            dir="",
            created_at_us=self.store.now_us(),
            config=cmd.config,
            log_config=catalog.effective(cmd.config, self.store.defaults),
        )

        def create() -> None:
            topic.dir = files.make_dir(stream.dir, topic.name)
            try:
                topic.partitions = _new_partitions(topic, 0, cmd.partitions)
                files.write_json(os.path.join(topic.dir, catalog.TOPIC_FILE), topic.meta())
            except BaseException:
                # Out of descriptors, disk full...: remove what was made, or every retry
                # of the client leaves another directory behind (make_dir's ~<n>).
                for part in topic.partitions:
                    part.close()
                files.remove_tree(topic.dir)
                raise

        with _os_errors():
            await trio.to_thread.run_sync(create)
        stream.topics[topic.name] = topic
        return topic

    async def delete_topic(self, name: Topic) -> None:
        async with self.store.lock:
            stream = self.store.stream(name.stream)
            topic = stream.topic(name.name)
            del stream.topics[topic.name]
            _drop(topic.partitions, UnknownTopic, f"topic {name} was deleted")
            await self.store.durable(self.store.offsets.delete_where(stream.name, topic.name))
            await self.store.trash(topic.dir)

    async def update_topic(
        self,
        name: Topic,
        config: TopicConfig,
        new_name: str | None = None,
        reset: frozenset[str] = frozenset(),
    ) -> TopicEntry:
        """Change the settings ``config`` names, reset those ``reset`` names and, with
        ``new_name``, rename: one topic.json."""
        catalog.check_config(config)
        if new_name is not None:
            check_name("topic", new_name)
        async with self.store.lock:
            stream = self.store.stream(name.stream)
            topic = stream.topic(name.name)
            target = new_name or topic.name
            if target != topic.name and target in stream.topics:
                raise TopicExists(f"topic {Topic(stream.name, target)} already exists")
            merged = catalog.merge_config(topic.config, config, reset)
            path = os.path.join(topic.dir, catalog.TOPIC_FILE)
            meta = topic.meta(config=merged, name=target)

            def apply() -> None:
                topic.config = merged
                topic.log_config = catalog.effective(merged, self.store.defaults)
                for part in topic.partitions:
                    part.config = topic.log_config
                del stream.topics[topic.name]
                topic.name = target
                stream.topics[target] = topic

            old, new = (stream.name, topic.name), (stream.name, target)
            await self._commit_metadata(old, new, path, meta, apply)
            return topic

    async def _commit_metadata(
        self, old: Name, new: Name, path: str, meta: dict[str, Any], apply: Callable[[], None]
    ) -> None:
        """Write a metadata file, then ``apply`` it in memory; on a rename, offsets follow.

        The offsets are copied under the new name and made durable BEFORE the JSON names it,
        whatever the fsync policy, so no crash leaves the renamed topic without its offsets;
        a crash before the JSON leaves copies the next open forgets (their names do not exist).
        """
        offsets = self.store.offsets
        if old == new:
            await trio.to_thread.run_sync(files.write_json, path, meta)
            apply()
            return
        try:
            if offsets.copy_where(*old, *new) is not None:
                await offsets.commit.flush()
            await trio.to_thread.run_sync(files.write_json, path, meta)
        except BaseException:
            offsets.delete_where(*new)  # the new name does not exist: every key there is ours
            raise
        apply()
        # Commits take no lock: those made under the old name meanwhile move too, in the same
        # step as the catalog, so none is lost.
        offsets.copy_where(*old, *new)
        await self.store.durable(offsets.delete_where(*old))

    async def create_partitions(self, name: Topic, total: int) -> TopicEntry:
        async with self.store.lock:
            topic = self.store.topic(name)
            current = len(topic.partitions)
            if not current < total <= MAX_PARTITIONS:
                raise InvalidPartitions(
                    f"{name} has {current} partitions; the new total must be more"
                    f" (and at most {MAX_PARTITIONS}), not {total}"
                )

            def create() -> list[Partition]:
                # Directories first, topic.json last: a crash in between leaves extra
                # directories, which the next open moves to the trash.
                parts = _new_partitions(topic, current, total)
                path = os.path.join(topic.dir, catalog.TOPIC_FILE)
                try:
                    files.write_json(path, topic.meta(partitions=total))
                except BaseException:
                    _remove_partitions(topic, parts, current, total)
                    raise
                return parts

            with _os_errors():
                topic.partitions.extend(await trio.to_thread.run_sync(create))
            return topic

    async def delete_partitions(self, cmd: DeletePartitions) -> TopicEntry:
        async with self.store.lock:
            topic = self.store.topic(cmd.topic)
            current = len(topic.partitions)
            if not 1 <= cmd.total < current:
                raise InvalidPartitions(
                    f"{cmd.topic} has {current} partitions; the new total must be in"
                    f" 1..{current - 1}, not {cmd.total}"
                )
            # topic.json first, directories last: the reverse of create_partitions.
            path = os.path.join(topic.dir, catalog.TOPIC_FILE)
            await trio.to_thread.run_sync(files.write_json, path, topic.meta(partitions=cmd.total))
            removed = topic.partitions[cmd.total :]
            del topic.partitions[cmd.total :]
            _drop(removed, UnknownPartition, f"{cmd.topic} now has {cmd.total} partitions")
            offsets = self.store.offsets
            await self.store.durable(offsets.delete_where(cmd.topic.stream, topic.name, cmd.total))
            for part in removed:
                await self.store.trash(part.dir)
            return topic

    async def purge_topic(self, name: Topic) -> None:
        async with self.store.lock:
            await self._purge(self.store.topic(name).partitions)

    async def _purge(self, parts: Iterable[Partition]) -> None:
        for part in parts:
            part.purge()
            if self.store.sync:
                await part.commit.flush()


@contextlib.contextmanager
def _os_errors() -> Iterator[None]:
    """A create that failed on the file system left nothing behind: the client may retry, so it
    gets a retriable error, not an internal one (out of descriptors: BackendUnavailable; disk
    full and the like: StorageError, faults.py)."""
    try:
        yield
    except OSError as exc:
        raise storage_error(exc, "creating files of the embedded store") from exc


def _new_partitions(topic: TopicEntry, first: int, total: int) -> list[Partition]:
    """Create partition directories (blocking); durable before the topic.json naming them.
    On failure nothing of them is left: files closed, directories removed."""
    parts: list[Partition] = []
    try:
        for n in range(first, total):
            parts.append(Partition.create(os.path.join(topic.dir, str(n)), n, topic.log_config))
        for p in parts:
            p.active.fsync()
            files.fsync_dir(p.dir)
        files.fsync_dir(topic.dir)
    except BaseException:
        _remove_partitions(topic, parts, first, total)
        raise
    return parts


def _remove_partitions(topic: TopicEntry, parts: list[Partition], first: int, total: int) -> None:
    for p in parts:
        p.close()
    for n in range(first, total):  # also a directory whose first segment failed to open
        files.remove_tree(os.path.join(topic.dir, str(n)))


def _drop(parts: list[Partition], error: type[UnknownTopic | UnknownPartition], why: str) -> None:
    """Deleted partitions: long-pollers waiting on them raise ``error`` (a fresh one each)."""
    for part in parts:
        part.drop(lambda: error(why))
