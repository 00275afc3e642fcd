"""The Iggy translator's pure parts: status codes, topic options, offsets, message conversion."""

from __future__ import annotations

from collections import defaultdict

import pytest

from gateway.model import (
    GatewayError,
    Header,
    HeaderKind,
    InvalidRequest,
    Message,
    StreamExists,
    TopicConfig,
    UnknownGroup,
    UnknownPartition,
    UnknownStream,
    UnknownTopic,
    UnknownUser,
    WireBatch,
)
from gateway.model import errors as model_errors
from gateway.translate.iggy import requests as tr
from gateway.translate.iggy import topics as tt
from gateway.translate.iggy.errors import error_of
from protocols.iggy import Message as IggyMessage
from protocols.iggy import PartitionId, SendMessages
from protocols.iggy.batch import encode_batch
from protocols.iggy.headers import HeaderKind as IggyKind
from protocols.iggy.status import Status


@pytest.mark.parametrize(
    ("exc", "by_name", "status"),
    [
        (UnknownStream("x"), False, Status.STREAM_ID_NOT_FOUND),
        (UnknownStream("x"), True, Status.STREAM_NAME_NOT_FOUND),
        (UnknownTopic("x"), False, Status.TOPIC_ID_NOT_FOUND),
        (UnknownTopic("x"), True, Status.TOPIC_NAME_NOT_FOUND),
        (UnknownPartition("x", partitions=1), False, Status.PARTITION_NOT_FOUND),
        (UnknownGroup("x"), False, Status.CONSUMER_GROUP_ID_NOT_FOUND),
        (StreamExists("x"), False, Status.STREAM_NAME_ALREADY_EXISTS),
        (UnknownUser("x"), False, Status.RESOURCE_NOT_FOUND),
        (InvalidRequest("x"), False, Status.INVALID_COMMAND),
        (tr.IggyStatus(Status.EMPTY_MESSAGE_PAYLOAD, "x"), False, Status.EMPTY_MESSAGE_PAYLOAD),
        (GatewayError("x"), False, Status.ERROR),
    ],
)
def test_status_of(exc: GatewayError, by_name: bool, status: int) -> None:
    assert tr.status_of(exc, by_name=by_name) == status


# Both directions of the status table, over every canonical failure, so that they cannot drift.
FAILURES = [
    cls
    for cls in vars(model_errors).values()
    if isinstance(cls, type) and issubclass(cls, GatewayError)
]
# Statuses that kinds of failure with different error types share: the status a server answers
# cannot say which it was (BackendUnavailable or Timeout; GroupError, SequenceError, ...).
SHARED = {Status.TRANSIENT_NOT_ACCEPTED, Status.ERROR}


@pytest.mark.parametrize("by_name", [False, True])
@pytest.mark.parametrize("cls", FAILURES, ids=lambda cls: cls.__name__)
def test_every_failure_has_a_status_that_maps_back(cls: type[GatewayError], by_name: bool) -> None:
    status = tr.status_of(cls("x"), by_name=by_name)
    assert status in set(Status) and status != Status.OK
    if status not in SHARED:
        assert error_of(status).error_type == cls.error_type


def test_a_servers_status_means_a_failure_answered_with_it() -> None:
    failures: dict[int, set[type[GatewayError]]] = defaultdict(set)
    for cls in FAILURES:
        for by_name in (False, True):
            failures[tr.status_of(cls("x"), by_name=by_name)].add(cls)
    mixed = {s for s, classes in failures.items() if len({c.error_type for c in classes}) > 1}
    assert mixed == SHARED
    for status, classes in failures.items():
        assert type(error_of(status)) in classes, Status(status).name


def test_topic_options_become_config_and_come_back() -> None:
    options = {
        "message_expiry": str(60_000_000),
        "max_topic_size": str(3_000_000),
        "compression_algorithm": "gzip",
        "durability": "persisted",
    }
    config = tt.topic_config(options, partitions=3)
    assert config.retention_ms == 60_000
    assert config.retention_bytes == 1_000_000  # per partition
    assert config.compression == "gzip"
    assert config.extra["durability"] == "persisted"
    never = tt.topic_config({"message_expiry": str(tr.U64_MAX)}, partitions=1, base=config)
    assert never.retention_ms == -1 and never.compression == "gzip"  # a patch keeps the rest
    with pytest.raises(InvalidRequest):
        tt.topic_config({"compression_algorithm": "lz4"}, partitions=1)
    with pytest.raises(InvalidRequest):
        tt.topic_config({"message_expiry": "soon"}, partitions=1)


def test_offsets_are_last_consumed_on_the_wire() -> None:
    assert tr.stored_offset(None) is None
    assert tr.stored_offset(0) is None
    assert tr.stored_offset(10) == 9
    assert tr.current_offset(0) == 0 and tr.current_offset(5) == 4


def test_to_iggy_carries_the_key_as_a_header_and_counts_what_it_drops() -> None:
    dropped: list[str] = []
    message = Message(
        b"v",
        key=b"k",
        headers=(Header("ok", b"1", HeaderKind.RAW), Header("empty", b"", HeaderKind.RAW),
                 Header("ts", (5).to_bytes(8, "little"), HeaderKind.TIMESTAMP)),
        timestamp_us=123,
        offset=7,
        id=9,
    )  # fmt: skip
    (out,) = tr.to_iggy([message], dropped.append, append_timestamp=456)
    assert (out.payload, out.offset, out.id, out.timestamp, out.origin_timestamp) == (
        b"v", 7, 9, 456, 123,
    )  # fmt: skip
    keys = [(h.key.value, h.value.kind, h.value.value) for h in out.headers]
    assert keys == [
        (b"ok", IggyKind.RAW, b"1"),
        (b"ts", IggyKind.INT64, (5).to_bytes(8, "little")),
        (b"streamgate.key", IggyKind.RAW, b"k"),
    ]
    assert dropped == ["headers"]


def _send(origin: int) -> SendMessages:
    sent = tuple(IggyMessage(id=i + 1, payload=b"p%d" % i, origin_timestamp=origin + i)
                 for i in range(3))  # fmt: skip
    batch = encode_batch(sent, partition_id=0, base_offset=0, base_timestamp=0,
                         offset_deltas=range(3))  # fmt: skip
    return SendMessages(stream_id=0, topic_id=0, partitioning=PartitionId(id=0), messages=sent,
                        batch=batch)  # fmt: skip


def test_a_sent_batch_is_stored_as_is_and_decodes_for_other_protocols() -> None:
    wire = tr.wire_batch(_send(1_000))
    assert wire is not None and (wire.count, wire.first_timestamp_us, wire.max_timestamp_us) == (
        3, 1_000, 1_002,
    )  # fmt: skip
    stored = WireBatch(format=wire.format, data=wire.data, count=3, base_offset=40)
    decoded = tr.decode_wire(stored)
    assert [(m.offset, m.value, m.id, m.timestamp_us) for m in decoded] == [
        (40, b"p0", 1, 1_000), (41, b"p1", 2, 1_001), (42, b"p2", 3, 1_002),
    ]  # fmt: skip


def test_a_batch_without_origin_timestamps_is_translated() -> None:
    assert tr.wire_batch(_send(0)) is None


def test_topic_frame_reports_resolved_settings() -> None:
    from gateway.model import PartitionInfo, Topic, TopicInfo

    info = TopicInfo(
        topic=Topic("s", "t"),
        id=3,
        partitions=(PartitionInfo(partition=0, log_start_offset=2, next_offset=10),),
        config=TopicConfig(retention_ms=-1, retention_bytes=100, compression="gzip",
                           extra={"max_topic_size": "100"}),
    )  # fmt: skip
    frame = tt.topic_details(info).topic
    assert (frame.id, frame.message_expiry, frame.max_topic_size, frame.messages_count) == (
        3, tr.U64_MAX, 100, 8,
    )  # fmt: skip
    assert frame.compression_algorithm == 2
    assert [(h.key.value, h.value.value) for h in frame.options] == [(b"max_topic_size",
            (100).to_bytes(8, "little"))]  # fmt: skip


def test_refused_logins_are_evicted_with_their_reason() -> None:
    from gateway.translate.iggy.errors import eviction_of
    from protocols.iggy.status import EvictionReason

    assert eviction_of(Status.INVALID_CREDENTIALS) is EvictionReason.INVALID_CREDENTIALS
    assert eviction_of(Status.INVALID_PERSONAL_ACCESS_TOKEN) is EvictionReason.INVALID_TOKEN
    assert eviction_of(Status.USER_INACTIVE) is EvictionReason.USER_INACTIVE
    # any other refusal of a login is reported as bad credentials (the listener's default)
    assert eviction_of(Status.ERROR) is EvictionReason.INVALID_CREDENTIALS
