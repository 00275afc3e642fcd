"""Hypothesis properties of the RecordBatch codec: round trips for every codec, and fuzzing
(any bytes either decode or raise RemoteProtocolError, never another exception).
"""

from __future__ import annotations

import contextlib
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocols._wire import RemoteProtocolError
from protocols.kafka import (
    Compression,
    Record,
    TimestampType,
    decode_batch,
    encode_batch,
    iter_batches,
    split_batches,
    verify_crc,
)

from .support import restamp_crc, same_header, sample_batch

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FUZZ = settings(max_examples=1500, deadline=None)

i32 = st.integers(-(1 << 31), (1 << 31) - 1)
nullable_bytes = st.one_of(st.none(), st.just(b""), st.binary(max_size=200))
headers = st.lists(
    st.tuples(st.text(max_size=20), st.one_of(st.none(), st.binary(max_size=30))), max_size=4
).map(tuple)


@st.composite
def records(draw: st.DrawFn) -> list[Record]:
    count = draw(st.integers(0, 12))
    sequential = draw(st.booleans())  # fresh producer batches, or compacted/arbitrary deltas
    return [
        Record(
            offset_delta=i if sequential else draw(i32),
            timestamp_delta=draw(st.integers(-(1 << 40), 1 << 40)),
            key=draw(nullable_bytes),
            value=draw(nullable_bytes),
            headers=draw(headers),
            attributes=draw(st.integers(0, 255)),
        )
        for i in range(count)
    ]


@st.composite
def batch_fields(draw: st.DrawFn) -> dict[str, Any]:
    timestamp_type = draw(st.sampled_from(TimestampType))
    fields: dict[str, Any] = {
        "base_offset": draw(st.integers(0, (1 << 63) - (1 << 32))),
        "partition_leader_epoch": draw(st.sampled_from([-1, 0, 5, (1 << 31) - 1])),
        "base_timestamp_ms": draw(st.integers(0, 1 << 42)),
        "compression": draw(st.sampled_from(Compression)),
        "timestamp_type": timestamp_type,
        "transactional": draw(st.booleans()),
        "control": draw(st.booleans()),
        "producer_id": draw(st.sampled_from([-1, 0, 1 << 40])),
        "producer_epoch": draw(st.sampled_from([-1, 0, 32767])),
        "base_sequence": draw(st.sampled_from([-1, 0, 1000])),
    }
    if timestamp_type is TimestampType.LOG_APPEND_TIME:
        fields["max_timestamp_ms"] = draw(st.integers(0, 1 << 42))
    return fields


@FAST
@given(records(), batch_fields())
def test_round_trip(records: list[Record], fields: dict[str, Any]) -> None:
    if not records:
        fields["last_offset_delta"] = 0
        fields["compression"] = Compression.NONE  # empty batches carry no body to compress
    batch = encode_batch(records, **fields)
    assert verify_crc(batch)
    header, decoded = decode_batch(batch)
    assert decoded == records
    assert header.records_count == len(records) and header.size == len(batch)
    for name, value in fields.items():
        assert same_header(header)[name] == value
    if records:
        assert header.last_offset_delta == records[-1].offset_delta
    if fields["timestamp_type"] is TimestampType.CREATE_TIME:
        deltas = [r.timestamp_delta for r in records]
        assert header.max_timestamp == fields["base_timestamp_ms"] + max(deltas, default=0)
    # Re-encoding what was decoded gives the same records (and, uncompressed, the same bytes).
    again = encode_batch(decoded, **same_header(header))
    assert decode_batch(again)[1] == records
    if header.compression is Compression.NONE:
        assert again == batch


@FAST
@given(st.lists(st.tuples(records(), batch_fields()), min_size=1, max_size=4), st.data())
def test_walk_concatenated_batches_with_a_partial_tail(
    parts: list[tuple[list[Record], dict[str, Any]]], data: st.DataObject
) -> None:
    batches = [
        encode_batch(r, **f) if r else encode_batch(r, last_offset_delta=0, **f) for r, f in parts
    ]
    whole, last = batches[:-1], batches[-1]
    cut = data.draw(st.integers(0, len(last)))
    walked, truncated = split_batches(b"".join(whole) + last[:cut])
    expected = [*whole, last] if cut == len(last) else whole
    assert [bytes(v) for _, v in walked] == expected
    assert bytes(truncated) == (b"" if cut == len(last) else last[:cut])


# --- fuzzing ----------------------------------------------------------------------------------


def decodes_or_refuses(data: bytes, **options: Any) -> None:
    with contextlib.suppress(RemoteProtocolError):
        decode_batch(data, **options)
    with contextlib.suppress(RemoteProtocolError):
        for header, view in iter_batches(data, max_batch_size=1 << 20):
            assert header.size == len(view)
            with contextlib.suppress(RemoteProtocolError):
                decode_batch(view, **options)


@FUZZ
@given(st.binary(max_size=400))
def test_fuzz_arbitrary_bytes(data: bytes) -> None:
    decodes_or_refuses(data)
    decodes_or_refuses(restamp_crc(data), check_crc=False)


VALID = [sample_batch(n, codec) for codec in Compression for n in (1, 4)]


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    wire = bytearray(draw(st.sampled_from(VALID)))
    for position, value in draw(
        st.lists(st.tuples(st.integers(0), st.integers(0, 255)), max_size=4)
    ):
        wire[position % len(wire)] = value
    if draw(st.booleans()):
        cut = draw(st.integers(0, len(wire)))
        wire = wire[:cut] + draw(st.binary(max_size=16))
    # Mostly with a CRC that matches, or the CRC check would stop nearly every mutation early.
    return restamp_crc(wire) if draw(st.integers(0, 4)) else bytes(wire)


@FUZZ
@given(mutated())
def test_fuzz_mutated_batches(data: bytes) -> None:
    decodes_or_refuses(data)


@FUZZ
@given(st.sampled_from(Compression), st.binary(max_size=300), st.booleans())
def test_fuzz_compressed_sections(codec: Compression, body: bytes, xerial: bool) -> None:
    # Garbage (or xerial-headed garbage) where the compressed records belong.
    if xerial and codec is Compression.SNAPPY:
        body = b"\x82SNAPPY\x00" + body
    shell = sample_batch(1, codec)[:61]
    batch = shell[:8] + (49 + len(body)).to_bytes(4, "big") + shell[12:] + body
    decodes_or_refuses(restamp_crc(batch))
