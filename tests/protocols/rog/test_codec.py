"""Rog codec against rog.md: the §5 byte-level examples, three-way feeding, framing rules."""

from __future__ import annotations

import pytest

from protocols._wire import NEED_DATA, RemoteProtocolError
from protocols.rog import (
    AT_LEAST_ONE_PARTITION,
    COMMAND_NOT_CREATED,
    CONNECTION_CLOSED,
    NO_DATA_LEFT,
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
    UnknownCommand,
    log_already_exists,
    partition_out_of_range,
)
from protocols.rog.framing import encode_request, encode_response
from tests.helpers.feeding import feed_three_ways
from tests.protocols.rog.support import G1, ORDERS, client_after, server


def error_reply(text: str, size: int) -> bytes:
    # Built from the size rog.md §5 prints, so the text length is checked against it too.
    return bytes.fromhex("01") + size.to_bytes(8, "big") + text.encode()


def short_id(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 50 else text[:47] + "..."


# Each row is one connection of rog.md §5: request bytes, request, reply bytes, reply.
CONVERSATIONS: list[tuple[str, bytes, Request, bytes, Response]] = [
    (
        "create",
        bytes.fromhex("00 03") + ORDERS,
        CreateLog(name="orders", partitions=3),
        bytes.fromhex("00"),
        Ok(),
    ),
    (
        "create-again",
        bytes.fromhex("00 03") + ORDERS,
        CreateLog(name="orders", partitions=3),
        error_reply("Log orders already exists", 0x19),
        Error(text=log_already_exists("orders")),
    ),
    (
        "publish",
        bytes.fromhex("01 01") + ORDERS + bytes.fromhex("00 00 00 00 00 00 00 02 68 69"),
        Publish(name="orders", partition=1, data=b"hi"),
        bytes.fromhex("00"),
        Ok(),
    ),
    (
        "fetch",
        bytes.fromhex("02 01") + ORDERS + G1,
        Fetch(name="orders", partition=1, group="g1"),
        bytes.fromhex("00 00 00 00 00 00 00 00 02 68 69"),
        FetchOk(data=b"hi"),
    ),
    (
        "ack",
        bytes.fromhex("03 01") + ORDERS + G1,
        Ack(name="orders", partition=1, group="g1"),
        bytes.fromhex("00"),
        Ok(),
    ),
    (
        "fetch-no-data-left",
        bytes.fromhex("02 01") + ORDERS + G1,
        Fetch(name="orders", partition=1, group="g1"),
        error_reply("No data left in the log to be read", 0x22),
        Error(text=NO_DATA_LEFT),
    ),
    (
        "publish-partition-3",
        bytes.fromhex("01 03") + ORDERS + bytes.fromhex("00 00 00 00 00 00 00 02 68 69"),
        Publish(name="orders", partition=3, data=b"hi"),
        error_reply("Trying to access partition 3 but log orders has 3 partitions", 0x3C),
        Error(text=partition_out_of_range(3, "orders", 3)),
    ),
    (
        "fetch-empty-message",  # rog.md §3: 00 + eight 00 bytes
        bytes.fromhex("02 00") + ORDERS + G1,
        Fetch(name="orders", partition=0, group="g1"),
        bytes.fromhex("00 00 00 00 00 00 00 00 00"),
        FetchOk(data=b""),
    ),
    (
        "zero-partitions",
        bytes.fromhex("00 00") + ORDERS,
        CreateLog(name="orders", partitions=0),
        error_reply("Number of partitions must be at least 1", 39),
        Error(text=AT_LEAST_ONE_PARTITION),
    ),
    (
        "unknown-command",
        bytes.fromhex("07"),
        UnknownCommand(code=7),
        error_reply("Command not created yet", 23),
        Error(text=COMMAND_NOT_CREATED),
    ),
]
IDS = [row[0] for row in CONVERSATIONS]


@pytest.mark.parametrize(("_", "wire", "request_", "reply_wire", "reply"), CONVERSATIONS, ids=IDS)
def test_golden_server_role(
    _: str, wire: bytes, request_: Request, reply_wire: bytes, reply: Response
) -> None:
    codec = server()
    codec.receive_data(wire)
    assert codec.next_frame() == request_
    assert codec.trailing_data == b""
    assert codec.send(reply) == reply_wire
    codec.receive_eof()
    assert codec.next_frame() is CONNECTION_CLOSED


@pytest.mark.parametrize(("_", "wire", "request_", "reply_wire", "reply"), CONVERSATIONS, ids=IDS)
def test_golden_client_role(
    _: str, wire: bytes, request_: Request, reply_wire: bytes, reply: Response
) -> None:
    codec = RogClientCodec()
    assert codec.send(request_) == wire
    assert codec.next_frame() is NEED_DATA
    codec.receive_data(reply_wire)
    codec.receive_eof()  # the server closes after its one reply (rog.md §1)
    assert codec.next_frame() == reply
    assert codec.next_frame() is CONNECTION_CLOSED


def test_golden_fetch_of_missing_partition_is_an_empty_close() -> None:
    # rog.md §5 "fetch partition 3 -> (connection closed, 0 bytes)"
    codec = client_after(Fetch(name="orders", partition=3, group="g1"))
    codec.receive_eof()
    with pytest.raises(RemoteProtocolError, match="without replying"):
        codec.next_frame()


def test_golden_readme_style_fetch_reads_group_size_as_u8() -> None:
    # rog.md §2/§5: the first byte of the README's u64 size is the group length, so group "".
    wire = bytes.fromhex("02 01") + ORDERS + bytes.fromhex("00 00 00 00 00 00 00 02 67 31")
    frames = feed_three_ways(server, wire, stop_at=(CONNECTION_CLOSED,))
    assert frames == [Fetch(name="orders", partition=1, group="")]
    codec = server()
    codec.receive_data(wire)
    codec.next_frame()
    assert codec.trailing_data == bytes.fromhex("00 00 00 00 00 00 02 67 31")


REQUESTS: list[Request] = [
    CreateLog(name="orders", partitions=3),
    CreateLog(name="", partitions=0),
    CreateLog(name="x" * 255, partitions=255),
    Publish(name="orders", partition=1, data=b"hi"),
    Publish(name="orders", partition=0, data=b""),
    Publish(name="é", partition=254, data=bytes(range(256)) * 4),
    Fetch(name="orders", partition=1, group="g1"),
    Fetch(name="orders", partition=0, group=""),
    Ack(name="orders", partition=1, group="g1"),
    Ack(name="o" * 255, partition=255, group="g" * 255),
    UnknownCommand(code=4),
    UnknownCommand(code=255),
]


@pytest.mark.parametrize("eof", [False, True])
@pytest.mark.parametrize("request_", REQUESTS, ids=short_id)
def test_server_three_ways(request_: Request, eof: bool) -> None:
    frames = feed_three_ways(server, encode_request(request_), eof=eof, stop_at=[CONNECTION_CLOSED])
    assert frames == [request_]


RESPONSES: list[tuple[Request, Response]] = [
    (CreateLog(name="orders", partitions=3), Ok()),
    (Publish(name="orders", partition=1, data=b"hi"), Error(text=log_already_exists("x"))),
    (Fetch(name="orders", partition=1, group="g1"), FetchOk(data=b"hi")),
    (Fetch(name="orders", partition=1, group="g1"), FetchOk(data=b"")),
    (Fetch(name="orders", partition=1, group="g1"), FetchOk(data=bytes(5 * 1024))),
    (Fetch(name="orders", partition=1, group="g1"), Error(text=NO_DATA_LEFT)),
    (Ack(name="orders", partition=1, group="g1"), Ok()),
    (UnknownCommand(code=9), Error(text=COMMAND_NOT_CREATED)),
    (CreateLog(name="orders", partitions=3), Error(text="")),
]


@pytest.mark.parametrize("eof", [False, True])
@pytest.mark.parametrize(("request_", "reply"), RESPONSES, ids=short_id)
def test_client_three_ways(request_: Request, reply: Response, eof: bool) -> None:
    frames = feed_three_ways(
        lambda: client_after(request_),
        encode_response(reply),
        eof=eof,
        stop_at=[CONNECTION_CLOSED],
        check_idle=False,  # the client rejects bytes after its reply; tested below
    )
    assert frames == [reply]


def test_server_ignores_a_second_request_on_the_connection() -> None:
    # rog.md §1: "publish a" + "publish b" in one write stored only "a".
    first = Publish(name="l", partition=0, data=b"a")
    second = encode_request(Publish(name="l", partition=0, data=b"b"))
    codec = server()
    codec.receive_data(encode_request(first) + second)
    assert codec.next_frame() == first
    assert codec.next_frame() is NEED_DATA
    assert codec.trailing_data == second
    codec.receive_eof()
    assert codec.next_frame() is CONNECTION_CLOSED


def test_empty_connection_then_eof_closes_silently() -> None:
    codec = server()
    assert codec.next_frame() is NEED_DATA
    codec.receive_eof()
    assert codec.next_frame() is CONNECTION_CLOSED


def test_unknown_command_is_returned_on_its_first_byte() -> None:
    codec = server()
    codec.receive_data(b"\x04")
    assert codec.next_frame() == UnknownCommand(code=4)


def test_names_are_decoded_lossily() -> None:
    # rog.md §2: the server uses from_utf8_lossy, so invalid UTF-8 is not a parse error.
    codec = server()
    codec.receive_data(bytes.fromhex("02 00 02 ff fe 01 80"))
    assert codec.next_frame() == Fetch(name="\ufffd\ufffd", partition=0, group="\ufffd")
