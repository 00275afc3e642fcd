"""The embedded store's Kafka transactions, through the backend's commands: what each isolation
reads around committed, aborted and open transactions; the transaction state of a partition
rebuilt on reopen (from the header walk, and from its snapshot after a roll); the coordinator's
checks on a transactional append; a decided commit finished by the next open; a CLEAN long poll
that finds only what it skips waits instead of answering at once."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing

from gateway.backends.embedded import EmbeddedBackend, open_embedded, txn_log
from gateway.backends.embedded.transactions import State
from gateway.model import (
    AddToTransaction,
    Append,
    EndTransaction,
    InitTransaction,
    Isolation,
    MessageBatch,
    ProducerFenced,
    Read,
    ReadResult,
    TopicConfig,
    TransactionError,
    TransactionTimeoutInvalid,
)

from .support import TOPIC, append, batch, create

TID = "tid"


async def _begin(b: EmbeddedBackend) -> tuple[int, int]:
    got = await b.init_transaction(InitTransaction(transactional_id=TID, timeout_ms=60_000))
    return got.producer_id, got.producer_epoch


async def _txn_append(
    b: EmbeddedBackend, pid: int, epoch: int, seq: int, values: list[str]
) -> None:
    await b.add_to_transaction(
        AddToTransaction(transactional_id=TID, producer_id=pid, producer_epoch=epoch,
                         partitions=((TOPIC, 0),))
    )  # fmt: skip
    messages = [
        m._replace(value=v.encode()) for m, v in zip(batch(len(values)), values, strict=True)
    ]
    await b.append(
        Append(topic=TOPIC, partition=0, batch=MessageBatch(messages), producer_id=pid,
               producer_epoch=epoch, base_sequence=seq, transactional_id=TID)
    )  # fmt: skip


async def _end(b: EmbeddedBackend, pid: int, epoch: int, commit: bool) -> None:
    await b.end_transaction(
        EndTransaction(transactional_id=TID, producer_id=pid, producer_epoch=epoch, commit=commit)
    )


async def _read(
    b: EmbeddedBackend, isolation: Isolation, **kw: object
) -> tuple[list[bytes], ReadResult]:
    r = await b.read(Read(topic=TOPIC, partition=0, offset=0, isolation=isolation, **kw))  # type: ignore[arg-type]
    values = [
        m.value for part in r.batches for m in part.messages if not m.value.startswith(b"\x00")
    ]
    return values, r


async def _story(b: EmbeddedBackend) -> tuple[int, int]:
    """plain, committed c1 c2, aborted a1, plain2, then an open transaction o1 and plain3."""
    await append(b, [batch(1)[0]._replace(value=b"plain")])
    pid, epoch = await _begin(b)
    await _txn_append(b, pid, epoch, 0, ["c1", "c2"])
    await _end(b, pid, epoch, commit=True)
    await _txn_append(b, pid, epoch, 2, ["a1"])
    await _end(b, pid, epoch, commit=False)
    await append(b, [batch(1)[0]._replace(value=b"plain2")])
    await _txn_append(b, pid, epoch, 3, ["o1"])
    await append(b, [batch(1)[0]._replace(value=b"plain3")])
    return pid, epoch


async def _check_story(b: EmbeddedBackend, pid: int) -> None:
    clean, r = await _read(b, Isolation.CLEAN)
    assert clean == [b"plain", b"c1", b"c2", b"plain2"]
    # offsets: plain 0, c1 c2 1-2, commit marker 3, a1 4, abort marker 5, plain2 6, o1 7, plain3 8
    assert (r.high_watermark, r.last_stable_offset) == (9, 7)
    _, committed = await _read(b, Isolation.COMMITTED, whole_batches=True)
    assert committed.aborted == ((pid, 4),)
    assert [batch.wire.base_offset for batch in committed.batches if batch.wire] == [
        0,
        1,
        3,
        4,
        5,
        6,
    ]
    everything = [
        batch.wire.base_offset
        for batch in (await _read(b, Isolation.UNCOMMITTED, whole_batches=True))[1].batches
        if batch.wire
    ]
    assert everything == [0, 1, 3, 4, 5, 6, 7, 8]


@pytest.mark.parametrize("segment_bytes", [1 << 20, 300])  # one segment; a roll per batch
async def test_isolation_and_reopen(tmp_path: Path, segment_bytes: int) -> None:
    settings = {"fsync": "never", "segment_bytes": segment_bytes}
    async with open_embedded(tmp_path, **settings) as b:
        await create(b, config=TopicConfig(segment_bytes=segment_bytes))
        pid, epoch = await _story(b)
        await _check_story(b, pid)
    async with open_embedded(tmp_path, **settings) as b:
        await _check_story(b, pid)  # the open transaction is still open (its timeout is 60 s)
        await _end(b, pid, epoch, commit=True)
        clean, r = await _read(b, Isolation.CLEAN)
        assert clean == [b"plain", b"c1", b"c2", b"plain2", b"o1", b"plain3"]
        assert r.last_stable_offset == r.high_watermark == 10


async def test_transactional_appends_are_checked(tmp_path: Path) -> None:
    async with open_embedded(tmp_path, fsync="never") as b:
        await create(b)
        pid, epoch = await _begin(b)

        def one(epoch: int, seq: int) -> Append:
            return Append(
                topic=TOPIC, partition=0, batch=MessageBatch(batch(1)), producer_id=pid,
                producer_epoch=epoch, base_sequence=seq, transactional_id=TID,
            )  # fmt: skip

        with pytest.raises(TransactionError, match="AddPartitionsToTxn first"):
            await b.append(one(epoch, 0))
        await _txn_append(b, pid, epoch, 0, ["x"])
        _, epoch2 = await _begin(b)  # a new instance: the open transaction is aborted
        assert epoch2 > epoch
        with pytest.raises(ProducerFenced):
            await b.append(one(epoch, 1))
        with pytest.raises(ProducerFenced):
            await _end(b, pid, epoch, commit=True)
        assert (await _read(b, Isolation.CLEAN))[0] == []


async def test_a_decided_commit_is_finished_on_open(tmp_path: Path) -> None:
    async with open_embedded(tmp_path, fsync="never") as b:
        await create(b)
        pid, epoch = await _begin(b)
        await _txn_append(b, pid, epoch, 0, ["d1"])
        # As if the gateway stopped between the decision and the markers:
        b.transactions._txns[TID].state = State.PREPARE_COMMIT
        await b.transactions._save(TID)
    async with open_embedded(tmp_path, fsync="never") as b:
        assert (await _read(b, Isolation.CLEAN))[0] == [b"d1"]
        assert b.transactions._txns[TID].state is State.COMPLETE_COMMIT


async def test_a_clean_long_poll_waits_past_what_it_skips(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with open_embedded(tmp_path, fsync="never") as b:
        await create(b)
        pid, epoch = await _begin(b)
        await _txn_append(b, pid, epoch, 0, ["a1"])
        await _end(b, pid, epoch, commit=False)
        values, r = await _read(b, Isolation.CLEAN, max_wait_ms=5000)
        assert values == [] and r.waited_s >= 5.0  # waited out the deadline, did not spin

        async def later() -> None:
            await trio.sleep(1)
            await append(b, [batch(1)[0]._replace(value=b"next")])

        async with trio.open_nursery() as nursery:
            nursery.start_soon(later)
            values, r = await _read(b, Isolation.CLEAN, max_wait_ms=5000)
        assert values == [b"next"] and 0 < r.waited_s < 5.0


def test_the_state_log_replays_cuts_a_torn_tail_and_compacts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(txn_log, "_COMPACT_MIN_BYTES", 2048)
    states: dict[str, dict[str, object]] = {}
    book = txn_log.TxnLog(str(tmp_path))
    assert book.load() == ({}, 0)
    for i in range(200):  # 4 ids changing over and over: compacted on the way
        tid = f"t{i % 4}"
        states[tid] = {"n": i}
        book.write(tid, states[tid], 1000 + i, lambda: dict(states))
    del states["t0"]
    book.write("t0", None, 1200, lambda: dict(states))  # forgotten
    path = tmp_path / txn_log.FILE_NAME
    assert path.stat().st_size < 2048 + 200  # not 200 records: compacted
    assert txn_log.TxnLog(str(tmp_path)).load() == (states, 1200)
    size = path.stat().st_size
    with path.open("ab") as f:
        f.write(b"\x30\x00\x00\x00torn")  # a record cut short by a crash
    assert txn_log.TxnLog(str(tmp_path)).load() == (states, 1200)
    assert path.stat().st_size == size


async def test_a_timeout_over_the_maximum_is_refused(tmp_path: Path) -> None:
    async with open_embedded(tmp_path, fsync="never") as b:
        for timeout_ms in (900_001, 0):
            with pytest.raises(TransactionTimeoutInvalid):
                await b.init_transaction(
                    InitTransaction(transactional_id=TID, timeout_ms=timeout_ms)
                )
        got = await b.init_transaction(InitTransaction(transactional_id=TID, timeout_ms=900_000))
        assert got.producer_epoch == 0
