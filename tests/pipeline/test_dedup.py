"""How a task's appends are tagged, so that a retry or replay is recognised."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from gateway.backends.base import Capabilities
from gateway.backends.embedded import EmbeddedBackend
from gateway.backends.kafka.backend import KafkaBackend
from gateway.model import Message, ProducerFenced, SequenceError, Topic
from pipeline.dedup import EPOCHS, Attempt, Mode, Tagger, mode_of, stored_before

T = Topic("default", "t")
MESSAGES = [Message(value=b"a"), Message(value=b"b")]


def test_mode_follows_the_backend(tmp_path: Path) -> None:
    class Backend:  # only what mode_of reads
        def __init__(self, *, publisher_dedup: bool = False, idempotent: bool = False) -> None:
            self.capabilities = Capabilities(
                publisher_dedup=publisher_dedup, idempotent_producers=idempotent
            )

    def mode(backend: object) -> Mode:
        return mode_of(cast(Any, backend))

    assert mode(Backend(publisher_dedup=True, idempotent=True)) is Mode.PUBLISHER
    assert mode(Backend(idempotent=True)) is Mode.PRODUCER
    assert mode(Backend()) is Mode.NONE
    # the real ones: a Kafka broker grants its own ids, so a writer cannot choose one
    assert mode(KafkaBackend("kafka://127.0.0.1:1")) is Mode.NONE
    assert mode(EmbeddedBackend(tmp_path)) is Mode.PRODUCER


def test_publishing_ids_grow_across_batches_and_repeat_across_runs() -> None:
    def ids(batch: int) -> list[tuple[str, tuple[int, ...]]]:
        tagger = Tagger(Attempt("query", 3, batch), Mode.PUBLISHER)
        return [
            (c.publisher, c.publishing_ids)
            for c in (tagger.append(T, 0, MESSAGES), tagger.append(T, 0, MESSAGES))
        ]

    first = ids(7)
    assert first == ids(7)  # a rerun sends the same reference and ids
    assert first[0][1] == (7 * 2**32 + 1, 7 * 2**32 + 2) and first[1][1][0] == 7 * 2**32 + 3
    assert ids(8)[0][0] == first[0][0] and ids(8)[0][1][0] > first[1][1][-1]


def test_producer_fields() -> None:
    tagger = Tagger(Attempt("write", 1), Mode.PRODUCER)
    a, b = tagger.append(T, 0, MESSAGES), tagger.append(T, 0, MESSAGES)
    other = tagger.append(T, 1, MESSAGES)
    assert a.producer_id == b.producer_id >= 1 << 62 and a.producer_epoch == 0
    assert (a.base_sequence, b.base_sequence, other.base_sequence) == (0, 2, 0)
    again = Tagger(Attempt("write", 1), Mode.PRODUCER).append(T, 0, MESSAGES)
    assert again.producer_id == a.producer_id
    assert Tagger(Attempt("write", 2), Mode.PRODUCER).append(T, 0, MESSAGES).producer_id != (
        a.producer_id
    )
    later = Tagger(Attempt("q", 0, EPOCHS + 5), Mode.PRODUCER).append(T, 0, MESSAGES)
    assert later.producer_epoch == 5
    assert (
        later.producer_id
        != Tagger(Attempt("q", 0, 5), Mode.PRODUCER).append(T, 0, MESSAGES).producer_id
    )


def test_only_an_out_of_order_idempotent_batch_counts_as_stored_before() -> None:
    assert stored_before(Mode.PRODUCER, SequenceError("expected 50, got 0"))
    assert not stored_before(Mode.PRODUCER, ProducerFenced("older epoch"))
    assert not stored_before(Mode.PUBLISHER, SequenceError("x"))
    assert not stored_before(Mode.NONE, SequenceError("x"))
