"""Kafka framing (kafka.md §2, §7): frames captured from four real clients and a real broker
decode and re-encode byte for byte in both roles; refusals, size limits, EOF and fuzz."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache, partial
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.index import KioIndexError, load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode

from protocols._wire import (
    CONNECTION_CLOSED,
    I16_BE,
    I32_BE,
    NEED_DATA,
    FrameTooLarge,
    LocalProtocolError,
    RemoteProtocolError,
)
from protocols.kafka.build import build
from protocols.kafka.framing import (
    UNSUPPORTED_VERSION,
    KafkaClientCodec,
    KafkaRequest,
    KafkaResponse,
    KafkaServerCodec,
    UnsupportedApiVersions,
    encode_api_versions_fallback,
)
from protocols.kafka.versions import ADVERTISED, REFUSED, SASL_KEYS, ApiKey, advertised
from tests.helpers.feeding import drain, feed_three_ways
from tests.protocols.kafka.feeds import SERVE_ALL, ClientFeed, ServerFeed

VECTORS = Path(__file__).resolve().parents[2] / "vectors" / "kafka"
FRAMES = VECTORS / "frames"
FILES = sorted(p.name for p in FRAMES.glob("*.jsonl"))

# A broker serving every version of every key (the refusal rules still apply: Produce v0-v2 and
# ApiVersions above the range), so that every captured request decodes.


# --- the captured frames ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Captured:
    file: str
    line: int
    conn: int
    request: bool
    api_key: int
    api_version: int  # of the request; a response carries the version of what it answers
    corr: int
    data: bytes  # the whole frame, size prefix included

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


@cache
def captured(file: str) -> tuple[Captured, ...]:
    out = []
    with (FRAMES / file).open() as lines:
        for n, line in enumerate(lines, 1):
            row = json.loads(line)
            data = bytes.fromhex(row["hex"])
            assert I32_BE.unpack_from(data)[0] == len(data) - 4, f"{file}:{n}: size prefix"
            assert row.get("len", len(data)) == len(data), f"{file}:{n}: len"
            out.append(
                Captured(
                    file=file,
                    line=n,
                    conn=row["conn"],
                    request=row["dir"] == "req",
                    api_key=row["api_key"],
                    api_version=row["api_version"],
                    corr=row["corr"],
                    data=data,
                )
            )
    return tuple(out)


def connections(file: str) -> dict[int, list[Captured]]:
    by_conn: dict[int, list[Captured]] = {}
    for frame in captured(file):
        by_conn.setdefault(frame.conn, []).append(frame)
    return by_conn


def numbered(client_id: str | None, correlation_id: int) -> KafkaClientCodec:
    """A client codec whose next request gets ``correlation_id``."""
    codec = KafkaClientCodec(client_id)
    codec._next_id = correlation_id  # the counter itself: later sends go on from here
    return codec


def is_mock_api_versions(frame: Captured) -> bool:
    """librdkafka's mock cluster answers an unsupported ApiVersions in a shape of its own
    (kafka.md §1.4 trap 3, §5): the one set of captured frames that is malformed."""
    return frame.file == "cap_mock_kp.jsonl" and not frame.request and frame.api_key == 18


# Tansu writes some tagged fields even when they hold their default value; a canonical encoder
# (Kafka's, kio's) leaves those out, so these re-encode to the same message but fewer bytes.
TANSU_DEFAULT_TAGS = {
    (ApiKey.API_VERSIONS, 3): "SupportedFeatures, FinalizedFeaturesEpoch, FinalizedFeatures,"
    " ZkMigrationReady",
    (ApiKey.API_VERSIONS, 4): "the same four",
    (ApiKey.FETCH, 16): "NodeEndpoints",
    (ApiKey.CREATE_TOPICS, 7): "TopicConfigErrorCode",
}


@dataclass(slots=True)
class Tally:
    requests: int = 0  # request frames re-encoded byte for byte
    responses: int = 0  # response frames re-encoded byte for byte
    fallbacks: int = 0  # of which ApiVersions error-35 answers (v0 body)
    default_tags: list[str] = field(default_factory=list)  # same message, fewer bytes
    malformed: list[str] = field(default_factory=list)  # librdkafka mock: does not decode

    @property
    def lines(self) -> int:
        return self.requests + self.responses + len(self.default_tags) + len(self.malformed)


def _request(server: KafkaServerCodec, frame: Captured) -> KafkaRequest:
    server.receive_data(frame.data)
    req = server.next_request()
    assert isinstance(req, KafkaRequest), f"{frame.where}: {req!r}"
    assert (req.api_key, req.api_version, req.correlation_id) == (
        frame.api_key,
        frame.api_version,
        frame.corr,
    ), frame.where
    assert req.size == len(frame.data) - 4
    assert server.next_request() is NEED_DATA
    return req


def replay(file: str) -> Tally:
    """Each connection of ``file`` through a server codec (requests) and a client codec
    (responses), re-encoding every frame with the codec of the other role."""
    tally = Tally()
    for frames in connections(file).values():
        server = KafkaServerCodec(SERVE_ALL)
        client = KafkaClientCodec(None)
        asked: dict[int, KafkaRequest] = {}
        for frame in frames:
            if frame.request:
                req = _request(server, frame)
                # The client codec numbers requests itself: make it use the captured id.
                client.client_id = req.client_id
                corr, data = client.send(req.body, correlation_id=req.correlation_id)
                assert corr == frame.corr
                assert data == frame.data, f"{frame.where}: request re-encoded differently"
                asked[corr] = req
                tally.requests += 1
                continue
            client.receive_data(frame.data)
            if is_mock_api_versions(frame):
                with pytest.raises(RemoteProtocolError):
                    client.next_response()
                tally.malformed.append(frame.where)
                continue
            resp = client.next_response()
            assert isinstance(resp, KafkaResponse), frame.where
            req = asked[frame.corr]
            assert (resp.api_key, resp.correlation_id) == (req.api_key, frame.corr)
            if resp.api_version != req.api_version:
                # The ApiVersions fallback (§1.4 trap 3) has the v0 layout whatever was asked;
                # the listener writes it with encode_api_versions_fallback, not send().
                assert (resp.api_key, resp.api_version) == (ApiKey.API_VERSIONS, 0), frame.where
                assert resp.body.error_code == UNSUPPORTED_VERSION
                with pytest.raises(LocalProtocolError):
                    server.send(req, resp.body)
                ranges = {k.api_key: (k.min_version, k.max_version) for k in resp.body.api_keys}
                data = encode_api_versions_fallback(frame.corr, ranges)
                tally.fallbacks += 1
            else:
                data = server.send(req, resp.body)
            if data == frame.data:
                tally.responses += 1
                continue
            # Not the same bytes: only allowed for Tansu's default-valued tagged fields, and the
            # re-encoded frame must still carry exactly the same message.
            assert (frame.api_key, frame.api_version) in TANSU_DEFAULT_TAGS, frame.where
            assert frame.file.startswith("cap_") and not frame.file.startswith("cap_r"), (
                f"{frame.where}: only Tansu's own answers carry default tags"
            )
            assert len(data) < len(frame.data), frame.where
            again = numbered(None, frame.corr)
            again.send(req.body)
            again.receive_data(data)
            same = again.next_response()
            assert isinstance(same, KafkaResponse)
            assert same.body == resp.body, f"{frame.where}: re-encoding changed the message"
            tally.default_tags.append(frame.where)
    return tally


# Per file: (responses with default tags, malformed responses); every other frame is compared.
EXCEPTIONS = {
    "cap_codecs.jsonl": (10, 0),  # ApiVersions v3 x8, v4 x2
    "cap_confluent.jsonl": (9, 0),  # ApiVersions v3 x7, Fetch v16 x2
    "cap_kafkapython.jsonl": (8, 0),  # ApiVersions v4 x7, CreateTopics v7
    "cap_mock_kp.jsonl": (0, 9),
}


@pytest.mark.parametrize("file", FILES)
def test_captured_frames_reencode_byte_for_byte(file: str) -> None:
    tally = replay(file)
    assert tally.lines == len(captured(file))
    assert (len(tally.default_tags), len(tally.malformed)) == EXCEPTIONS.get(file, (0, 0))


def test_every_captured_line_is_accounted_for() -> None:
    assert len(FILES) == 26
    total = Tally()
    for file in FILES:
        tally = replay(file)
        total.requests += tally.requests
        total.responses += tally.responses
        total.fallbacks += tally.fallbacks
        total.default_tags += tally.default_tags
        total.malformed += tally.malformed
    assert sum(len(captured(file)) for file in FILES) == 974
    assert total.requests == 494
    assert total.responses == 444  # 4 of them ApiVersions fallbacks
    assert total.fallbacks == 4
    assert len(total.default_tags) == 27
    assert len(total.malformed) == 9
    assert total.lines == 974
    # 938 of the 974 frames compared byte for byte; 27 as messages; 9 rejected as malformed.


# --- feeding: whole, byte by byte, with trailing bytes; split at every byte ---------------------


def _decoded_requests(frames: list[Captured]) -> list[KafkaRequest]:
    server = KafkaServerCodec(SERVE_ALL)
    return [_request(server, f) for f in frames if f.request]


@pytest.mark.parametrize("file", FILES)
def test_request_streams_fed_three_ways(file: str) -> None:
    for frames in connections(file).values():
        stream = b"".join(f.data for f in frames if f.request)
        got = feed_three_ways(ServerFeed, stream, eof=True, stop_at=(CONNECTION_CLOSED,))
        assert got == _decoded_requests(frames)
        assert len(got) > 0


@pytest.mark.parametrize("file", FILES)
def test_response_streams_fed_three_ways(file: str) -> None:
    for frames in connections(file).values():
        responses = [f for f in frames if not f.request and not is_mock_api_versions(f)]
        if not responses:
            continue
        requests = _decoded_requests(frames)
        got = feed_three_ways(
            partial(ClientFeed, requests),
            b"".join(f.data for f in responses),
            eof=True,
            stop_at=(CONNECTION_CLOSED,),
        )
        assert [r.correlation_id for r in got if isinstance(r, KafkaResponse)] == [
            f.corr for f in responses
        ]
        assert len(got) == len(responses)


@pytest.mark.parametrize("file", FILES)
def test_requests_split_at_every_byte(file: str) -> None:
    """The first requests of the file's first connection, back to back, cut in two anywhere."""
    first = next(iter(connections(file).values()))
    requests = [f for f in first if f.request][:3]
    stream = b"".join(f.data for f in requests)
    whole = _decoded_requests(requests)
    for cut in range(len(stream) + 1):
        feed = ServerFeed()
        feed.receive_data(stream[:cut])
        got = drain(feed)
        feed.receive_data(stream[cut:])
        got += drain(feed)
        feed.receive_eof()
        assert feed.next_frame() is CONNECTION_CLOSED
        assert got == whole, f"cut at byte {cut}"


# --- the hex examples of kafka.md §7 ------------------------------------------------------------

DOCUMENTED_REQUESTS: list[tuple[str, str, dict[str, Any]]] = [
    (
        "000000400012000300000001000772646b61666b610017636f6e666c75656e742d6b61666b612d707974686f6e"
        "16322e31362e312d72646b61666b612d322e31362e3000",
        "rdkafka",
        {
            "client_software_name": "confluent-kafka-python",
            "client_software_version": "2.16.1-rdkafka-2.16.0",
        },
    ),
    (
        "000000160003000500000002000772646b61666b610000000000",
        "rdkafka",
        {"topics": (), "allow_auto_topic_creation": False},
    ),
    (
        "00000033001200040000000100136b61666b612d707974686f6e2d332e302e3132000d6b61666b612d707974"
        "686f6e07332e302e313200",
        "kafka-python-3.0.12",
        {"client_software_name": "kafka-python", "client_software_version": "3.0.12"},
    ),
    (
        "00000022000300050000000200136b61666b612d707974686f6e2d332e302e31320000000001",
        "kafka-python-3.0.12",
        {"topics": (), "allow_auto_topic_creation": True},
    ),
    ("000000190012000000000001000f61696f6b61666b612d302e31342e30", "aiokafka-0.14.0", {}),
    (
        "0000001e0003000500000002000f61696f6b61666b612d302e31342e300000000001",
        "aiokafka-0.14.0",
        {"topics": (), "allow_auto_topic_creation": True},
    ),
    (
        "000000240012000300000001000772646b61666b61000b6c696272646b61666b6106322e302e3200",
        "rdkafka",
        {"client_software_name": "librdkafka", "client_software_version": "2.0.2"},
    ),
    ("000000160003000400000002000772646b61666b610000000000", "rdkafka", {"topics": ()}),
]

# kafka.md §7's answer grown by issue 20: ListOffsets 1-7, ListGroups 0-4, and DeleteRecords,
# AlterConfigs, DescribeLogDirs, DeleteGroups, IncrementalAlterConfigs; then DescribeConfigs 1-3,
# AlterReplicaLogDirs, ElectLeaders and the partition reassignment APIs; then
# DescribeUserScramCredentials and AlterUserScramCredentials 0, entries 0032 0000 0000 00 and
# 0033 0000 0000 00; then DescribeAcls, CreateAcls and DeleteAcls 1, entries 001d 0001 0001 00
# to 001f 0001 0001 00 (35 keys: compact array count 0x24).
DOCUMENTED_API_VERSIONS = (
    "0000011d000000010000280000000000070000010004000b0000020001000700000300010005000008000200070000"
    "090001000500000a0000000200000b0000000500000c0000000300000d0000000100000e0000000300000f00000004"
    "0000100000000400001100000001000012000000040000130002000400001400010003000015000000010000160000"
    "0004000018000000020000190000000200001a0000000200001c0000000200001d0001000100001e0001000100001f"
    "0001000100002000010003000021000000010000220001000100002300010001000024000000010000250000000100"
    "002a0000000100002b0000000100002c0000000000002d0000000000002e0000000000003200000000000033000000"
    "00000000000000"
)
DOCUMENTED_FALLBACK = "0000001000000001002300000001001200000002"
# An ApiVersions v3 request whose content does not matter (kio requires the two fields).
NO_SOFTWARE = {"client_software_name": "", "client_software_version": ""}
DOCUMENTED_METADATA = (
    "000000370000000200000000000000010000000100093132372e302e302e3100004a97ffff000c66616b652d636c75"
    "737465720000000100000000"
)


@pytest.mark.parametrize(("hex_frame", "client_id", "fields"), DOCUMENTED_REQUESTS)
def test_documented_first_requests(hex_frame: str, client_id: str, fields: dict[str, Any]) -> None:
    frame = bytes.fromhex(hex_frame)
    req = KafkaServerCodec(ADVERTISED).decode_request(frame[4:])  # all served by the gateway
    assert isinstance(req, KafkaRequest)
    assert req.client_id == client_id
    for name, value in fields.items():
        assert getattr(req.body, name) == value
    client = numbered(client_id, req.correlation_id)
    assert client.send(req.body)[1] == frame


def test_advertised_table_is_the_validated_one() -> None:
    with (VECTORS / "advertised-versions.json").open() as f:
        table = {int(k): (lo, hi) for k, (lo, hi) in json.load(f).items()}
    assert dict(ADVERTISED) == table
    assert advertised(sasl=True) == table
    assert advertised(sasl=False) == {k: v for k, v in table.items() if k not in SASL_KEYS}
    assert set(SASL_KEYS) == {ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE}


@pytest.mark.parametrize("version", [3, 4])
def test_documented_api_versions_answer(version: int) -> None:
    """Built as the Kafka listener's ``api_versions`` builds it, for the full §1.3 set."""
    request = KafkaServerCodec(ADVERTISED).decode_request(
        bytes.fromhex(DOCUMENTED_REQUESTS[0 if version == 3 else 2][0])[4:]
    )
    assert isinstance(request, KafkaRequest) and request.api_version == version
    body = build(
        load_response_schema(ApiKey.API_VERSIONS, version),
        {
            "error_code": ErrorCode.none,
            "throttle_time": 0,
            "api_keys": [
                {"api_key": k, "min_version": lo, "max_version": hi}
                for k, (lo, hi) in sorted(advertised(sasl=True).items())
            ],
        },
    )
    assert KafkaServerCodec(ADVERTISED).send(request, body).hex() == DOCUMENTED_API_VERSIONS


def test_documented_fallback_answer() -> None:
    served_only_api_versions: dict[int, tuple[int, int]] = {ApiKey.API_VERSIONS: (0, 2)}
    assert encode_api_versions_fallback(1, served_only_api_versions).hex() == DOCUMENTED_FALLBACK
    client = KafkaClientCodec("rdkafka")
    client.send(build(load_request_schema(18, 3), NO_SOFTWARE))
    client.receive_data(bytes.fromhex(DOCUMENTED_FALLBACK))
    resp = client.next_response()
    assert isinstance(resp, KafkaResponse) and resp.api_version == 0
    assert resp.body.error_code == UNSUPPORTED_VERSION
    assert [(k.api_key, k.min_version, k.max_version) for k in resp.body.api_keys] == [(18, 0, 2)]


def test_documented_metadata_answer() -> None:
    client = numbered("rdkafka", 2)
    req = KafkaServerCodec(ADVERTISED).decode_request(bytes.fromhex(DOCUMENTED_REQUESTS[1][0])[4:])
    assert isinstance(req, KafkaRequest)
    client.send(req.body)
    client.receive_data(bytes.fromhex(DOCUMENTED_METADATA))
    resp = client.next_response()
    assert isinstance(resp, KafkaResponse)
    (broker,) = resp.body.brokers
    assert (broker.node_id, broker.host, broker.port) == (1, "127.0.0.1", 19095)
    assert (resp.body.cluster_id, resp.body.controller_id, resp.body.topics) == (
        "fake-cluster",
        1,
        (),
    )
    assert KafkaServerCodec(ADVERTISED).send(req, resp.body).hex() == DOCUMENTED_METADATA


# --- refusals and malformed input ---------------------------------------------------------------


def header(api_key: int, version: int, corr: int = 7, client_id: bytes | None = b"t") -> bytes:
    cid = I16_BE.pack(-1) if client_id is None else I16_BE.pack(len(client_id)) + client_id
    return I16_BE.pack(api_key) + I16_BE.pack(version) + I32_BE.pack(corr) + cid


def sized(frame: bytes) -> bytes:
    return I32_BE.pack(len(frame)) + frame


def served(frame: bytes, versions: Mapping[int, tuple[int, int]] = ADVERTISED) -> object:
    codec = KafkaServerCodec(versions)
    codec.receive_data(sized(frame))
    return codec.next_request()


METADATA_V5 = header(3, 5) + I32_BE.pack(0) + b"\x01"  # no topics, auto-create on


def test_a_valid_request_decodes() -> None:
    req = served(METADATA_V5)
    assert isinstance(req, KafkaRequest)
    assert (req.api_key, req.api_version, req.correlation_id, req.client_id) == (3, 5, 7, "t")
    assert (req.body.topics, req.body.allow_auto_topic_creation) == ((), True)


@pytest.mark.parametrize("api_key", [4, 5, 6, 7, 27, 47, 68, 69, 71, 72, 99, 1000, -1, 32767])
def test_unknown_or_unserved_api_key(api_key: int) -> None:
    with pytest.raises(RemoteProtocolError, match=f"api key {api_key}"):
        served(header(api_key, 0) + b"\0" * 8)


@pytest.mark.parametrize(
    ("api_key", "version"),
    [(1, 3), (1, 12), (1, -1), (3, 0), (3, 6), (19, 1), (19, 5), (37, 2), (0, 8), (0, 13)],
)
def test_version_out_of_range(api_key: int, version: int) -> None:
    with pytest.raises(RemoteProtocolError, match="not served"):
        served(header(api_key, version) + b"\0" * 8)


@pytest.mark.parametrize("version", sorted(REFUSED[ApiKey.PRODUCE]))
def test_produce_v0_to_v2_refused_although_advertised(version: int) -> None:
    low, high = ADVERTISED[ApiKey.PRODUCE]
    assert low <= version <= high
    with pytest.raises(RemoteProtocolError, match=f"PRODUCE v{version}"):
        served(header(0, version) + b"\0" * 16)


def test_produce_v3_is_served() -> None:
    body = I16_BE.pack(-1) + I16_BE.pack(1) + I32_BE.pack(1000) + I32_BE.pack(0)
    req = served(header(0, 3) + body)
    assert isinstance(req, KafkaRequest) and req.body.acks == 1


@pytest.mark.parametrize("version", [5, 9, 127, 32767])
def test_newer_api_versions_gets_the_fallback(version: int) -> None:
    # The body is whatever the newer version holds: it is not parsed.
    got = served(header(18, version, corr=42) + b"\x07future\x00\xff")
    assert isinstance(got, UnsupportedApiVersions)
    assert (got.api_version, got.correlation_id) == (version, 42)


def test_api_versions_below_the_range_is_not_a_fallback() -> None:
    with pytest.raises(RemoteProtocolError):
        served(header(18, -1))


@pytest.mark.parametrize("declared", [-1, -(2**31), 1001, 2**31 - 1])
def test_frame_size_refused_before_the_body_arrives(declared: int) -> None:
    codec = KafkaServerCodec(ADVERTISED, max_frame_size=1000)
    prefix = I32_BE.pack(declared)
    for byte in prefix[:3]:
        codec.receive_data(bytes([byte]))
        assert codec.next_request() is NEED_DATA
    codec.receive_data(prefix[3:])  # no byte of the body has come
    with pytest.raises(FrameTooLarge) as info:
        codec.next_request()
    assert (info.value.declared, info.value.maximum) == (declared, 1000)


def test_frame_of_exactly_the_maximum_waits_for_its_body() -> None:
    codec = KafkaServerCodec(ADVERTISED, max_frame_size=len(METADATA_V5))
    codec.receive_data(sized(METADATA_V5)[:-1])
    assert codec.next_request() is NEED_DATA
    codec.receive_data(sized(METADATA_V5)[-1:])
    assert isinstance(codec.next_request(), KafkaRequest)


def test_client_codec_refuses_an_oversized_response_too() -> None:
    client = KafkaClientCodec("t", max_frame_size=100)
    client.send(build(load_request_schema(18, 0), {}))
    client.receive_data(I32_BE.pack(101))
    with pytest.raises(FrameTooLarge):
        client.next_response()


@pytest.mark.parametrize("size", range(10))
def test_truncated_header(size: int) -> None:
    with pytest.raises(RemoteProtocolError, match="no room for a header"):
        served(header(3, 5, client_id=b"client")[:size])


def test_client_id_longer_than_the_frame() -> None:
    frame = header(3, 5)[:8] + I16_BE.pack(50) + b"abc"
    with pytest.raises(RemoteProtocolError, match="malformed MetadataRequest"):
        served(frame)


def test_body_with_trailing_bytes() -> None:
    with pytest.raises(RemoteProtocolError, match="1 bytes after the body"):
        served(METADATA_V5 + b"\x00")


@pytest.mark.parametrize(
    ("frame", "what"),
    [
        (header(2, 1) + b"\x01\x02\x03", "ListOffsetsRequest"),  # body cut short
        (header(3, 5) + I32_BE.pack(1) + I16_BE.pack(-5) + b"\x01", "MetadataRequest"),
        (header(3, 5) + I32_BE.pack(1) + I16_BE.pack(2) + b"\xff\xfe\x01", "MetadataRequest"),
        (header(3, 5, client_id=b"\xff\xfe") + I32_BE.pack(0) + b"\x01", "MetadataRequest"),
        (header(2, 1) + I32_BE.pack(-1) + I32_BE.pack(2**31 - 1), "ListOffsetsRequest"),
        (header(0, 7) + b"\xde\xad\xbe\xef" * 4, "ProduceRequest"),
    ],
)
def test_garbage_body(frame: bytes, what: str) -> None:
    with pytest.raises(RemoteProtocolError, match=f"malformed {what}"):
        served(frame)


@pytest.mark.parametrize("cut", [1, 2, 3, 4, 5, 13, len(sized(METADATA_V5)) - 1])
def test_eof_inside_a_frame(cut: int) -> None:
    codec = KafkaServerCodec(ADVERTISED)
    codec.receive_data(sized(METADATA_V5)[:cut])
    assert codec.next_request() is NEED_DATA
    codec.receive_eof()
    with pytest.raises(RemoteProtocolError, match="closed inside a request"):
        codec.next_request()


def test_clean_eof() -> None:
    codec = KafkaServerCodec(ADVERTISED)
    codec.receive_eof()
    assert codec.next_request() is CONNECTION_CLOSED
    codec = KafkaServerCodec(ADVERTISED)
    codec.receive_data(sized(METADATA_V5) * 2)
    codec.receive_eof()
    assert isinstance(codec.next_request(), KafkaRequest)
    assert isinstance(codec.next_request(), KafkaRequest)
    assert codec.next_request() is CONNECTION_CLOSED
    assert codec.next_request() is CONNECTION_CLOSED


def test_data_after_eof_is_our_own_misuse() -> None:
    codec = KafkaServerCodec(ADVERTISED)
    codec.receive_eof()
    with pytest.raises(LocalProtocolError):
        codec.receive_data(b"\0")


def test_response_to_a_request_never_sent() -> None:
    client = KafkaClientCodec("t")
    client.receive_data(sized(I32_BE.pack(5) + b"\0\0"))
    with pytest.raises(RemoteProtocolError, match="unknown correlation id 5"):
        client.next_response()


# --- unknown tagged fields and keys outside the ApiKey enum --------------------------------------

# confluent-kafka's ApiVersions v3 (kafka.md §7) with one unknown tagged field (tag 5, empty)
# appended to the body: KIP-482 says a reader skips tags it does not know.
AV3 = bytes.fromhex(DOCUMENTED_REQUESTS[0][0])[4:]
AV3_UNKNOWN_BODY_TAG = AV3[:-1] + b"\x01\x05\x00"
AV3_UNKNOWN_HEADER_TAG = AV3[:17] + b"\x01\x05\x00" + AV3[18:]  # header v2 tag section


@pytest.mark.parametrize(
    "frame", [AV3_UNKNOWN_BODY_TAG, AV3_UNKNOWN_HEADER_TAG], ids=["body-tag", "header-tag"]
)
def test_unknown_tagged_fields_are_skipped(frame: bytes) -> None:
    req = KafkaServerCodec(ADVERTISED).decode_request(frame)
    assert isinstance(req, KafkaRequest)
    assert req.body.client_software_name == "confluent-kafka-python"


def test_unknown_tagged_field_in_a_response_is_a_protocol_error() -> None:
    # The client role (the Kafka backend) still relies on kio, which refuses tags it does not
    # know: a clean protocol error, not a crash. Skipping them is the Kafka backend's work.
    client = numbered("rdkafka", 1)
    client.send(build(load_request_schema(18, 3), NO_SOFTWARE))
    answer = bytes.fromhex(DOCUMENTED_API_VERSIONS)[4:-1] + b"\x01\x05\x00"
    client.receive_data(sized(answer))
    with pytest.raises(RemoteProtocolError, match="KeyError"):
        client.next_response()


def test_out_of_range_version_of_a_key_outside_the_enum() -> None:
    with pytest.raises(RemoteProtocolError):
        served(header(60, 30), versions=SERVE_ALL)  # DescribeCluster: not an ApiKey


# --- fuzz: any bytes after a valid size prefix decode or raise RemoteProtocolError --------------


@cache
def kio_versions() -> dict[int, tuple[int, int]]:
    """Every (min, max) kio 0.6.5 has request schemas for: a broker that serves them all."""
    table = {}
    for key in range(100):
        known = []
        for version in range(30):
            try:
                load_request_schema(key, version)
            except KioIndexError:
                continue
            known.append(version)
        if known:
            assert known == list(range(known[0], known[-1] + 1))
            table[key] = (known[0], known[-1])
    return table


def _flexible(api_key: int, version: int) -> bool:
    try:
        return bool(load_request_schema(api_key, version).__flexible__)
    except KioIndexError:
        return False


def _pairs(versions: Mapping[int, tuple[int, int]], *, flexible: bool) -> list[tuple[int, int]]:
    return [
        (key, v)
        for key, (low, high) in sorted(versions.items())
        for v in range(low, high + 1)
        if flexible or not _flexible(key, v)
    ]


_client_ids = st.one_of(
    st.just(I16_BE.pack(-1)),
    st.binary(max_size=12).map(lambda b: I16_BE.pack(len(b)) + b),
    st.binary(max_size=3),  # a broken length
)


def request_frames(pairs: list[tuple[int, int]]) -> st.SearchStrategy[bytes]:
    """A header of a served (key, version) and any body."""
    return st.builds(
        lambda kv, corr, cid, body: header(kv[0], kv[1], corr, None)[:8] + cid + body,
        st.sampled_from(pairs),
        st.integers(-(2**31), 2**31 - 1),
        _client_ids,
        st.binary(max_size=200),
    )


def decodes_or_is_refused(frame: bytes, versions: Mapping[int, tuple[int, int]]) -> None:
    codec = KafkaServerCodec(versions, max_frame_size=1 << 20)
    codec.receive_data(sized(frame))
    try:
        got = codec.next_request()
    except RemoteProtocolError:  # FrameTooLarge is one
        return
    assert isinstance(got, KafkaRequest | UnsupportedApiVersions)
    assert codec.next_request() is NEED_DATA


def captured_requests(versions: Mapping[int, tuple[int, int]]) -> list[bytes]:
    """Distinct captured requests (without their size prefix) of a served version."""
    out = {
        f.data[4:]
        for file in FILES
        for f in captured(file)
        if f.request and f.api_key in versions
        if versions[f.api_key][0] <= f.api_version <= versions[f.api_key][1]
    }
    return sorted(out, key=lambda frame: (len(frame), frame))


def _mutate(frame: bytes, edits: list[tuple[int, int, str]], cut: int | None) -> bytes:
    out = bytearray(frame)
    for at, byte, how in edits:
        at %= len(out) + 1
        if how == "set" and at < len(out):
            out[at] = byte
        elif how == "insert":
            out.insert(at, byte)
        elif how == "delete" and at < len(out):
            del out[at]
    return bytes(out if cut is None else out[: cut % (len(out) + 1)])


def mutated(frames: list[bytes]) -> st.SearchStrategy[bytes]:
    """Real client requests with a few bytes set, inserted or deleted, maybe cut short: they get
    much deeper into the decoders than random bodies, and some still decode."""
    edit = st.tuples(
        st.integers(0, 1 << 16), st.integers(0, 255), st.sampled_from(["set", "insert", "delete"])
    )
    return st.builds(
        _mutate,
        st.sampled_from(frames),
        st.lists(edit, max_size=4),
        st.none() | st.integers(0, 1 << 16),
    )


def any_request(versions: Mapping[int, tuple[int, int]]) -> st.SearchStrategy[bytes]:
    """Requests of every kind: generated headers of every served version (flexible ones too),
    mutated captured requests, and raw bytes."""
    return st.one_of(
        request_frames(_pairs(versions, flexible=True)),
        mutated(captured_requests(versions)),
        st.binary(max_size=300),
    )


FUZZ = settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(data=st.data())
def test_fuzz_advertised_requests_decode_or_raise(data: st.DataObject) -> None:
    decodes_or_is_refused(data.draw(any_request(ADVERTISED)), ADVERTISED)


@FUZZ
@given(data=st.data())
def test_fuzz_every_kio_schema(data: st.DataObject) -> None:
    versions = kio_versions()
    decodes_or_is_refused(data.draw(any_request(versions)), versions)


def test_an_unknown_tagged_field_in_the_first_request() -> None:
    decodes_or_is_refused(AV3_UNKNOWN_BODY_TAG, ADVERTISED)


@FUZZ
@given(stream=st.binary(max_size=400))
def test_fuzz_any_stream_with_any_size_prefix(stream: bytes) -> None:
    """Whatever the size prefixes say: requests, NEED_DATA, or a protocol error."""
    codec = KafkaServerCodec({ApiKey.METADATA: (1, 5), ApiKey.LIST_OFFSETS: (1, 3)}, 256)
    codec.receive_data(stream)
    codec.receive_eof()
    try:
        for _ in range(len(stream) + 1):
            got = codec.next_request()
            if got is CONNECTION_CLOSED:
                return
            assert isinstance(got, KafkaRequest)
    except RemoteProtocolError:
        return
    raise AssertionError("the codec kept returning requests")


@pytest.mark.parametrize(
    ("api_key", "request_values", "response_values"),
    [
        (
            ApiKey.LIST_PARTITION_REASSIGNMENTS,
            {"timeout": 1000, "topics": None},
            {"throttle_time": 0, "error_code": 0, "error_message": None, "topics": []},
        ),
        (
            ApiKey.ALTER_PARTITION_REASSIGNMENTS,
            {"timeout": 1000,
             "topics": [{"name": "t", "partitions": [{"partition_index": 0, "replicas": [1]}]}]},
            {"throttle_time": 0, "error_code": 0, "error_message": None,
             "responses": [{"name": "t", "partitions": [
                 {"partition_index": 0, "error_code": 39, "error_message": "only node 1"}]}]},
        ),
    ],
)  # fmt: skip
def test_flexible_only_reassignment_apis_round_trip(
    api_key: int, request_values: dict[str, Any], response_values: dict[str, Any]
) -> None:
    """KIP-455's APIs exist only in the flexible encoding (v0): request header v2 in, response
    header v1 out, each with an empty tagged-field section (no tag is ever written)."""
    client = KafkaClientCodec("reassign")
    _, frame = client.send(build(load_request_schema(api_key, 0), request_values))
    server = KafkaServerCodec(ADVERTISED)
    req = server.decode_request(frame[4:])
    assert isinstance(req, KafkaRequest) and req.api_version == 0
    out = server.send(req, build(load_response_schema(api_key, 0), response_values))
    assert out[8] == 0  # the response header's tag count, right after the correlation id
    client.receive_data(out)
    response = client.next_response()
    assert isinstance(response, KafkaResponse)
    assert response.body == build(load_response_schema(api_key, 0), response_values)


def test_describe_configs_v3_carries_types() -> None:
    """v3 (non-flexible) adds config_type and documentation to each entry (KIP-569)."""
    client = KafkaClientCodec("configs")
    request = build(
        load_request_schema(ApiKey.DESCRIBE_CONFIGS, 3),
        {"resources": [{"resource_type": 2, "resource_name": "t", "configuration_keys": None}],
         "include_synonyms": False, "include_documentation": False},
    )  # fmt: skip
    _, frame = client.send(request)
    server = KafkaServerCodec(ADVERTISED)
    req = server.decode_request(frame[4:])
    assert isinstance(req, KafkaRequest) and req.api_version == 3
    entry = {
        "name": "retention.ms",
        "value": "1000",
        "read_only": False,
        "config_source": 1,
        "is_sensitive": False,
        "synonyms": [],
        "config_type": 5,
        "documentation": None,
    }
    values = {"throttle_time": 0, "results": [
        {"error_code": 0, "error_message": None, "resource_type": 2, "resource_name": "t",
         "configs": [entry]}]}  # fmt: skip
    client.receive_data(server.send(req, build(load_response_schema(32, 3), values)))
    response = client.next_response()
    assert isinstance(response, KafkaResponse)
    (config,) = response.body.results[0].configs
    assert (config.config_type, config.documentation) == (5, None)
