"""The hand-written Produce and Fetch response encoders against kio 0.6.5 (kafka.md §4.4): equal
bytes to kio's writer for every served version, every field read back by kio's reader with the
exact length, and the broker's captured responses re-encoded byte for byte.

``tests/vectors/kafka/frames/`` holds unchanged copies of the team's ``cap_r_*.jsonl`` sessions
(kafka.md §7-§8: four clients through a logging proxy in front of Tansu, the recommended ranges
advertised) that contain Produce v3-7 or Fetch v4-11 responses.
"""

from __future__ import annotations

import datetime
import importlib
import io
import json
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.index import load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.response_header.v0.header import ResponseHeader
from kio.schema.types import BrokerId, ProducerId, TopicName
from kio.serial import entity_reader, entity_writer
from kio.serial.readers import tz_aware_from_i64
from kio.static.primitive import Records, i32, i32Timedelta, i64

from protocols._wire import LocalProtocolError
from protocols.kafka.hot import (
    FETCH_VERSIONS,
    PRODUCE_VERSIONS,
    FetchPartition,
    ProducePartition,
    encode_produce_response,
    fetch_response_pieces,
)

FRAMES = Path(__file__).resolve().parents[2] / "vectors" / "kafka" / "frames"
PRODUCE, FETCH = 0, 1
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
MS = datetime.timedelta(milliseconds=1)
# 9999-12-31T23:59:59.999Z: the last instant a Python datetime (kio's log_append_time) can hold.
MAX_DATETIME_MS = 253_402_300_799_999

ProduceTopics = list[tuple[str, list[ProducePartition]]]
FetchTopics = list[tuple[str, list[FetchPartition]]]

PROPERTIES = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --- kio's side ---------------------------------------------------------------------------------


def encode_fetch_response(
    correlation_id: int, version: int, topics: FetchTopics, **keywords: int
) -> bytes:
    """The whole frame: the pieces joined, their byte count checked against the size prefix."""
    gathered = fetch_response_pieces(correlation_id, version, topics, **keywords)
    frame = gathered.join()
    assert gathered.nbytes == len(frame) == 4 + int.from_bytes(frame[:4], "big")
    return frame


def schema(api_key: int, version: int) -> ModuleType:
    """The kio module of one response version: the message class and its nested entities."""
    return importlib.import_module(load_response_schema(api_key, version).__module__)


def kio_frame(message: Any, correlation_id: int) -> bytes:
    buffer = io.BytesIO()
    header_class = type(message).__header_schema__
    assert header_class is ResponseHeader  # response header v0 for every non-flexible version
    entity_writer(header_class)(buffer, ResponseHeader(correlation_id=i32(correlation_id)))
    entity_writer(type(message))(buffer, message)
    body = buffer.getvalue()
    return len(body).to_bytes(4, "big") + body


def kio_read(api_key: int, version: int, frame: bytes) -> tuple[int, Any]:
    """Correlation id and message, checking that the size prefix and kio agree on every byte."""
    message_class = load_response_schema(api_key, version)
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    header, header_size = entity_reader(ResponseHeader)(frame, 4)
    message, body_size = entity_reader(message_class)(frame, 4 + header_size)
    assert 4 + header_size + body_size == len(frame)
    return int(header.correlation_id), message


def kio_produce(version: int, topics: ProduceTopics, throttle_time_ms: int) -> Any:
    m = schema(PRODUCE, version)

    def partition(p: ProducePartition) -> Any:
        fields: dict[str, Any] = {
            "index": i32(p.index),
            "error_code": ErrorCode(p.error_code),
            "base_offset": i64(p.base_offset),
            # kio's TZAware type claims whole seconds (microsecond == 0), yet its own reader
            # returns milliseconds: build the value the way the reader does.
            "log_append_time": (
                None if p.log_append_time_ms == -1 else tz_aware_from_i64(i64(p.log_append_time_ms))
            ),
        }
        if version >= 5:
            fields["log_start_offset"] = i64(p.log_start_offset)
        return m.PartitionProduceResponse(**fields)

    return m.ProduceResponse(
        responses=tuple(
            m.TopicProduceResponse(
                name=TopicName(name), partition_responses=tuple(map(partition, partitions))
            )
            for name, partitions in topics
        ),
        throttle_time=i32Timedelta.parse(datetime.timedelta(milliseconds=throttle_time_ms)),
    )


def kio_fetch(
    version: int, topics: FetchTopics, throttle_time_ms: int, error_code: int, session_id: int
) -> Any:
    m = schema(FETCH, version)

    def partition(p: FetchPartition) -> Any:
        fields: dict[str, Any] = {
            "partition_index": i32(p.index),
            "error_code": ErrorCode(p.error_code),
            "high_watermark": i64(p.high_watermark),
            "last_stable_offset": i64(p.last_stable_offset),
            "aborted_transactions": tuple(
                m.AbortedTransaction(producer_id=ProducerId(pid), first_offset=i64(first))
                for pid, first in p.aborted
            ),
            "records": Records(b"".join(p.records)),
        }
        if version >= 5:
            fields["log_start_offset"] = i64(p.log_start_offset)
        if version >= 11:
            fields["preferred_read_replica"] = BrokerId(-1)
        return m.PartitionData(**fields)

    message: dict[str, Any] = {
        "throttle_time": i32Timedelta.parse(datetime.timedelta(milliseconds=throttle_time_ms)),
        "responses": tuple(
            m.FetchableTopicResponse(
                topic=TopicName(name), partitions=tuple(map(partition, partitions))
            )
            for name, partitions in topics
        ),
    }
    if version >= 7:
        message["error_code"] = ErrorCode(error_code)
        message["session_id"] = i32(session_id)
    return m.FetchResponse(**message)


# --- kio messages back to our arguments ---------------------------------------------------------


def append_time_ms(value: datetime.datetime | None) -> int:
    if value is None:
        return -1
    # kio's reader builds the datetime through a float: far from 1970 it lands a microsecond
    # short of the millisecond (…22.202999 for …22.203). Its writer rounds, and so do we.
    return (value - EPOCH + MS // 2) // MS


def produce_args(message: Any) -> tuple[ProduceTopics, int]:
    topics = [
        (
            str(topic.name),
            [
                ProducePartition(
                    index=p.index,
                    error_code=p.error_code,
                    base_offset=p.base_offset,
                    log_append_time_ms=append_time_ms(p.log_append_time),
                    log_start_offset=getattr(p, "log_start_offset", -1),  # v5+
                )
                for p in topic.partition_responses
            ],
        )
        for topic in message.responses
    ]
    return topics, message.throttle_time // MS


def fetch_args(message: Any) -> tuple[FetchTopics, dict[str, int]]:
    topics = [
        (
            str(topic.topic),
            [
                FetchPartition(
                    index=p.partition_index,
                    error_code=p.error_code,
                    high_watermark=p.high_watermark,
                    last_stable_offset=p.last_stable_offset,
                    log_start_offset=getattr(p, "log_start_offset", -1),  # v5+
                    records=(p.records,) if p.records else (),
                    aborted=tuple((a.producer_id, a.first_offset) for a in p.aborted_transactions),
                )
                for p in topic.partitions
            ],
        )
        for topic in message.responses
    ]
    keywords = {
        "throttle_time_ms": message.throttle_time // MS,
        "error_code": getattr(message, "error_code", 0),  # v7+
        "session_id": getattr(message, "session_id", 0),  # v7+
    }
    return topics, keywords


def unreproduced(message: Any) -> str | None:
    """What in a Fetch response our encoder deliberately never writes, if anything."""
    for topic in message.responses:
        for p in topic.partitions:
            if p.aborted_transactions is None:
                # Null (a broker may send it to a read_uncommitted consumer): the gateway writes
                # an empty array when there is no aborted transaction to name.
                return "null aborted_transactions"
            if getattr(p, "preferred_read_replica", -1) != -1:
                return f"preferred_read_replica={p.preferred_read_replica}"  # no follower fetch
            if p.records is None:
                return "null records"  # we always write bytes, zero-length when empty
    return None


def same_produce(version: int, topics: ProduceTopics) -> ProduceTopics:
    """``topics`` as a reader sees them at ``version``: fields it lacks at their defaults."""
    if version >= 5:
        return topics
    return [(name, [p._replace(log_start_offset=-1) for p in ps]) for name, ps in topics]


def same_fetch(version: int, topics: FetchTopics) -> FetchTopics:
    def partition(p: FetchPartition) -> FetchPartition:
        joined = b"".join(p.records)
        return p._replace(
            log_start_offset=p.log_start_offset if version >= 5 else -1,
            records=(joined,) if joined else (),
        )

    return [(name, [partition(p) for p in ps]) for name, ps in topics]


# --- strategies ---------------------------------------------------------------------------------

i32s = st.integers(-(1 << 31), (1 << 31) - 1)
i64s = st.integers(-(1 << 63), (1 << 63) - 1)
offsets = st.one_of(st.just(-1), st.integers(0, (1 << 63) - 1), i64s)
error_codes = st.sampled_from(ErrorCode)  # kio's reader refuses codes it does not know
# Any UTF-8 text (not only legal topic names), so lengths count bytes, not characters.
names = st.text(st.characters(exclude_categories=["Cs"]), max_size=30)
append_times = st.one_of(st.just(-1), st.integers(0, MAX_DATETIME_MS))
pieces = st.one_of(
    st.binary(max_size=64),
    st.binary(max_size=64).map(lambda b: memoryview(b)),
    st.binary(min_size=1, max_size=64).map(lambda b: memoryview(b)[1:]),
    # len() of a non-byte memoryview counts items, not bytes
    st.binary(max_size=32).map(lambda b: memoryview(b + b).cast("H")),
)
produce_partitions = st.builds(
    ProducePartition,
    index=i32s,
    error_code=error_codes,
    base_offset=offsets,
    log_append_time_ms=append_times,
    log_start_offset=offsets,
)
fetch_partitions = st.builds(
    FetchPartition,
    index=i32s,
    error_code=error_codes,
    high_watermark=offsets,
    last_stable_offset=offsets,
    log_start_offset=offsets,
    records=st.lists(pieces, max_size=4).map(tuple),
    aborted=st.lists(st.tuples(offsets, offsets), max_size=3).map(tuple),
)
produce_topics = st.lists(st.tuples(names, st.lists(produce_partitions, max_size=5)), max_size=4)
fetch_topics = st.lists(st.tuples(names, st.lists(fetch_partitions, max_size=5)), max_size=4)


# --- properties ---------------------------------------------------------------------------------


@pytest.mark.parametrize("version", PRODUCE_VERSIONS)
@PROPERTIES
@given(correlation_id=i32s, topics=produce_topics, throttle_time_ms=i32s)
def test_produce_is_kio_bytes_and_reads_back(
    version: int, correlation_id: int, topics: ProduceTopics, throttle_time_ms: int
) -> None:
    frame = encode_produce_response(correlation_id, version, topics, throttle_time_ms)

    assert frame == kio_frame(kio_produce(version, topics, throttle_time_ms), correlation_id)
    read_correlation_id, message = kio_read(PRODUCE, version, frame)
    assert read_correlation_id == correlation_id
    assert produce_args(message) == (same_produce(version, topics), throttle_time_ms)


@pytest.mark.parametrize("version", FETCH_VERSIONS)
@PROPERTIES
@given(
    correlation_id=i32s,
    topics=fetch_topics,
    throttle_time_ms=i32s,
    error_code=error_codes,
    session_id=i32s,
)
def test_fetch_is_kio_bytes_and_reads_back(
    version: int,
    correlation_id: int,
    topics: FetchTopics,
    throttle_time_ms: int,
    error_code: int,
    session_id: int,
) -> None:
    if version < 7:
        error_code, session_id = 0, 0  # v7+ fields; see test_fetch_fields_a_version_lacks
    frame = encode_fetch_response(
        correlation_id,
        version,
        topics,
        throttle_time_ms=throttle_time_ms,
        error_code=error_code,
        session_id=session_id,
    )

    kio_message = kio_fetch(version, topics, throttle_time_ms, error_code, session_id)
    assert frame == kio_frame(kio_message, correlation_id)
    read_correlation_id, message = kio_read(FETCH, version, frame)
    assert read_correlation_id == correlation_id
    assert unreproduced(message) is None  # empty aborted list, leader as replica, non-null records
    assert fetch_args(message) == (
        same_fetch(version, topics),
        {"throttle_time_ms": throttle_time_ms, "error_code": error_code, "session_id": session_id},
    )


# --- captured broker responses ------------------------------------------------------------------


def captured(api_key: int, versions: range) -> list[tuple[str, int, int, bytes]]:
    """(where, version, correlation id, frame) of every captured response of ``api_key``."""
    found = []
    for path in sorted(FRAMES.glob("*.jsonl")):
        with path.open() as lines:
            for number, line in enumerate(lines, 1):
                row = json.loads(line)
                if (
                    row["dir"] == "resp"
                    and row["api_key"] == api_key
                    and row["api_version"] in versions
                ):
                    where = f"{path.name}:{number}"
                    found.append(
                        (where, row["api_version"], row["corr"], bytes.fromhex(row["hex"]))
                    )
    return found


def test_captured_produce_responses_reencode() -> None:
    frames = captured(PRODUCE, PRODUCE_VERSIONS)
    assert frames
    for where, version, correlation_id, frame in frames:
        assert kio_read(PRODUCE, version, frame)[0] == correlation_id, where
        topics, throttle_time_ms = produce_args(kio_read(PRODUCE, version, frame)[1])
        ours = encode_produce_response(correlation_id, version, topics, throttle_time_ms)
        assert ours == frame, where


def test_captured_fetch_responses_reencode() -> None:
    compared = 0
    for where, version, correlation_id, frame in captured(FETCH, FETCH_VERSIONS):
        read_correlation_id, message = kio_read(FETCH, version, frame)
        assert read_correlation_id == correlation_id, where
        # A broker may answer with something the gateway deliberately never writes (a null
        # aborted_transactions, a follower as preferred replica, null records): such a frame
        # cannot come out of our encoder, so it is passed over. Tansu's answers in this capture
        # set happen to have none of them, but the check below keeps the test honest if the
        # frames are ever replaced.
        if unreproduced(message) is not None:
            continue
        topics, keywords = fetch_args(message)
        assert encode_fetch_response(correlation_id, version, topics, **keywords) == frame, where
        compared += 1
    assert compared > 0


# --- refusals -----------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [-1, 0, 1, 2, 8, 9, 13])
def test_produce_refuses_versions_not_served(version: int) -> None:
    with pytest.raises(ValueError, match="not served"):
        encode_produce_response(1, version, [])


@pytest.mark.parametrize("version", [0, 3, 12, 16])
def test_fetch_refuses_versions_not_served(version: int) -> None:
    with pytest.raises(ValueError, match="not served"):
        encode_fetch_response(1, version, [])


def test_fetch_fields_a_version_lacks() -> None:
    # Kafka's generated code drops a non-default value of an "ignorable" field the version lacks
    # (top-level ErrorCode < v7) and refuses one that is not (SessionId < v7).
    without_error = encode_fetch_response(1, 6, [])
    assert encode_fetch_response(1, 6, [], error_code=ErrorCode.unknown_server_error) == (
        without_error
    )
    with pytest.raises(LocalProtocolError, match="session_id"):
        encode_fetch_response(1, 6, [], session_id=7)
    assert kio_read(FETCH, 7, encode_fetch_response(1, 7, [], session_id=7))[1].session_id == 7


@pytest.mark.parametrize(
    "topics",
    [
        [("t", [ProducePartition(index=1 << 31, error_code=0)])],
        [("t", [ProducePartition(index=0, error_code=1 << 15)])],
        [("t", [ProducePartition(index=0, error_code=0, base_offset=1 << 63)])],
        [("x" * 32768, [])],  # int16 string length
        [("\udc80", [])],  # not encodable as UTF-8
    ],
)
def test_produce_refuses_values_fields_cannot_hold(topics: ProduceTopics) -> None:
    with pytest.raises(LocalProtocolError):
        encode_produce_response(1, 7, topics)


def test_produce_refuses_throttle_time_out_of_range() -> None:
    with pytest.raises(LocalProtocolError):
        encode_produce_response(1, 7, [], throttle_time_ms=1 << 31)


@pytest.mark.parametrize(
    ("correlation_id", "topics", "keywords"),
    [
        (1, [("t", [FetchPartition(index=0, error_code=0, high_watermark=1 << 63)])], {}),
        (1, [("t", [FetchPartition(0, 0, 0, log_start_offset=-(1 << 64))])], {}),
        (1, [], {"throttle_time_ms": -(1 << 31) - 1}),
        (1 << 31, [], {}),
    ],
)
def test_fetch_refuses_values_fields_cannot_hold(
    correlation_id: int, topics: FetchTopics, keywords: dict[str, int]
) -> None:
    with pytest.raises(LocalProtocolError):
        encode_fetch_response(correlation_id, 11, topics, **keywords)


def test_fetch_writes_record_pieces_back_to_back() -> None:
    ints = memoryview(bytearray(b"ef\x00\x00")).cast("H")[:1]  # len() 1, 2 bytes
    pieces: Sequence[bytes | memoryview] = (b"ab", memoryview(b"xcd")[1:], b"", ints)
    one = encode_fetch_response(9, 11, [("t", [FetchPartition(0, 0, 5, records=pieces)])])
    joined = encode_fetch_response(9, 11, [("t", [FetchPartition(0, 0, 5, records=(b"abcdef",))])])
    assert one == joined
    assert one.endswith(b"\x00\x00\x00\x06abcdef")
