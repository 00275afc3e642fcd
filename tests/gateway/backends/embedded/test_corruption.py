"""Corruption in the middle of a segment (issue 18 item 6): recovery loses exactly the damaged
batch, keeps every intact one after it, never reuses an offset, logs the lost range at error
level and counts it; readers skip the gap; ``streamgate verify`` finds it offline."""

from __future__ import annotations

import os
from pathlib import Path

import structlog.testing
import trio
from prometheus_client import CollectorRegistry

from gateway.backends.embedded import open_embedded
from gateway.backends.embedded.batch_format import parse_header
from gateway.backends.embedded.verify import Summary, verify
from gateway.cli import main
from gateway.metrics import Metrics
from gateway.model import Message, Read, TopicConfig

from .support import TOPIC, append, assert_intact, batch, create, logs, partition_dir, read_all

BATCHES = 100
PER_BATCH = 10


async def _store(root: Path, config: TopicConfig | None = None) -> list[tuple[int, int]]:
    """100 batches of 10 (offsets 0..999); (segment file index, byte position) of each."""
    async with open_embedded(root, fsync="never") as b:
        await create(b, config=config)
        for k in range(BATCHES):
            await append(b, batch(PER_BATCH, start=PER_BATCH * k))
    starts = []
    for i, path in enumerate(logs(root)):
        data = path.read_bytes()
        pos = 0
        while pos < len(data):
            starts.append((i, pos))
            pos += parse_header(data, pos).size
    assert len(starts) == BATCHES
    return starts


def _flip(path: Path, pos: int) -> None:
    data = bytearray(path.read_bytes())
    data[pos] ^= 0x10
    path.write_bytes(bytes(data))


def _offsets(messages: list[Message]) -> list[int]:
    return [m.offset for m in messages]


async def test_bit_flip_in_the_active_segment_loses_only_that_batch(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with trio.fail_after(30):
        starts = await _store(root)
        bad = 33  # a third of the way in: offsets 330..339
        _, pos = starts[bad]
        _flip(logs(root)[0], pos + 100)  # inside the payload
        lines = list(verify(str(root)))
        assert len(lines) == 1 and "offsets 330-339 lost" in lines[0], lines
        with structlog.testing.capture_logs() as captured:
            async with open_embedded(root, fsync="never") as b:
                registry = CollectorRegistry()
                metrics = Metrics(registry, process=False)
                b.storage.listen(metrics.storage_event)
                got = await read_all(b)
                assert _offsets(got) == [*range(330), *range(340, 1000)]
                assert_intact(got[:330])
                assert_intact(got[330:], start=340)
                # A fetch inside the lost range continues at the next intact batch.
                r = await b.read(Read(topic=TOPIC, partition=0, offset=335))
                assert r.batches[0].messages[0].offset == 340
                # No offset is given out twice.
                assert await append(b, batch(PER_BATCH, start=1000)) == 1000
                assert _offsets(await read_all(b, offset=995)) == list(range(995, 1010))
                assert b.storage.corrupt_batches == 1
                assert b.storage.lost_records == 10
                value = registry.get_sample_value
                assert value("streamgate_storage_corrupt_batches_total") == 1
                assert value("streamgate_storage_lost_records_total") == 10
        errors = [e for e in captured if e["event"] == "embedded.corrupt_batch_skipped"]
        assert len(errors) == 1
        assert errors[0]["log_level"] == "error"
        assert errors[0]["lost_offsets"] == "330-339"
        assert errors[0]["lost_records"] == 10
        assert not any(e["event"] == "embedded.torn_tail_truncated" for e in captured)
        # Repaired on open: the store is clean now, and stays so across another reopen.
        assert list(verify(str(root))) == []
        async with open_embedded(root, fsync="never") as b:
            assert len(await read_all(b)) == 1000
            assert b.storage.corrupt_batches == 0


async def test_damaged_header_resynchronises_on_the_next_batch(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with trio.fail_after(30):
        starts = await _store(root)
        _, pos = starts[50]
        _flip(logs(root)[0], pos + 9)  # the length field: the batch no longer says its end
        async with open_embedded(root, fsync="never") as b:
            got = await read_all(b)
            assert _offsets(got) == [*range(500), *range(510, 1000)]
            assert b.storage.lost_records == 10


async def test_torn_tail_is_not_corruption(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with trio.fail_after(30):
        starts = await _store(root)
        _, pos = starts[-1]
        os.truncate(logs(root)[0], pos + 30)
        lines = list(verify(str(root)))
        assert len(lines) == 1 and "torn tail" in lines[0], lines
        with structlog.testing.capture_logs() as captured:
            async with open_embedded(root, fsync="never") as b:
                assert len(await read_all(b)) == 990
                assert b.storage.corrupt_batches == 0
                assert await append(b, batch(1, start=990)) == 990
        assert any(e["event"] == "embedded.torn_tail_truncated" for e in captured)
        assert not any(e["event"] == "embedded.corrupt_batch_skipped" for e in captured)


async def test_sealed_segment_damage_is_found_and_repaired(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with trio.fail_after(30):
        starts = await _store(root, TopicConfig(segment_bytes=8192))
        segs = logs(root)
        assert len(segs) > 3
        seg, pos = next(s for s in starts[20:] if s[0] == 1 and s[1] > 0)
        _flip(segs[seg], pos + 70)
        lines = list(verify(str(root)))
        assert len(lines) == 1 and "lost" in lines[0], lines
        # An intact index is trusted on open: the damage stays until verify --repair removes
        # that index, so the next open rescans the segment and cuts the damage out.
        async with open_embedded(root, fsync="never") as b:
            assert b.storage.corrupt_batches == 0
        assert main(["verify", "--repair", str(root)]) == 1
        async with open_embedded(root, fsync="never") as b:
            got = await read_all(b)
            assert len(got) == 990
            assert b.storage.lost_records == 10
            assert await append(b, batch(1, start=1000)) == 1000
        assert list(verify(str(root))) == []


async def test_verify_command(tmp_path: Path, capsys: object) -> None:
    root = tmp_path / "store"
    with trio.fail_after(30):
        starts = await _store(root, TopicConfig(segment_bytes=8192))
    assert main(["verify", str(root)]) == 0
    summary = Summary()
    assert list(verify(str(root), summary)) == []
    assert summary.partitions == 1 and summary.segments == len(logs(root))
    _, pos = starts[1]
    _flip(logs(root)[0], pos + 80)
    index = partition_dir(root) / (logs(root)[1].stem + ".index")
    _flip(index, 20)  # a sealed segment's index: its CRC fails
    assert main(["verify", str(root)]) == 1
    out = capsys.readouterr().out.splitlines()  # type: ignore[attr-defined]
    assert len(out) == 2, out
    assert "damaged batch" in out[0] and "offsets 10-19 lost" in out[0]
    assert str(index) in out[1] and "damaged" in out[1]
    assert main(["verify", str(tmp_path / "nothing")]) == 1


async def test_resync_finds_a_header_whose_crc_ends_in_the_magic_byte(tmp_path: Path) -> None:
    """The last CRC byte sits just before the magic: a CRC ending 0x01 makes bytes 15..19 read
    01 01 00 00 00, two overlapping header candidates; resync must not skip the real one (the
    stop-26 CI run lost a whole intact batch this way, once in 256 batches)."""
    root = tmp_path / "store"
    with trio.fail_after(30):
        # CRCs depend on the append times: batches are added until one ends in 0x01 (about one
        # in 256; 1,500 leave no such batch once in 360 runs, so the test goes on past them).
        tricky, n = None, 0
        async with open_embedded(root, fsync="never") as b:
            await create(b)
            while tricky is None and n < 15_000:
                for k in range(n, n + 1500):
                    await append(b, batch(1, start=k))
                n += 1500
                data = logs(root)[0].read_bytes()
                starts, pos = [], 0
                while pos < len(data):
                    starts.append(pos)
                    pos += parse_header(data, pos).size
                crcs = [parse_header(data, s).crc for s in starts]
                tricky = next((i for i in range(1, len(starts)) if crcs[i] >> 24 == 1), None)
        assert tricky is not None, f"no CRC ending in 0x01 in {n} batches"
        bad = tricky - 1  # the batch before it is damaged
        _flip(logs(root)[0], starts[bad] + 60)
        lines = list(verify(str(root)))
        assert lines == [
            f"{logs(root)[0]}: damaged batch at byte {starts[bad]}"
            f" ({starts[tricky] - starts[bad]} bytes): offsets {bad}-{bad} lost"
        ]
        async with open_embedded(root, fsync="never") as b:
            got = await read_all(b)
            assert _offsets(got) == [o for o in range(n) if o != bad]
            assert b.storage.lost_records == 1
