"""The strict kio builder (protocols/kafka/build.py): one dict for every version of a message, a
key no version has or a required field left out raises, defaults and conversions fill the rest."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.heartbeat.v0.response import HeartbeatResponse as HeartbeatResponseV0
from kio.schema.metadata.v5.response import MetadataResponseTopic

from protocols._wire import LocalProtocolError
from protocols.kafka.build import build
from protocols.kafka.versions import ApiKey

HEARTBEAT_V1 = load_response_schema(ApiKey.HEARTBEAT, 1)
METADATA_V5 = load_response_schema(ApiKey.METADATA, 5)
METADATA_V12 = load_response_schema(ApiKey.METADATA, 12)
API_VERSIONS_V3 = load_response_schema(ApiKey.API_VERSIONS, 3)


def metadata(**topic: Any) -> dict[str, Any]:
    return {
        "throttle_time": 0,
        "brokers": [{"node_id": 1, "host": "gw", "port": 9092}],
        "topics": [{"error_code": 0, "name": "t", "partitions": [], **topic}],
    }


def test_a_key_no_version_has_raises() -> None:
    with pytest.raises(LocalProtocolError, match=r"HeartbeatResponse v1: .*'eror_code'"):
        build(HEARTBEAT_V1, {"throttle_time": 0, "error_code": 0, "eror_code": 3})


def test_a_missing_required_field_raises() -> None:
    # The point of strictness: a forgotten error code must not go out as 0, success.
    with pytest.raises(LocalProtocolError, match=r"HeartbeatResponse v1: .*'error_code'"):
        build(HEARTBEAT_V1, {"throttle_time": 0})
    with pytest.raises(LocalProtocolError, match="'throttle_time'"):
        build(HEARTBEAT_V1, {"error_code": 0})


def test_fields_of_other_versions_are_accepted_and_dropped() -> None:
    answer = build(HeartbeatResponseV0, {"throttle_time": 0, "error_code": 27})
    assert answer == HeartbeatResponseV0(error_code=ErrorCode.rebalance_in_progress)
    # ... and a field only a later version has is not required at an earlier one.
    assert build(METADATA_V5, metadata(topic_id=None)).topics[0].name == "t"


def test_nested_entities_are_checked() -> None:
    with pytest.raises(LocalProtocolError, match=r"MetadataResponseTopic v5: .*'eror_code'"):
        build(METADATA_V5, metadata(eror_code=3))
    topic_without_error: dict[str, Any] = {"name": "t", "partitions": []}
    with pytest.raises(LocalProtocolError, match=r"MetadataResponseTopic v12: .*'error_code'"):
        build(METADATA_V12, {**metadata(), "topics": [topic_without_error]})
    partition = {"error_code": 0, "partition_index": 0, "leader_id": 1, "leader_epoch": 4}
    with pytest.raises(LocalProtocolError, match=r"MetadataResponsePartition v5: .*'leader_id'"):
        build(METADATA_V5, metadata(partitions=[{"error_code": 0, "partition_index": 0}]))
    # leader_epoch is v7+: accepted at v5 and dropped, kept at v12.
    assert not hasattr(build(METADATA_V5, metadata(partitions=[partition])).topics[0].partitions[0],
                       "leader_epoch")  # fmt: skip
    v12 = build(METADATA_V12, metadata(topic_id=None, partitions=[partition]))
    assert v12.topics[0].partitions[0].leader_epoch == 4


def test_defaults_fill_and_values_convert() -> None:
    answer = build(METADATA_V5, metadata())
    assert (answer.cluster_id, answer.controller_id) == (None, -1)  # schema defaults
    assert answer.topics[0].is_internal is False
    assert answer.topics[0].error_code is ErrorCode.none
    assert answer.brokers[0].rack is None
    assert answer.throttle_time == datetime.timedelta(0)
    versions = build(API_VERSIONS_V3, {"error_code": 0, "api_keys": [], "throttle_time": 250})
    assert versions.throttle_time == datetime.timedelta(milliseconds=250)
    assert (versions.supported_features, versions.finalized_features_epoch) == ((), -1)  # tagged


def test_built_entities_and_nulls_pass_through() -> None:
    topic = build(MetadataResponseTopic, {"error_code": 0, "name": "t", "partitions": []})
    assert build(METADATA_V5, {**metadata(), "topics": [topic]}).topics == (topic,)
    request = build(load_request_schema(ApiKey.METADATA, 5),
                    {"topics": None, "allow_auto_topic_creation": False})  # fmt: skip
    assert request.topics is None


def test_only_kio_entities_are_built() -> None:
    with pytest.raises(LocalProtocolError, match="not a kio entity"):
        build(dict, {})
