"""Malformed input and misuse: every bad frame is a RemoteProtocolError whose hint is the §4
code to close with, oversized frames are refused from their size prefix alone, and encoding
what the protocol cannot carry is a LocalProtocolError."""

from __future__ import annotations

import pytest

from protocols._wire import FrameTooLarge, LocalProtocolError, RemoteProtocolError
from protocols.rabbitmq_stream import (
    CONNECTION_CLOSED,
    NEED_DATA,
    CloseResponse,
    Deliver,
    Heartbeat,
    Open,
    Publish,
    PublishedMessage,
    PublishedSubBatch,
    ResponseCode,
    RouteResponse,
    SaslHandshake,
    Tune,
)
from tests.protocols.rabbitmq_stream.support import MAX, client, server

HEARTBEAT = bytes.fromhex("0000000400170001")
CLOSE_RESPONSE = bytes.fromhex("0000000a801600010000000d0001")


def frame(key: int, version: int, body: bytes) -> bytes:
    return (
        (4 + len(body)).to_bytes(4, "big")
        + key.to_bytes(2, "big")
        + version.to_bytes(2, "big")
        + body
    )


def refused(data: bytes, *, by_client: bool = False) -> RemoteProtocolError:
    codec = client() if by_client else server()
    codec.receive_data(data)
    with pytest.raises(RemoteProtocolError) as info:
        codec.next_frame()
    return info.value


def test_oversized_frame_is_refused_from_its_size_prefix() -> None:
    codec = server(max_frame_size=1000)
    codec.receive_data((1001).to_bytes(4, "big"))  # no body at all has arrived
    with pytest.raises(FrameTooLarge) as info:
        codec.next_frame()
    assert info.value.hint == ResponseCode.FRAME_TOO_LARGE
    assert (info.value.declared, info.value.maximum) == (1001, 1000)


def test_a_frame_of_exactly_the_maximum_is_accepted() -> None:
    body = bytes(4) + b"\x00\x02/x"  # Open: correlation id 0, vhost "/x"
    codec = server(max_frame_size=4 + len(body))
    codec.receive_data(frame(0x15, 1, body))
    assert codec.next_frame() == Open(correlation_id=0, virtual_host="/x")


def test_the_negotiated_frame_max_applies_from_then_on() -> None:
    codec = server()
    assert codec.max_frame_size == MAX
    codec.max_frame_size = 8  # e.g. after Tune
    codec.receive_data(HEARTBEAT)
    assert codec.next_frame() == Heartbeat()
    codec.receive_data(bytes.fromhex("0000000b001500010000000400012f"))
    with pytest.raises(FrameTooLarge):
        codec.next_frame()
    with pytest.raises(LocalProtocolError):
        codec.max_frame_size = 3


def test_unknown_key_is_consumed_and_hints_unknown_frame() -> None:
    codec = server()
    codec.receive_data(frame(0x20, 1, b"\x00\x00\x00\x05") + CLOSE_RESPONSE)
    with pytest.raises(RemoteProtocolError) as info:
        codec.next_frame()
    assert info.value.hint == ResponseCode.UNKNOWN_FRAME
    # The server then sends Close(0x0d) and reads on until the CloseResponse (§5).
    assert codec.next_frame() == CloseResponse(correlation_id=13, code=1)
    assert codec.next_frame() is NEED_DATA


@pytest.mark.parametrize(
    ("name", "data", "by_client"),
    [
        ("open v2", frame(0x15, 2, bytes.fromhex("0000000400012f")), False),
        ("publish v3", frame(0x02, 3, bytes.fromhex("0000000000")), False),
        ("deliver v3", frame(0x08, 3, b"\x00"), True),
        ("heartbeat v0", frame(0x17, 0, b""), False),
        ("a server frame from a client", frame(0x08, 1, b"\x00"), False),
        ("a client frame from a server", frame(0x15, 1, bytes.fromhex("0000000400012f")), True),
        ("a response without its request's direction", frame(0x8015, 1, bytes(6)), False),
        ("server Tune with the response bit", frame(0x8014, 1, bytes(8)), True),
        ("bytes after the body", frame(0x17, 1, b"\x00"), False),
        ("truncated correlation id", frame(0x12, 1, b"\x00\x00"), False),
        ("size below the header", bytes.fromhex("00000002 0017"), False),
        ("string past the end", frame(0x15, 1, bytes.fromhex("00000004 0005 2f")), False),
        ("negative string length", frame(0x15, 1, bytes.fromhex("00000004 fffe")), False),
        ("null vhost", frame(0x15, 1, bytes.fromhex("00000004 ffff")), False),
        ("invalid UTF-8", frame(0x15, 1, bytes.fromhex("00000004 0001 ff")), False),
        ("hostile array count", frame(0x11, 1, bytes.fromhex("00000001 7fffffff")), False),
        ("negative array count", frame(0x11, 1, bytes.fromhex("00000001 ffffffff")), False),
        (
            "unknown offset type",
            frame(0x07, 1, bytes.fromhex("00000001 00 0001 73 0009 000a")),
            False,
        ),
        (
            "sub-batch reserved bits",
            frame(0x02, 1, bytes.fromhex("00 00000001 0000000000000001 91 0000 00000000 00000000")),
            False,
        ),
        (
            "publish v2 sub-batch",
            frame(0x02, 2, bytes.fromhex("00 00000001 0000000000000001 ffff 90")),
            False,
        ),
        (
            "entry past the end",
            frame(0x02, 1, bytes.fromhex("00 00000001 0000000000000001 00000009 00")),
            False,
        ),
        ("deliver v2 without committed id", frame(0x08, 2, bytes.fromhex("00 0000")), True),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_malformed_frames_hint_unknown_frame(name: str, data: bytes, by_client: bool) -> None:
    error = refused(data.replace(b" ", b""), by_client=by_client)
    assert error.hint == ResponseCode.UNKNOWN_FRAME, name


def test_eof_between_frames_is_a_clean_close_and_inside_one_is_not() -> None:
    codec = server()
    codec.receive_data(HEARTBEAT)
    codec.receive_eof()
    assert codec.next_frame() == Heartbeat()
    assert codec.next_frame() is CONNECTION_CLOSED

    codec = server()
    codec.receive_data(HEARTBEAT[:6])
    assert codec.next_frame() is NEED_DATA
    codec.receive_eof()
    with pytest.raises(RemoteProtocolError):
        codec.next_frame()


def test_key_meaning_depends_on_the_role() -> None:
    route_resp = frame(0x18, 1, bytes.fromhex("00000015 0002 00000000"))
    c = client()
    c.receive_data(route_resp)
    assert c.next_frame() == RouteResponse(correlation_id=0x15, code=2, legacy_key=True)
    java_tune = frame(0x8014, 1, bytes.fromhex("00010000 0000001e"))
    s = server()
    s.receive_data(java_tune)
    assert s.next_frame() == Tune(frame_max=65536, heartbeat=30, response=True)


@pytest.mark.parametrize(
    "bad",
    [
        Publish(
            publisher_id=0,
            messages=(PublishedMessage(publishing_id=1, data=b"", filter_value="f"),),
        ),
        Publish(
            publisher_id=0,
            messages=(
                PublishedSubBatch(
                    publishing_id=1, compression=1, record_count=1, uncompressed_length=0, data=b""
                ),
            ),
            publish_version=2,
        ),
        Publish(publisher_id=0, publish_version=3),
        Publish(publisher_id=256),
        Open(correlation_id=-1, virtual_host="/"),
        Open(correlation_id=1, virtual_host="x" * 40000),
        Open(correlation_id=1, virtual_host="\udc80"),
        Open(correlation_id=1, virtual_host=None),  # type: ignore[arg-type]
        SaslHandshake(correlation_id=2**32),
    ],
    ids=lambda v: type(v).__name__,
)
def test_client_encoding_what_the_wire_cannot_carry(bad: object) -> None:
    with pytest.raises(LocalProtocolError):
        client().send(bad)  # type: ignore[arg-type]


def test_each_role_sends_only_its_own_frames() -> None:
    with pytest.raises(LocalProtocolError):
        server().send(Open(correlation_id=1, virtual_host="/"))
    with pytest.raises(LocalProtocolError):
        client().send(Deliver(subscription_id=0, chunk=b""))
    with pytest.raises(LocalProtocolError):
        server().send(Tune(frame_max=0, heartbeat=0, response=True))
    assert server().send(Tune(frame_max=0, heartbeat=0)) == frame(0x14, 1, bytes(8))
