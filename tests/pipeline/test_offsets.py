"""Offset ranges: ``minPartitions`` splits, ``maxOffsetsPerTrigger`` shares, JSON forms."""

from __future__ import annotations

from pipeline.offsets import Span, from_json, limited, spans, split, to_json


def test_spans_skip_empty_ranges() -> None:
    start = {"a": {0: 5, 1: 3}, "b": {0: 0}}
    end = {"a": {0: 9, 1: 3}, "b": {0: 2}}
    assert spans(start, end) == [Span("a", 0, 5, 9), Span("b", 0, 0, 2)]


def test_split_in_proportion_to_size() -> None:
    ranges = [Span("t", 0, 0, 30), Span("t", 1, 100, 120), Span("t", 2, 0, 10)]
    pieces = split(ranges, 6)
    assert [(s.partition, s.size) for s in pieces] == [
        (0, 10), (0, 10), (0, 10), (1, 10), (1, 10), (2, 10),
    ]  # fmt: skip
    assert pieces[3] == Span("t", 1, 100, 110)
    assert split(ranges, None) == ranges
    assert split(ranges, 2) == ranges  # already enough
    assert split([Span("t", 0, 0, 2)], 5) == [Span("t", 0, 0, 1), Span("t", 0, 1, 2)]


def test_limited_shares_by_backlog_and_is_deterministic() -> None:
    start = {"t": {0: 0, 1: 10, 2: 40}}
    latest = {"t": {0: 40, 1: 20, 2: 40}}
    assert limited(start, latest, 100) == latest
    assert limited(start, latest, 25) == {"t": {0: 20, 1: 15, 2: 40}}
    assert limited(start, latest, 1) == {"t": {0: 1, 1: 10, 2: 40}}
    assert limited(start, latest, 25) == limited(start, latest, 25)


def test_json_round_trip() -> None:
    offsets = {"t": {10: 5, 2: 7}}
    assert to_json(offsets) == {"t": {"2": 7, "10": 5}}
    assert from_json(to_json(offsets)) == offsets
