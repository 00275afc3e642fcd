"""Segment roll, reads and ListOffsets across segments, and index files rebuilt when damaged."""

from __future__ import annotations

from pathlib import Path

import trio

from gateway.backends.embedded import EmbeddedBackend, open_embedded
from gateway.backends.embedded.segment import INDEX_INTERVAL
from gateway.model import ListOffsets, OffsetSpec, Read

from .support import TOPIC, append, assert_intact, batch, create, logs, read_all

SEGMENT = 600  # bytes: three batches per segment


async def _fill(tmp_path: Path, batches: int = 30) -> None:
    """Batches of 5 records stamped 1000 * (batch number + 1)."""
    async with open_embedded(tmp_path, fsync="never", segment_bytes=SEGMENT) as b:
        await create(b)
        for k in range(batches):
            await append(b, batch(5, start=5 * k, ts=1000 * (k + 1)))


async def _offset_for(b: EmbeddedBackend, spec: OffsetSpec, ts: int = 0) -> tuple[int | None, int]:
    r = await b.list_offsets(ListOffsets(topic=TOPIC, partition=0, spec=spec, timestamp_us=ts))
    return r.offset, r.timestamp_us


async def _check_reads(tmp_path: Path) -> None:
    async with open_embedded(tmp_path, fsync="never", segment_bytes=SEGMENT) as b:
        assert_intact(await read_all(b))
        for offset in (0, 3, 37, 74, 149):
            got = await read_all(b, offset=offset)
            assert_intact(got, start=offset)
        r = await b.read(Read(topic=TOPIC, partition=0, offset=12, max_messages=20))
        assert [m.offset for x in r.batches for m in x.messages] == list(range(12, 32))
        assert await _offset_for(b, OffsetSpec.TIMESTAMP, 17_000) == (80, 17_000)
        assert await _offset_for(b, OffsetSpec.TIMESTAMP, 16_500) == (80, 17_000)
        assert await _offset_for(b, OffsetSpec.TIMESTAMP, 1) == (0, 1000)
        assert (await _offset_for(b, OffsetSpec.TIMESTAMP, 30_001))[0] is None
        assert await _offset_for(b, OffsetSpec.MAX_TIMESTAMP) == (145, 30_000)
        assert await append(b, batch(1, start=150)) == 150


async def test_segments_roll_and_reads_span_them(tmp_path: Path) -> None:
    with trio.fail_after(10):
        await _fill(tmp_path)
        files = logs(tmp_path)
        assert len(files) > 5
        assert all(f.stat().st_size <= SEGMENT for f in files)
        bases = [int(f.stem) for f in files]
        assert bases[0] == 0 and bases == sorted(bases) and all(len(f.stem) == 20 for f in files)
        for f in files[:-1]:  # sealed segments have their index files
            assert f.with_suffix(".index").exists() and f.with_suffix(".timeindex").exists()
        await _check_reads(tmp_path)


async def test_missing_index_files_are_rebuilt(tmp_path: Path) -> None:
    with trio.fail_after(10):
        await _fill(tmp_path)
        sealed = logs(tmp_path)[:-1]
        originals = {f: f.with_suffix(".index").read_bytes() for f in sealed}
        for f in sealed[::2]:
            f.with_suffix(".index").unlink()
        for f in sealed[1::2]:
            f.with_suffix(".timeindex").unlink()
        await _check_reads(tmp_path)
        for f, data in originals.items():  # the rebuilt index equals the one written on roll
            assert f.with_suffix(".index").read_bytes() == data


async def test_corrupt_index_files_are_rebuilt(tmp_path: Path) -> None:
    with trio.fail_after(10):
        await _fill(tmp_path)
        sealed = logs(tmp_path)[:-1]
        for k, f in enumerate(sealed):
            path = f.with_suffix(".index" if k % 2 else ".timeindex")
            data = bytearray(path.read_bytes())
            data[len(data) // 2] ^= 0x40
            path.write_bytes(bytes(data[: len(data) - (k % 3)]))
        await _check_reads(tmp_path)


async def test_big_segments_use_the_sparse_index(tmp_path: Path) -> None:
    # Many small batches per segment: lookups bisect the index, then walk < INDEX_INTERVAL.
    with trio.fail_after(10):
        async with open_embedded(tmp_path, fsync="never") as b:
            await create(b)
            for k in range(400):
                await append(b, batch(2, start=2 * k, size=40))
            assert logs(tmp_path)[0].stat().st_size > 10 * INDEX_INTERVAL
            for offset in (0, 1, 333, 799):
                r = await b.read(Read(topic=TOPIC, partition=0, offset=offset, max_messages=1))
                [m] = [m for x in r.batches for m in x.messages]
                assert m.offset == offset and m.value.startswith(f"m{offset}.".encode())


async def test_budgets_never_skip_a_batch(tmp_path: Path) -> None:
    # Whatever the budgets and wherever they run out (inside a segment, at its end), a read
    # returns a contiguous run of offsets from where it started.
    with trio.fail_after(10):
        await _fill(tmp_path)
        async with open_embedded(tmp_path, fsync="never", segment_bytes=SEGMENT) as b:
            for offset in (0, 7, 33, 149):
                for max_bytes in (1, 100, 250, 400, 700, 1500, 10_000):
                    for max_messages in (1, 4, 11, 1000):
                        r = await b.read(
                            Read(
                                topic=TOPIC,
                                partition=0,
                                offset=offset,
                                max_bytes=max_bytes,
                                max_messages=max_messages,
                            )
                        )
                        got = [m.offset for x in r.batches for m in x.messages]
                        assert got == list(range(offset, offset + len(got)))
                        assert 1 <= len(got) <= max_messages


async def test_reads_where_the_last_one_ended_and_anywhere_else(tmp_path: Path) -> None:
    """A read at the offset the previous read ended on is located from that read (no walk of
    headers); a read anywhere else, inside a batch included, still finds its batch."""
    async with open_embedded(tmp_path, fsync="never") as b:
        await create(b)
        for start in range(0, 60, 3):
            await append(b, batch(3, start=start))
        offset, seen = 0, []
        while offset < 60:  # sequential reads of at most 4 messages: each starts at the hint
            r = await b.read(Read(topic=TOPIC, partition=0, offset=offset, max_messages=4))
            got = [m for part in r.batches for m in part.messages]
            seen += got
            offset = got[-1].offset + 1
        assert_intact(seen)
        for offset in (59, 1, 31, 2, 30):  # jumping around, back and forth, inside batches
            r = await b.read(Read(topic=TOPIC, partition=0, offset=offset, max_messages=1))
            [m] = [m for part in r.batches for m in part.messages]
            assert m.offset == offset
