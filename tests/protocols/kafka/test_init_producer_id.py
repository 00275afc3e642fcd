"""InitProducerId v0-v4 through both roles of the Kafka codec (issue 18 item 7).

v0/v1 are non-flexible; v2 is v1 in the flexible encoding (KIP-482: compact strings, tagged
fields, request header v2, response header v1); v3 adds ProducerId and ProducerEpoch to the
request (KIP-360); v4 has v3's fields (KIP-588 only changes an error). The golden frames are
written out by hand from Kafka's InitProducerIdRequest.json / InitProducerIdResponse.json.
"""

from __future__ import annotations

from typing import Any

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode

from protocols._wire import CONNECTION_CLOSED
from protocols.kafka.build import build
from protocols.kafka.framing import (
    KafkaClientCodec,
    KafkaRequest,
    KafkaResponse,
    KafkaServerCodec,
)
from protocols.kafka.versions import ADVERTISED, ApiKey
from tests.helpers.feeding import feed_three_ways
from tests.protocols.kafka.feeds import ClientFeed, ServerFeed

KEY = ApiKey.INIT_PRODUCER_ID
STOP = (CONNECTION_CLOSED,)
PID = 0x0123_4567_89AB_CDEF
REQUEST = {"transactional_id": None, "transaction_timeout": 60_000,
           "producer_id": PID, "producer_epoch": 7}  # fmt: skip
RESPONSE = {"throttle_time": 0, "error_code": ErrorCode.none, "producer_id": PID,
            "producer_epoch": 8}  # fmt: skip

# size | key 22 | version | correlation 7 | client id "t" | ...
REQUEST_V1 = "00000011" "0016" "0001" "00000007" "000174" "ffff" "0000ea60"  # fmt: skip
REQUEST_V4 = (
    "0000001c" "0016" "0004" "00000007" "000174" "00"  # header v2: client id stays int16-sized
    "00" "0000ea60" "0123456789abcdef" "0007" "00"  # null compact string, no tagged fields
)  # fmt: skip
RESPONSE_V1 = "00000014" "00000007" "00000000" "0000" "0123456789abcdef" "0008"  # fmt: skip
RESPONSE_V4 = (
    "00000016" "00000007" "00" "00000000" "0000" "0123456789abcdef" "0008" "00"
)  # fmt: skip


def _body(version: int) -> Any:
    return build(load_request_schema(KEY, version), REQUEST)


def _request_bytes(version: int) -> bytes:
    return KafkaClientCodec("t").send(_body(version), correlation_id=7)[1]


def test_all_five_versions_are_served() -> None:
    assert ADVERTISED[KEY] == (0, 4)


@pytest.mark.parametrize("version", range(5))
def test_request_round_trip(version: int) -> None:
    [req] = feed_three_ways(ServerFeed, _request_bytes(version), eof=True, stop_at=STOP)
    assert isinstance(req, KafkaRequest)
    assert (req.api_key, req.api_version, req.correlation_id) == (KEY, version, 7)
    assert req.client_id == "t" and req.body.transactional_id is None
    assert req.body.transaction_timeout.total_seconds() == 60
    # version-gated: the KIP-360 fields exist from v3 on
    got: dict[str, Any] = {
        name: getattr(req.body, name, None) for name in ("producer_id", "producer_epoch")
    }
    assert got == ({"producer_id": PID, "producer_epoch": 7} if version >= 3
                   else {"producer_id": None, "producer_epoch": None})  # fmt: skip


@pytest.mark.parametrize("version", range(5))
def test_response_round_trip(version: int) -> None:
    [req] = feed_three_ways(ServerFeed, _request_bytes(version), eof=True, stop_at=STOP)
    assert isinstance(req, KafkaRequest)
    body = build(load_response_schema(KEY, version), RESPONSE)
    frame = KafkaServerCodec(ADVERTISED).send(req, body)
    [answer] = feed_three_ways(
        lambda: ClientFeed([(_body(version), 7)], client_id="t"),
        frame,
        eof=True,
        stop_at=(CONNECTION_CLOSED,),
    )
    assert isinstance(answer, KafkaResponse)
    assert answer.correlation_id == 7 and answer.body == body


@pytest.mark.parametrize(
    ("version", "request_hex", "response_hex"),
    [(1, REQUEST_V1, RESPONSE_V1), (4, REQUEST_V4, RESPONSE_V4)],
)
def test_golden_frames(version: int, request_hex: str, response_hex: str) -> None:
    assert _request_bytes(version).hex() == request_hex
    server = KafkaServerCodec(ADVERTISED)
    req = server.decode_request(bytes.fromhex(request_hex)[4:])
    assert isinstance(req, KafkaRequest)
    body = build(load_response_schema(KEY, version), RESPONSE)
    assert server.send(req, body).hex() == response_hex


def test_v2_is_v1_in_the_flexible_encoding() -> None:
    v1, v2 = _request_bytes(1), _request_bytes(2)
    # header v2 adds an empty tagged-field section (+1); the null transactional id is a compact
    # string, one byte (0) instead of two (-1); the body ends with its tagged fields (+1)
    assert len(v2) == len(v1) + 1
    assert v2[15:17] == b"\x00\x00" and v2[17:21] == v1[17:21] and v2[-1:] == b"\x00"
