"""Issue 18 item 7: an idempotent producer's epoch bump on the embedded store's producer state.

Without a transactional id a Kafka client bumps its epoch itself after a local timeout
(librdkafka ``rd_kafka_idemp_drain_done``; the Java client's
``bumpIdempotentEpochAndResetIdIfNeeded``) and starts each partition at sequence 0 again; the
broker takes the first batch of a newer epoch only at sequence 0 and fences the older epoch
from then on (Kafka's ProducerAppendInfo ``checkProducerEpoch``/``checkSequence``). The state
and its snapshot must carry the bumped epoch across a restart.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.backends.embedded.producers import Producers
from gateway.model import ProducerFenced, SequenceError

PID = 42
NOW = 1_000_000


def _append(p: Producers, epoch: int, seq: int, count: int, offset: int) -> int | None:
    original = p.check(PID, epoch, seq, count)
    if original is None:
        p.record(PID, epoch, seq, count, offset, NOW)
    return original


def _bumped() -> Producers:
    p = Producers()
    assert _append(p, 0, 0, 5, 0) is None
    assert _append(p, 0, 5, 5, 5) is None
    # sequences 10.. of epoch 0 timed out in the client, never sent: it bumps to epoch 1
    assert _append(p, 1, 0, 3, 10) is None
    return p


def test_a_bumped_epoch_starts_at_sequence_zero() -> None:
    p = _bumped()
    assert p.states[PID].epoch == 1
    assert list(p.states[PID].batches) == [(0, 3, 10)]  # the old epoch's batches are gone
    assert _append(p, 1, 3, 2, 13) is None  # and it goes on from there


def test_a_retry_in_the_bumped_epoch_gets_its_offset_back() -> None:
    p = _bumped()
    assert _append(p, 1, 0, 3, 99) == 10


def test_the_old_epoch_is_fenced_after_a_bump() -> None:
    p = _bumped()
    with pytest.raises(ProducerFenced):
        p.check(PID, 0, 10, 5)  # a late request of the old epoch
    with pytest.raises(ProducerFenced):
        p.check(PID, 0, 5, 5)  # even a retry of one of its stored batches


def test_a_newer_epoch_must_start_at_zero() -> None:
    p = _bumped()
    with pytest.raises(SequenceError):
        p.check(PID, 2, 3, 1)
    with pytest.raises(SequenceError):
        p.check(PID, 1, 7, 1)  # a gap in the bumped epoch


def test_bumps_may_skip_epochs() -> None:
    p = _bumped()
    assert _append(p, 5, 0, 1, 13) is None
    assert p.states[PID].epoch == 5


def test_no_wrap_past_the_int16_epoch() -> None:
    # Kafka fences an epoch lower than the current one, so a client at 32767 must take a new
    # producer id (the Java client does) rather than wrap to 0.
    p = Producers()
    assert _append(p, 32767, 0, 1, 0) is None
    with pytest.raises(ProducerFenced):
        p.check(PID, 0, 0, 1)


def test_the_bumped_epoch_survives_a_snapshot(tmp_path: Path) -> None:
    path = str(tmp_path / "producers.snapshot")
    _bumped().write_snapshot(path, 13)
    read = Producers.read_snapshot(path, NOW)
    assert read is not None
    p, offset = read
    assert offset == 13 and p.states[PID].epoch == 1
    assert _append(p, 1, 0, 3, 99) == 10  # a retry after the restart
    with pytest.raises(ProducerFenced):
        p.check(PID, 0, 10, 5)
    assert _append(p, 1, 3, 2, 13) is None


def test_unknown_producers_are_taken_at_any_sequence() -> None:
    # Kafka >= 2.5 accepts a producer it has no state for (expired, or never seen here) at any
    # sequence and epoch, rather than UNKNOWN_PRODUCER_ID (KIP-360).
    p = Producers()
    assert _append(p, 3, 1234, 2, 0) is None
    assert p.states[PID].epoch == 3
