"""The abuse suite's codec half: the same mutations the live flood sends (tests/abuse/corpus.py),
drawn by Hypothesis, fed to each listener's server codec whole, byte by byte and in random
pieces, with and without an EOF. Invariant: every input decodes, waits for more, or raises
``RemoteProtocolError`` (never another exception: that would be a listener's ``internal``
error). Kafka's captured record batches, mutated and re-checksummed, go through the record
decoder the Produce handler uses, compressed ones included.

Derandomized with a fixed example count, no deadline: the same examples on every run.
"""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocols._wire import CONNECTION_CLOSED, NEED_DATA, RemoteProtocolError
from protocols.iggy import IggyRequest, IggyServerCodec
from protocols.kafka import decode_batch, iter_batches
from protocols.kafka.framing import KafkaServerCodec
from protocols.kafka.versions import advertised
from protocols.rabbitmq_stream import RabbitStreamServerCodec
from protocols.rog import RogServerCodec
from tests.abuse.corpus import MUTATORS, VECTORS, Target, mutate, valid_frames
from tests.protocols.kafka.support import restamp_crc

FUZZ = settings(
    max_examples=300,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
PREAUTH, MAX = 64 << 10, 64 << 20  # limits.max_preauth_frame_bytes, limits.max_frame_bytes


def _codec(target: Target, max_frame: int) -> object:
    match target:
        case Target.KAFKA:
            return KafkaServerCodec(advertised(sasl=True), max_frame)
        case Target.RABBITMQ_STREAM:
            return RabbitStreamServerCodec(max_frame)
        case Target.IGGY_VSR | Target.IGGY_LEGACY:
            return IggyServerCodec(max_frame_size=max_frame, legacy_era=target.iggy_era)
        case Target.ROG:
            return RogServerCodec(max_frame)


def _next(codec: object) -> object:
    if isinstance(codec, KafkaServerCodec | IggyServerCodec):
        return codec.next_request()
    assert isinstance(codec, RabbitStreamServerCodec | RogServerCodec)
    return codec.next_frame()


def _pieces(data: bytes, rng: random.Random, how: str) -> list[bytes]:
    if how == "whole":
        return [data]
    if how == "bytes":
        return [data[i : i + 1] for i in range(len(data))]
    cuts = sorted(rng.sample(range(1, len(data)), min(4, len(data) - 1))) if len(data) > 1 else []
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]


def _feed(target: Target, max_frame: int, data: bytes, pieces: list[bytes], eof: bool) -> None:
    codec = _codec(target, max_frame)
    try:
        for piece in pieces:
            codec.receive_data(piece)  # type: ignore[attr-defined]
            while (frame := _next(codec)) is not NEED_DATA:
                if frame is CONNECTION_CLOSED:
                    return
                if target is Target.ROG:
                    break  # one request per connection (rog.md §1): the rest is ignored
                assert not isinstance(frame, IggyRequest) or frame.command is not None
        if eof:
            codec.receive_eof()  # type: ignore[attr-defined]
            while (frame := _next(codec)) is not CONNECTION_CLOSED and frame is not NEED_DATA:
                if target is Target.ROG:
                    break
    except RemoteProtocolError:
        pass


@pytest.mark.parametrize("target", list(Target), ids=[t.value for t in Target])
@FUZZ
@given(
    rng=st.randoms(use_true_random=False),
    how=st.sampled_from(("whole", "bytes", "pieces")),
    max_frame=st.sampled_from((PREAUTH, MAX)),
)
def test_mutated_frames_decode_or_are_refused(
    target: Target, rng: random.Random, how: str, max_frame: int
) -> None:
    case = mutate(target, rng, valid_frames(target))
    data = case.data[:200_000]
    _feed(target, max_frame, data, _pieces(data, rng, how), case.eof)


def _records_fields() -> list[bytes]:
    """The ``records`` fields of the captured Produce requests (one or more batches each)."""
    text = (VECTORS / "kafka" / "record_batches.jsonl").read_text()
    return [bytes.fromhex(json.loads(line)["records"]) for line in text.splitlines() if line]


RECORDS = _records_fields()


@FUZZ
@given(
    records=st.sampled_from(RECORDS),
    rng=st.randoms(use_true_random=False),
    mutator=st.sampled_from(sorted(MUTATORS)),
    times=st.integers(1, 3),
)
def test_mutated_record_batches_decode_or_are_refused(
    records: bytes, rng: random.Random, mutator: str, times: int
) -> None:
    """What the Produce handler does with a partition's records: split them into batches, then
    decode each (the first batch re-checksummed, so that the mutation reaches the records)."""
    for _ in range(times):
        records = MUTATORS[mutator](rng, records) or records
    first = 12 + int.from_bytes(records[8:12], "big", signed=True) if len(records) >= 12 else 0
    if 21 <= first <= len(records):
        records = restamp_crc(records[:first]) + records[first:]
    try:
        for _, batch in iter_batches(records, max_batch_size=MAX):
            decode_batch(batch, max_decompressed_size=1 << 20)
    except RemoteProtocolError:
        pass
