"""Iggy option values as a real server reads them (issue 19): size and duration strings, µs
expiries kept beside the canonical ms, InvalidTopicSize, resolved settings in topic frames."""

from __future__ import annotations

import pytest

from gateway.model import InvalidRequest, PartitionInfo, Topic, TopicConfig, TopicInfo
from gateway.translate.iggy import topic_settings as ts
from gateway.translate.iggy import topics as tt
from gateway.translate.iggy.errors import IggyStatus, status_of
from gateway.translate.iggy.sizes import U64_MAX, parse_expiry_us, parse_max_size, parse_size
from protocols.iggy import Status
from protocols.iggy.headers import Header, HeaderValue


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("1048576", 1 << 20), ("128 MiB", 128 << 20), ("128MiB", 128 << 20),
        ("1 GB", 10**9), ("1gb", 10**9), ("2 KiB", 2048), ("1.5 KB", 1500), ("7 B", 7),
        ("1 TiB", 1 << 40),
    ],
)  # fmt: skip
def test_size_strings(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "lots", "12 parsecs", "-1", "1 MiB extra", "99999 EiB"])
def test_bad_size_strings(text: str) -> None:
    with pytest.raises(ValueError):
        parse_size(text)


def test_special_values() -> None:
    assert parse_max_size("unlimited") == U64_MAX
    assert parse_max_size("server_default") == 0
    assert parse_max_size("10 MB") == 10**7
    assert parse_expiry_us("none") == U64_MAX
    assert parse_expiry_us("1") == 1  # a number is µs, as on the wire
    assert parse_expiry_us("1h 30m") == 5_400_000_000
    assert parse_expiry_us("250ms") == 250_000
    assert parse_expiry_us("3us") == 3
    with pytest.raises(ValueError):
        parse_expiry_us("soon")
    with pytest.raises(ValueError):
        parse_expiry_us("1h and then")


def test_size_strings_become_numbers_in_the_config() -> None:
    config = tt.topic_config(
        {"segment_size": "128 MiB", "max_topic_size": "1 GiB", "message_expiry": "1m"},
        partitions=2,
    )
    assert config.segment_bytes == 128 << 20
    assert config.retention_bytes == 1 << 29  # per partition
    assert config.retention_ms == 60_000
    assert (config.extra["segment_size"], config.extra["max_topic_size"]) == (
        str(128 << 20), str(1 << 30),
    )  # fmt: skip
    with pytest.raises(InvalidRequest):
        tt.topic_config({"segment_size": "lots"}, partitions=1)


def test_microsecond_expiry_is_answered_while_it_holds() -> None:
    one_us = tt.topic_config({"message_expiry": "1"}, partitions=1)
    assert one_us.retention_ms == 1  # the canonical model holds ms
    assert ts.message_expiry(one_us) == 1  # the client's µs come back
    # Another protocol changed the retention since: the canonical value wins.
    changed = TopicConfig(retention_ms=5, extra=one_us.extra)
    assert ts.message_expiry(changed) == 5_000


def test_max_topic_size_below_the_segment_size_is_1019() -> None:
    small = tt.topic_config({"segment_size": "10 MB", "max_topic_size": "1 MB"}, partitions=1)
    with pytest.raises(IggyStatus) as refused:
        tt.check_topic_size(small)
    assert status_of(refused.value) == Status.INVALID_TOPIC_SIZE
    assert int(Status.INVALID_TOPIC_SIZE) == 1019  # iggy_common IggyError::InvalidTopicSize
    for fine in ({"segment_size": "1 MB", "max_topic_size": "10 MB"},
                 {"segment_size": "10 MB", "max_topic_size": "unlimited"},
                 {"max_topic_size": "1 MB"}):  # fmt: skip
        tt.check_topic_size(tt.topic_config(fine, partitions=1))  # the backend's size unknown
    # Without one given, the segment size the backend gives a topic.
    unsized = tt.topic_config({"max_topic_size": "1 MB"}, partitions=1)
    with pytest.raises(IggyStatus):
        tt.check_topic_size(unsized, default_segment=64 << 20)
    tt.check_topic_size(unsized, default_segment=512 << 10)


def test_stream_and_user_options_are_refused_by_key() -> None:
    tt.check_no_options((), "stream")
    option = Header(key=HeaderValue.string("colour"), value=HeaderValue.string("blue"))
    with pytest.raises(IggyStatus) as refused:
        tt.check_no_options((option,), "stream")
    assert status_of(refused.value) == Status.UNSUPPORTED_OPTION_KEY


def test_topic_frames_report_the_backends_resolved_defaults() -> None:
    info = TopicInfo(
        topic=Topic("s", "t"),
        id=1,
        partitions=(PartitionInfo(partition=0, log_start_offset=0, next_offset=0),),
        defaults=TopicConfig(retention_ms=-1, retention_bytes=-1),
    )
    frame = tt.topic_frame(info)
    assert (frame.message_expiry, frame.max_topic_size) == (U64_MAX, U64_MAX)
    unknown = tt.topic_frame(TopicInfo(topic=Topic("s", "t"), id=1, partitions=()))
    assert (unknown.message_expiry, unknown.max_topic_size) == (0, 0)  # nobody said
    kept = TopicInfo(topic=Topic("s", "t"), id=1, partitions=(),
                     config=TopicConfig(retention_ms=2), defaults=info.defaults)  # fmt: skip
    assert tt.topic_frame(kept).message_expiry == 2_000
