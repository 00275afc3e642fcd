"""The Iggy backend's pure parts: its URL, group <-> consumer names, offsets, status codes and
topic settings in both directions."""

from __future__ import annotations

import pytest

from gateway.backends.iggy.backend import IggyBackend, parse_url
from gateway.backends.iggy.pool import IggyTarget
from gateway.backends.url import BackendUrlError, create_backend
from gateway.model import (
    BackendUnavailable,
    GatewayError,
    InvalidRequest,
    PartitionInfo,
    StreamExists,
    Topic,
    TopicConfig,
    TopicInfo,
    UnknownPartition,
    UnknownStream,
    UnknownTopic,
    Unsupported,
)
from gateway.translate.iggy.errors import error_of, status_of
from gateway.translate.iggy.messages import (
    WIRE_FORMAT,
    consumer_group_name,
    consumer_of,
    next_offset,
)
from gateway.translate.iggy.topic_settings import (
    options_of,
    topic_config,
    topic_info,
    topic_options,
)
from gateway.translate.iggy.topics import topic_details
from protocols.iggy import Consumer, ConsumerKind
from protocols.iggy.status import Status


@pytest.mark.parametrize(
    ("url", "target"),
    [
        ("iggy://iggy:iggy@127.0.0.1:8090", IggyTarget(host="127.0.0.1", port=8090)),
        ("iggy://u%40x:p%3Aw@example.org:9000",
         IggyTarget(host="example.org", port=9000, username="u@x", password="p:w")),
        ("iggy://localhost", IggyTarget(host="localhost")),  # root iggy/iggy on 8090
        ("iggy://iggypat-abc@10.0.0.1:8090",
         IggyTarget(host="10.0.0.1", username="", password="", token="iggypat-abc")),
    ],
)  # fmt: skip
def test_url(url: str, target: IggyTarget) -> None:
    assert parse_url(url) == target


def test_the_url_selects_the_iggy_backend() -> None:
    backend = create_backend("iggy://iggy:secret@127.0.0.1:8091")
    assert isinstance(backend, IggyBackend) and backend.name == "iggy"
    assert backend.target == IggyTarget(host="127.0.0.1", port=8091, password="secret")
    caps = backend.capabilities
    assert (caps.native_groups, caps.native_offsets, caps.idempotent_producers) == (
        False, True, False,
    )  # fmt: skip
    assert caps.timestamp_index and caps.wire_formats == {WIRE_FORMAT}
    with pytest.raises(BackendUrlError):
        create_backend("iggy://")


@pytest.mark.parametrize(
    ("group", "consumer"),
    [
        ("orders", "orders"),
        ("iggy-consumer-7", 7),  # an Iggy client's numeric consumer, numeric again
        ("iggy-consumer-reader", "reader"),
        ("iggy-consumer-99999999999", "99999999999"),  # above u32: a name
        ("12", "12"),
    ],
)
def test_groups_are_single_consumers(group: str, consumer: str | int) -> None:
    assert consumer_of(group) == Consumer(kind=ConsumerKind.CONSUMER, id=consumer)


def test_the_listener_and_the_backend_agree_on_consumer_names() -> None:
    for ident in (0, 7, "reader"):
        assert consumer_of(consumer_group_name(ident)).id == ident


@pytest.mark.parametrize(
    ("current", "count", "expected"), [(0, 0, 0), (0, 1, 1), (4, 5, 5), (4, 0, 5), (9, 3, 10)]
)
def test_next_offset_from_current_offset_and_count(current: int, count: int, expected: int) -> None:
    assert next_offset(current, count) == expected


@pytest.mark.parametrize(
    "exc",
    [
        UnknownStream("x"),
        UnknownTopic("x"),
        UnknownPartition("x"),
        StreamExists("x"),
        InvalidRequest("x"),
        Unsupported("x"),
        BackendUnavailable("x"),
    ],
)
def test_statuses_map_back(exc: GatewayError) -> None:
    for by_name in (False, True):
        assert type(error_of(status_of(exc, by_name=by_name))) is type(exc)


def test_unknown_statuses_are_invalid_requests() -> None:
    assert isinstance(error_of(Status.INVALID_TOPIC_NAME), InvalidRequest)
    assert isinstance(error_of(123456), InvalidRequest)
    assert error_of(Status.TRANSIENT_NOT_ACCEPTED).retriable


def test_topic_settings_survive_both_directions() -> None:
    """Canonical config -> the backend's CreateTopic options -> the listener's config -> its
    GetTopic answer -> the backend's TopicInfo: the settings come back."""
    config = TopicConfig(retention_ms=60_000, retention_bytes=1_000, compression="gzip",
                         segment_bytes=4096, extra={"cleanup.policy": "delete"})  # fmt: skip
    options = options_of(topic_options(config, 3))
    assert "cleanup.policy" not in options  # a real server refuses unknown keys (4041)
    served = topic_config(options, partitions=3)
    parts = tuple(PartitionInfo(partition=p, log_start_offset=2, next_offset=7) for p in range(3))
    listener_info = TopicInfo(topic=Topic("s", "t"), id=4, partitions=parts, config=served)
    back = topic_info("s", topic_details(listener_info))
    assert back.topic == Topic("s", "t") and back.id == 4
    assert (back.config.retention_ms, back.config.retention_bytes) == (60_000, 1_000)
    assert (back.config.compression, back.config.segment_bytes) == ("gzip", 4096)
    assert [(p.log_start_offset, p.next_offset) for p in back.partitions] == [(2, 7)] * 3
    assert options_of(topic_options(TopicConfig(), 3)) == {}  # defaults, or unchanged
