"""Idempotent producers idle longer than the store's expiration are forgotten (Kafka's
producer.id.expiration.ms): a producer that comes back afterwards is a new one, while live
producers are answered exactly as before. The clock is injected."""

from __future__ import annotations

import struct
from pathlib import Path

import crc32c
import pytest
import trio
import trio.testing

from gateway.backends.embedded import EmbeddedBackend, open_embedded
from gateway.backends.embedded.partition import SNAPSHOT
from gateway.backends.embedded.producers import EXPIRATION_MS, Producers
from gateway.model import Append, MessageBatch, SequenceError

from .support import TOPIC, batch, create, partition_dir

EXPIRE_S = 60.0
SEGMENT = 300  # a few idempotent batches of 2 x 20 B per segment: rolls write snapshots
LARGE = 14  # messages of 20 B: a batch over SEGMENT


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0  # seconds

    def __call__(self) -> float:
        return self.now


def _idem(pid: int, seq: int, n: int = 2, epoch: int = 0) -> Append:
    return Append(
        topic=TOPIC,
        partition=0,
        batch=MessageBatch(batch(n)),
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
    )


def _known(b: EmbeddedBackend) -> set[int]:
    return set(b.store.partition(TOPIC, 0).producers.states)


def test_idle_producers_go_and_come_back_as_new() -> None:
    p = Producers()
    p.record(1, 0, 0, 2, 100, now_us=1_000)
    p.record(2, 0, 0, 2, 102, now_us=1_000)
    p.record(2, 0, 2, 2, 104, now_us=2_000)  # producer 2 appended since
    assert p.expire(idle_since_us=999) == 0
    assert p.expire(idle_since_us=1_000) == 1  # idle for exactly the expiration: gone, as Kafka
    assert set(p.states) == {2}
    # producer 1 is unknown now: any sequence is accepted, its old batch is no longer a retry
    assert p.check(1, 0, 0, 2) is None
    assert p.check(1, 0, 40, 2) is None
    p.record(1, 0, 40, 2, 106, now_us=3_000)
    assert p.check(1, 0, 40, 2) == 106
    with pytest.raises(SequenceError):
        p.check(1, 0, 0, 2)
    # the live producer is answered as before: a retry gets its offset, a gap is refused
    assert p.check(2, 0, 2, 2) == 104
    with pytest.raises(SequenceError):
        p.check(2, 0, 6, 2)
    assert p.check(2, 0, 4, 2) is None


def test_a_snapshot_of_before_expiry_is_read_as_appended_at_open(tmp_path: Path) -> None:
    # The "SGPS" layout written before producers had an append time.
    body = struct.pack("<4sQI", b"SGPS", 10, 1) + struct.pack("<qhB", 7, 3, 1)
    body += struct.pack("<iIQ", 4, 2, 8)
    path = tmp_path / SNAPSHOT
    path.write_bytes(body + struct.pack("<I", crc32c.crc32c(body)))
    read = Producers.read_snapshot(str(path), now_us=5_000)
    assert read is not None
    producers, offset = read
    assert offset == 10
    state = producers.states[7]
    assert (state.epoch, list(state.batches), state.last_append_us) == (3, [(4, 2, 8)], 5_000)
    assert producers.check(7, 3, 4, 2) == 8


async def test_the_store_expires_idle_producers(tmp_path: Path) -> None:
    clock = Clock()
    with trio.fail_after(10):
        async with open_embedded(
            tmp_path, fsync="never", clock=clock, producer_id_expiration_ms=int(EXPIRE_S * 1000)
        ) as b:
            await create(b)
            assert (await b.append(_idem(1, 0))).base_offset == 0
            assert (await b.append(_idem(2, 0))).base_offset == 2
            clock.now += EXPIRE_S / 2
            assert (await b.append(_idem(2, 2))).base_offset == 4
            assert b.expire_producers() == 0
            clock.now += EXPIRE_S / 2  # producer 1 idle for the expiration, producer 2 half
            assert b.expire_producers() == 1
            assert _known(b) == {2}
            # producer 1 is new again: its first batch is stored anew, not a retry
            again = await b.append(_idem(1, 0))
            assert (again.duplicate, again.base_offset) == (False, 6)
            retry = await b.append(_idem(2, 2))
            assert (retry.duplicate, retry.base_offset) == (True, 4)
            with pytest.raises(SequenceError):
                await b.append(_idem(2, 6))  # 4 is next


async def test_the_retention_pass_expires_producers(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    clock = Clock()
    async with open_embedded(
        tmp_path,
        fsync="never",
        clock=clock,
        producer_id_expiration_ms=int(EXPIRE_S * 1000),
        retention_check_interval_s=30,
    ) as b:
        await create(b)
        await b.append(_idem(1, 0))
        clock.now += EXPIRE_S
        assert _known(b) == {1}
        with trio.fail_after(60):
            await trio.sleep(31)  # virtual time: one retention pass
        assert _known(b) == set()
        assert not (await b.append(_idem(1, 0))).duplicate


async def test_append_times_survive_reopen(tmp_path: Path) -> None:
    clock = Clock()
    settings = {
        "fsync": "never",
        "segment_bytes": SEGMENT,
        "clock": clock,
        "producer_id_expiration_ms": int(EXPIRE_S * 1000),
    }
    with trio.fail_after(10):
        async with open_embedded(tmp_path, **settings) as b:
            await create(b)
            for k in range(6):  # producer 1 in sealed segments, known from the snapshot
                await b.append(_idem(1, 2 * k))
            clock.now += EXPIRE_S / 2
            # producer 2, in a segment of its own (a batch over SEGMENT rolls): the active one,
            # whose headers recovery reads
            await b.append(_idem(2, 0, n=LARGE))
            assert (partition_dir(tmp_path) / SNAPSHOT).exists()
        clock.now += EXPIRE_S / 2
        async with open_embedded(tmp_path, **settings) as b:
            # producer 1's snapshot time is one expiration ago: gone at open; producer 2, known
            # from a header only, counts as appended at open (late, never early)
            assert _known(b) == {2}
            assert not (await b.append(_idem(1, 10))).duplicate
            assert (await b.append(_idem(2, 0, n=LARGE))).duplicate
            clock.now += EXPIRE_S
            assert b.expire_producers() == 2
    assert EXPIRATION_MS == 24 * 3600 * 1000  # the default of Kafka's producer.id.expiration.ms


def test_the_expiration_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="producer_id_expiration_ms"):
        EmbeddedBackend(tmp_path, producer_id_expiration_ms=0)
