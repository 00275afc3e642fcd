"""rabbitmq-stream.md §11: the printed hex vectors decode to the frames the spec describes and
re-encode byte for byte."""

from __future__ import annotations

import pytest

from protocols.rabbitmq_stream import (
    Broker,
    Close,
    CloseResponse,
    CommandVersion,
    Create,
    Credit,
    CreditResponse,
    DeclarePublisher,
    ExchangeCommandVersions,
    Frame,
    Heartbeat,
    Metadata,
    MetadataResponse,
    MetadataUpdate,
    OffsetSpec,
    OffsetType,
    Open,
    OpenResponse,
    PartitionsResponse,
    Publish,
    PublishConfirm,
    PublishedMessage,
    PublishedSubBatch,
    PublishError,
    PublishingError,
    QueryOffsetResponse,
    ResponseCode,
    Route,
    RouteResponse,
    SaslAuthenticate,
    SaslAuthenticateResponse,
    SaslHandshake,
    SaslHandshakeResponse,
    StoreOffset,
    StreamMetadata,
    Subscribe,
    Tune,
)
from tests.protocols.rabbitmq_stream.support import CLIENT, decode_one, sender_of

S = "S->C"
GZIP = bytes.fromhex(
    "1f8b080012c2026b02ff636060e062082e5dc05a5c9aa46bc080cc3344e119010069af2a2f2a000000"
)
AMQP = bytes.fromhex(
    "005373c01e0da10469642d314040404040a30a746578742f706c61696e404040404040005374c10c04a1016b"
    "a10176a1016e5407005375a00a68656c6c6f2d616d7170"
)

VECTORS: list[tuple[str, str, str, Frame]] = [
    ("sasl-handshake", CLIENT, "000000080012000100000002", SaslHandshake(correlation_id=2)),
    (
        "sasl-handshake-resp",
        S,
        "0000001f80120001000000020001000000020008414d51504c41494e0005504c41494e",
        SaslHandshakeResponse(correlation_id=2, code=1, mechanisms=("AMQPLAIN", "PLAIN")),
    ),
    (
        "sasl-authenticate",
        CLIENT,
        "0000001f00130001000000030005504c41494e0000000c006775657374006775657374",
        SaslAuthenticate(correlation_id=3, mechanism="PLAIN", data=b"\0guest\0guest"),
    ),
    (
        "sasl-ok",
        S,
        "0000000a80130001000000030001",
        SaslAuthenticateResponse(correlation_id=3, code=1),
    ),
    (
        "sasl-bad-password",
        S,
        "0000000a80130001000000030008",
        SaslAuthenticateResponse(correlation_id=3, code=8),
    ),
    (
        "sasl-no-mechanism",
        S,
        "0000000a80130001000000030007",
        SaslAuthenticateResponse(correlation_id=3, code=7),
    ),
    ("tune-server", S, "0000000c00140001001000000000003c", Tune(frame_max=1048576, heartbeat=60)),
    (
        "tune-echo",
        CLIENT,
        "0000000c00140001001000000000003c",
        Tune(frame_max=1048576, heartbeat=60),
    ),
    ("open", CLIENT, "0000000b001500010000000400012f", Open(correlation_id=4, virtual_host="/")),
    ("heartbeat", CLIENT, "0000000400170001", Heartbeat()),
    (
        "open-resp",
        S,
        "000000418015000100000004000100000002000f616476657274697365645f706f7274000435353533"
        "000f616476657274697365645f686f737400093132372e302e302e31",
        OpenResponse(
            correlation_id=4,
            code=1,
            properties=(("advertised_port", "5553"), ("advertised_host", "127.0.0.1")),
        ),
    ),
    ("open-bad-vhost", S, "0000000a8015000100000004000c", OpenResponse(correlation_id=4, code=12)),
    (
        "create",
        CLIENT,
        "00000032000d000100000005000872732d74657374320000000100106d61782d6c656e6774682d627974"
        "657300083130303030303030",
        Create(correlation_id=5, stream="rs-test2", arguments=(("max-length-bytes", "10000000"),)),
    ),
    (
        "metadata",
        CLIENT,
        "00000016000f00010000000500000001000872732d7465737432",
        Metadata(correlation_id=5, streams=("rs-test2",)),
    ),
    (
        "metadata-resp-missing",
        S,
        "00000040800f00010000000700000001000000093132372e302e302e31000015b100000002000770726f"
        "62652d73000100000000000000046e6f70650002ffff00000000",
        MetadataResponse(
            correlation_id=7,
            brokers=(Broker(reference=0, host="127.0.0.1", port=5553),),
            streams=(
                StreamMetadata(stream="probe-s", code=1, leader=0, replicas=()),
                StreamMetadata(stream="nope", code=2, leader=0xFFFF, replicas=()),
            ),
        ),
    ),
    (
        "declare-publisher",
        CLIENT,
        "0000001b000100010000000600000672732d707562000872732d7465737432",
        DeclarePublisher(correlation_id=6, publisher_id=0, reference="rs-pub", stream="rs-test2"),
    ),
    (
        "publish-amqp",
        CLIENT,
        "00000058000200010000000001000000000000000100000043" + AMQP.hex(),
        Publish(publisher_id=0, messages=(PublishedMessage(publishing_id=1, data=AMQP),)),
    ),
    (
        "publish-confirm",
        S,
        "000000110003000100000000010000000000000001",
        PublishConfirm(publisher_id=0, publishing_ids=(1,)),
    ),
    (
        "publish-3-raw",
        CLIENT,
        "0000003c0002000100000000030000000000000002000000057261772d30000000000000000300000005"
        "7261772d310000000000000004000000057261772d32",
        Publish(
            publisher_id=0,
            messages=tuple(
                PublishedMessage(publishing_id=i + 2, data=f"raw-{i}".encode()) for i in range(3)
            ),
        ),
    ),
    (
        "publish-gzip",
        CLIENT,
        "0000004500020001000000000100000000000000079000030000002a00000029" + GZIP.hex(),
        Publish(
            publisher_id=0,
            messages=(
                PublishedSubBatch(
                    publishing_id=7,
                    compression=1,
                    record_count=3,
                    uncompressed_length=42,
                    data=GZIP,
                ),
            ),
        ),
    ),
    (
        "publish-error",
        S,
        "00000013000400010900000001000000000000002a0012",
        PublishError(publisher_id=9, errors=(PublishingError(publishing_id=42, code=0x12),)),
    ),
    (
        "subscribe-first",
        CLIENT,
        "0000001b000700010000000500000872732d74657374320001000a00000000",
        Subscribe(
            correlation_id=5,
            subscription_id=0,
            stream="rs-test2",
            offset=OffsetSpec(type=OffsetType.FIRST),
            credit=10,
            properties=(),
        ),
    ),
    (
        "subscribe-offset-sac",
        CLIENT,
        "00000050000700010000000500000872732d746573743200040000000000000005000a00000002001673"
        "696e676c652d6163746976652d636f6e73756d657200047472756500046e616d6500077361632d726566",
        Subscribe(
            correlation_id=5,
            subscription_id=0,
            stream="rs-test2",
            offset=OffsetSpec.offset(5),
            credit=10,
            properties=(("single-active-consumer", "true"), ("name", "sac-ref")),
        ),
    ),
    (
        "subscribe-timestamp",
        CLIENT,
        "0000001e000700010000001002000770726f62652d730005000001a202c6bb210001",
        Subscribe(
            correlation_id=16,
            subscription_id=2,
            stream="probe-s",
            offset=OffsetSpec.timestamp(0x01A202C6BB21),
            credit=1,
        ),
    ),
    ("credit", CLIENT, "0000000700090001000001", Credit(subscription_id=0, credit=1)),
    ("credit-error", S, "0000000780090001000463", CreditResponse(code=4, subscription_id=99)),
    (
        "store-offset",
        CLIENT,
        "00000023000a0001000b72732d636f6e732d726566000872732d74657374320000000000000006",
        StoreOffset(reference="rs-cons-ref", stream="rs-test2", offset=6),
    ),
    (
        "query-offset-none",
        S,
        "00000012800b00010000000c00130000000000000000",
        QueryOffsetResponse(correlation_id=12, code=ResponseCode.NO_OFFSET, offset=0),
    ),
    (
        "metadata-update",
        S,
        "0000000f001000010006000770726f62652d73",
        MetadataUpdate(code=6, stream="probe-s"),
    ),
    (
        "close",
        CLIENT,
        "0000000e001600010000000d000100024f4b",
        Close(correlation_id=13, code=1, reason="OK"),
    ),
    ("close-resp", S, "0000000a801600010000000d0001", CloseResponse(correlation_id=13, code=1)),
    (
        "close-unknown-frame",
        S,
        "000000190016000100000001000d000d756e6b6e6f776e206672616d65",
        Close(correlation_id=1, code=ResponseCode.UNKNOWN_FRAME, reason="unknown frame"),
    ),
    (
        "exchange-command-versions",
        CLIENT,
        "00000012001b00010000000500000001000200010002",
        ExchangeCommandVersions(
            correlation_id=5, versions=(CommandVersion(key=2, min_version=1, max_version=2),)
        ),
    ),
    (
        "route",
        CLIENT,
        "0000001500180001000000150001310008696e766f69636573",
        Route(correlation_id=21, routing_key="1", super_stream="invoices"),
    ),
    (
        "route-resp-3.10",
        S,
        "0000001a0018000100000015000100000001000a696e766f696365732d31",
        RouteResponse(correlation_id=21, code=1, streams=("invoices-1",), legacy_key=True),
    ),
    (
        "partitions-resp-3.10",
        S,
        "000000320019000100000017000100000003000a696e766f696365732d30000a696e766f696365732d31"
        "000a696e766f696365732d32",
        PartitionsResponse(
            correlation_id=23,
            code=1,
            streams=("invoices-0", "invoices-1", "invoices-2"),
            legacy_key=True,
        ),
    ),
]


@pytest.mark.parametrize(
    ("name", "direction", "hex_text", "expected"),
    VECTORS,
    ids=lambda v: v if isinstance(v, str) and len(v) < 30 else "",
)
def test_section_11_vector(name: str, direction: str, hex_text: str, expected: Frame) -> None:
    data = bytes.fromhex(hex_text)
    assert decode_one(data, direction) == expected
    assert sender_of(direction).send(expected) == data


def test_java_tune_answer_has_the_response_bit() -> None:
    data = bytes.fromhex("0000000c80140001001000000000003c")
    frame = decode_one(data)
    assert frame == Tune(frame_max=1048576, heartbeat=60, response=True)
    assert sender_of(CLIENT).send(frame) == data
