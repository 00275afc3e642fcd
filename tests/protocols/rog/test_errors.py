"""Rog codec limits and errors: oversized sizes, truncation at EOF, misuse in either role."""

from __future__ import annotations

import pytest

from protocols._wire import NEED_DATA, FrameTooLarge, LocalProtocolError, RemoteProtocolError
from protocols.rog import (
    Ack,
    CreateLog,
    Error,
    Fetch,
    FetchOk,
    Ok,
    Publish,
    Request,
    Response,
    RogClientCodec,
    RogServerCodec,
    UnknownCommand,
    message_too_large,
    unparseable,
)
from protocols.rog.framing import encode_request
from tests.protocols.rog.support import MAX, ORDERS, client_after, server


def short_id(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 50 else text[:47] + "..."


@pytest.mark.parametrize("declared", [2**62, 2**64 - 1, MAX + 1])
def test_oversized_publish_is_refused_after_the_header(declared: int) -> None:
    # rog.md §1: these sizes crash the real server; we refuse them before the body arrives.
    header = bytes.fromhex("01 00") + ORDERS + declared.to_bytes(8, "big")
    codec = server()
    for byte in header[:-1]:
        codec.receive_data(bytes((byte,)))
        assert codec.next_frame() is NEED_DATA
    codec.receive_data(header[-1:])
    with pytest.raises(FrameTooLarge) as info:
        codec.next_frame()
    assert info.value.declared == declared
    assert info.value.hint == Error(text=message_too_large(declared, MAX))
    expected = f"Message of {declared} bytes exceeds the maximum of {MAX} bytes"
    assert info.value.hint == Error(text=expected)


def test_publish_of_exactly_the_maximum_is_accepted() -> None:
    request = Publish(name="l", partition=0, data=bytes(16))
    codec = RogServerCodec(max_frame_size=16)
    codec.receive_data(encode_request(request))
    assert codec.next_frame() == request


TRUNCATED = [
    (bytes.fromhex("00"), "partition"),
    (bytes.fromhex("01"), "partition"),
    (bytes.fromhex("00 03"), "name size"),
    (bytes.fromhex("00 03 06 6f 72"), "name"),
    (bytes.fromhex("01 01") + ORDERS + bytes.fromhex("00 00"), "data size"),
    (bytes.fromhex("01 01") + ORDERS + bytes.fromhex("00 00 00 00 00 00 00 02 68"), "data"),
    (bytes.fromhex("02 01") + ORDERS, "group size"),
    (bytes.fromhex("03 01") + ORDERS + bytes.fromhex("02 67"), "group"),
]


@pytest.mark.parametrize(("wire", "field"), TRUNCATED, ids=[f for _, f in TRUNCATED])
def test_truncated_request_at_eof_names_the_missing_field(wire: bytes, field: str) -> None:
    codec = server()
    codec.receive_data(wire)
    assert codec.next_frame() is NEED_DATA  # we wait instead of zero-padding (rog.md §1)
    codec.receive_eof()
    with pytest.raises(RemoteProtocolError) as info:
        codec.next_frame()
    assert info.value.hint == Error(text=f"Unparseable command, unable to parse {field}")
    assert info.value.hint == Error(text=unparseable(field))


@pytest.mark.parametrize(
    ("request_", "reply"),
    [
        (None, Ok()),
        (Fetch(name="l", partition=0, group="g"), Ok()),
        (Publish(name="l", partition=0, data=b""), FetchOk(data=b"")),
        (UnknownCommand(code=4), Ok()),
    ],
)
def test_server_refuses_a_reply_the_client_cannot_parse(
    request_: Request | None, reply: Response
) -> None:
    codec = server()
    if request_ is not None:
        codec.receive_data(encode_request(request_))
        codec.next_frame()
    with pytest.raises(LocalProtocolError):
        codec.send(reply)


def test_server_sends_an_error_hint_before_any_request_but_only_one_reply() -> None:
    codec = server()
    assert codec.send(Error(text="x")) == bytes.fromhex("01 00 00 00 00 00 00 00 01 78")
    with pytest.raises(LocalProtocolError):
        codec.send(Error(text="y"))


@pytest.mark.parametrize(
    "request_",
    [
        CreateLog(name="x" * 256, partitions=1),
        CreateLog(name="é" * 128, partitions=1),  # 256 UTF-8 bytes
        CreateLog(name="l", partitions=256),
        Publish(name="l", partition=-1, data=b""),
        Fetch(name="l", partition=0, group="g" * 256),
        Ack(name="l", partition=300, group="g"),
        Fetch(name="\udcff", partition=0, group="g"),  # lone surrogate: no UTF-8 form
        UnknownCommand(code=3),
        UnknownCommand(code=256),
    ],
    ids=short_id,
)
def test_encoding_what_rog_cannot_carry_is_a_local_error(request_: Request) -> None:
    codec = RogClientCodec()
    with pytest.raises(LocalProtocolError):
        codec.send(request_)
    # A refused request leaves nothing outstanding.
    assert codec.send(Ack(name="l", partition=0, group="g")) is not None


def test_client_errors() -> None:
    codec = client_after(Ack(name="l", partition=0, group="g"))
    with pytest.raises(LocalProtocolError):
        codec.send(Ack(name="l", partition=0, group="g"))  # one request outstanding at a time
    codec.receive_data(b"\x02")
    with pytest.raises(RemoteProtocolError, match="neither 00 nor 01"):
        codec.next_frame()

    codec = client_after(Fetch(name="l", partition=0, group="g"))
    codec.receive_data(bytes.fromhex("00 00 00"))
    assert codec.next_frame() is NEED_DATA
    codec.receive_eof()
    with pytest.raises(RemoteProtocolError, match="data size"):
        codec.next_frame()
    with pytest.raises(LocalProtocolError):
        codec.receive_data(b"\x00")

    codec = client_after(CreateLog(name="l", partitions=1))
    codec.receive_data(b"\x00\x00")
    assert codec.next_frame() == Ok()
    with pytest.raises(RemoteProtocolError, match="no request outstanding"):
        codec.next_frame()
    assert codec.trailing_data == b"\x00"


def test_client_checks_declared_sizes_before_allocating() -> None:
    codec = RogClientCodec(max_frame_size=4)
    codec.send(Fetch(name="l", partition=0, group="g"))
    codec.receive_data(bytes.fromhex("00") + (2**64 - 1).to_bytes(8, "big"))
    with pytest.raises(FrameTooLarge):
        codec.next_frame()
    codec = RogClientCodec(max_frame_size=4)
    codec.send(Ack(name="l", partition=0, group="g"))
    codec.receive_data(bytes.fromhex("01") + (5).to_bytes(8, "big"))
    with pytest.raises(FrameTooLarge):
        codec.next_frame()
