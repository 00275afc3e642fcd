"""DeleteRecords on the embedded store: the log start moves inside a segment, whole segments
below it go, reads below it are out of range, and the start survives a reopen."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.backends.embedded import EmbeddedBackend, open_embedded
from gateway.model import DeleteRecords, ListOffsets, OffsetOutOfRange, OffsetSpec, Read

from .support import TOPIC, append, batch, create

SEGMENT = 600  # bytes: three batches per segment


async def _earliest(b: EmbeddedBackend) -> int | None:
    spec = ListOffsets(topic=TOPIC, partition=0, spec=OffsetSpec.EARLIEST)
    return (await b.list_offsets(spec)).offset


async def test_delete_records_moves_the_start_durably(tmp_path: Path) -> None:
    async with open_embedded(tmp_path, fsync="never", segment_bytes=SEGMENT) as b:
        await create(b)
        for k in range(12):
            await append(b, batch(5, start=5 * k, ts=1000 * (k + 1)))
        segments = len(b.store.partition(TOPIC, 0).segments)
        result = await b.delete_records(DeleteRecords(topic=TOPIC, partition=0, offset=33))
        assert result.log_start_offset == 33
        assert len(b.store.partition(TOPIC, 0).segments) < segments  # whole segments went
        assert await _earliest(b) == 33
        with pytest.raises(OffsetOutOfRange):
            await b.read(Read(topic=TOPIC, partition=0, offset=32))
        got = await b.read(Read(topic=TOPIC, partition=0, offset=33, max_messages=2))
        assert [m.offset for x in got.batches for m in x.messages] == [33, 34]
        # never backwards; -1 = the high watermark; past it is out of range
        again = await b.delete_records(DeleteRecords(topic=TOPIC, partition=0, offset=10))
        assert again.log_start_offset == 33
        with pytest.raises(OffsetOutOfRange):
            await b.delete_records(DeleteRecords(topic=TOPIC, partition=0, offset=61))
    async with open_embedded(tmp_path, fsync="never", segment_bytes=SEGMENT) as b:
        assert await _earliest(b) == 33
        end = await b.delete_records(DeleteRecords(topic=TOPIC, partition=0, offset=-1))
        assert end.log_start_offset == 60
        await append(b, batch(1, start=60, ts=99_000))
        assert await _earliest(b) == 60
