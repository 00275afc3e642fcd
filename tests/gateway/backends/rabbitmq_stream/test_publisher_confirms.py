"""How a RabbitMQ publisher settles its batches from PublishConfirm's ids: a run of consecutive
ids within one batch in one step, anything else (ids across batches, repeats, a client's
scattered ids) id by id. The accounting only: no connection is used (the tests with a real
RabbitMQ cover the confirms it sends)."""

from __future__ import annotations

from typing import cast

from gateway.backends.rabbitmq_stream.conn import Connection
from gateway.backends.rabbitmq_stream.publisher import Batch, Publisher


def publisher(reference: str, *batches: Batch) -> Publisher:
    p = Publisher(cast(Connection, None), "s", reference)
    for batch in batches:  # as ``send`` registers them
        p._starts.append(batch.first)
        p._batches.append(batch)
    return p


def test_a_run_within_a_batch_settles_in_steps() -> None:
    a, b = Batch(1, 5, None), Batch(6, 3, None)
    p = publisher("", a, b)
    p.confirmed((3, 1, 2))
    assert (a.remaining, a.done.is_set()) == (2, False)
    p.confirmed((4, 5))
    assert a.done.is_set() and not b.done.is_set()
    p.confirmed((6, 7, 8))
    assert b.done.is_set() and p.idle


def test_ids_across_two_batches_go_one_by_one() -> None:
    a, b = Batch(1, 3, None), Batch(4, 3, None)
    p = publisher("", a, b)
    p.confirmed((2, 3, 4, 5))
    assert (a.remaining, b.remaining) == (1, 1)
    p.confirmed((1, 6))
    assert a.done.is_set() and b.done.is_set()


def test_a_reference_batch_with_repeated_ids_needs_every_confirm() -> None:
    """A client frame of ids 1, 2, 3, 1, 2, 3: RabbitMQ confirms each of the six entries."""
    batch = Batch(1, 6, None, frozenset({1, 2, 3}))
    assert not batch.run
    p = publisher("ref", batch)
    p.confirmed((1, 2, 3))
    assert (batch.remaining, batch.done.is_set()) == (3, False)
    p.confirmed((1, 2, 3))
    assert batch.done.is_set()


def test_a_reference_batch_of_scattered_ids() -> None:
    batch = Batch(12, 4, None, frozenset({20, 12, 30, 31}))
    assert not batch.run
    p = publisher("ref", batch)
    p.confirmed((30, 31))  # consecutive, but the batch is no run: counted one by one
    assert batch.remaining == 2
    p.confirmed((12, 20))
    assert batch.done.is_set()


def test_a_reference_batch_of_consecutive_ids_is_a_run() -> None:
    batch = Batch(100, 3, None, frozenset({101, 100, 102}))
    assert batch.run
    p = publisher("ref", batch)
    p.confirmed((100, 100, 101))  # a repeat in the confirm: not a run, one by one
    assert batch.remaining == 0 and batch.done.is_set()


def test_confirms_of_unknown_ids_change_nothing() -> None:
    batch = Batch(1, 2, None)
    p = publisher("", batch)
    p.confirmed((7, 8))
    p.confirmed((0,))
    assert batch.remaining == 2 and not batch.done.is_set()
