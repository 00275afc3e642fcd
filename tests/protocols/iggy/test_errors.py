"""Iggy codec limits and errors: oversized and malformed frames, bad checksums with the status
the real server answers (§8), unknown commands, and misuse in either role."""

from __future__ import annotations

import pytest

from protocols._wire import NEED_DATA, FrameTooLarge, LocalProtocolError, RemoteProtocolError
from protocols.iggy import (
    CONNECTION_CLOSED,
    CreateStream,
    Era,
    Framing,
    GetStats,
    GetStream,
    IggyClientCodec,
    IggyReply,
    IggyRequest,
    IggyServerCodec,
    LoginUser,
    LogoutUser,
    Ping,
    PolledMessages,
    Status,
    StreamDetails,
    UnknownCommand,
)
from protocols.iggy.vsr import ReplyHeader, encode_reply_header
from tests.protocols.iggy import samples
from tests.protocols.iggy.support import MAX, VECTORS, answer, client, decode_one, server

V5 = VECTORS["V5-request"].data
BATCH = 256 + 22  # after the VSR header and 22 bytes of metadata: V5's batch header


def flip(data: bytes, at: int) -> bytes:
    return data[:at] + bytes((data[at] ^ 0xFF,)) + data[at + 1 :]


def rejected_with(data: bytes, status: Status, codec: IggyServerCodec | None = None) -> None:
    codec = codec or server()
    codec.receive_data(data)
    with pytest.raises(RemoteProtocolError) as info:
        codec.next_request()
    assert info.value.hint == status
    assert codec.rejected is not None


# --- framing ------------------------------------------------------------------------------------


def test_oversized_vsr_frame_is_refused_after_its_header() -> None:
    header = bytearray(VECTORS["V1-request"].data)
    header[48:52] = (MAX + 1).to_bytes(4, "little")
    codec = server()
    codec.receive_data(bytes(header[:-1]))
    assert codec.next_request() is NEED_DATA
    codec.receive_data(bytes(header[-1:]))
    with pytest.raises(FrameTooLarge) as info:
        codec.next_request()
    assert info.value.declared == MAX + 1
    assert codec.rejected is None  # a framing error: close


@pytest.mark.parametrize("length", [MAX + 1, 2**32 - 1])
def test_oversized_legacy_frame_is_refused_after_eight_bytes(length: int) -> None:
    codec = server()
    codec.receive_data(length.to_bytes(4, "little") + (101).to_bytes(4, "little"))
    with pytest.raises(FrameTooLarge):
        codec.next_request()


def test_frame_of_exactly_the_maximum_is_accepted() -> None:
    codec = IggyServerCodec(max_frame_size=256)
    codec.receive_data(VECTORS["V1-request"].data)
    assert isinstance(codec.next_request(), IggyRequest)
    codec = IggyServerCodec(max_frame_size=4)
    codec.receive_data(VECTORS["V9-ping"].data)
    assert isinstance(codec.next_request(), IggyRequest)


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (bytes(48) + bytes.fromhex("ff000000") + bytes(8) + b"\x05" + bytes(195), "below its 256"),
        (flip(VECTORS["V1-request"].data, 60), "expected Request"),
        (bytes.fromhex("03000000 01000000"), "no room for its code"),
    ],
    ids=["vsr-size", "vsr-command", "legacy-length"],
)
def test_malformed_framing(data: bytes, match: str) -> None:
    codec = server()
    codec.receive_data(data)
    with pytest.raises(RemoteProtocolError, match=match):
        codec.next_request()


@pytest.mark.parametrize("name", ["V1-request", "V5-request", "V9-send", "V9-ping"])
def test_eof_inside_a_request(name: str) -> None:
    data = VECTORS[name].data
    for cut in sorted({1, min(8, len(data) - 1), len(data) - 1}):
        codec = server()
        codec.receive_data(data[:cut])
        assert codec.next_request() is NEED_DATA
        codec.receive_eof()
        with pytest.raises(RemoteProtocolError, match="closed inside"):
            codec.next_request()


def test_receive_data_after_eof_is_our_misuse() -> None:
    codec = server()
    codec.receive_eof()
    with pytest.raises(LocalProtocolError):
        codec.receive_data(b"x")


# --- bodies: the frame is consumed, ``rejected`` lets the listener answer and go on --------------


def test_bad_message_checksum_is_4027_and_the_connection_goes_on() -> None:
    frame_1 = BATCH + 256
    codec = server()
    rejected_with(flip(V5, frame_1 + 60), Status.INVALID_MESSAGE_CHECKSUM, codec)  # a payload byte
    assert codec.rejected is not None
    assert codec.rejected.code == 101
    assert codec.rejected.command == UnknownCommand(code=101, payload=flip(V5, frame_1 + 60)[256:])
    reply = codec.send_error(codec.rejected, Status.INVALID_MESSAGE_CHECKSUM)
    assert reply[208] == 160 and reply[216:220] == (4027).to_bytes(4, "little")
    codec.receive_data(V5)
    assert isinstance(codec.next_request(), IggyRequest)
    assert codec.rejected is None


def test_bad_batch_checksum_is_4039() -> None:
    rejected_with(flip(V5, BATCH + 40), Status.INVALID_BATCH_CHECKSUM)


@pytest.mark.parametrize(
    ("at", "what"),
    [
        (BATCH + 100, "batch reserved bytes"),
        (BATCH + 256 + 45, "message reserved field"),
        (BATCH + 32, "batch length"),
        (256 + 4, "identifier kind"),
        (256, "metadata length"),
    ],
    ids=lambda v: str(v),
)
def test_malformed_send_is_invalid_format(at: int, what: str) -> None:
    codec = server()
    codec.receive_data(flip(V5, at))
    with pytest.raises(RemoteProtocolError) as info:
        codec.next_request()
    assert info.value.hint in (Status.INVALID_FORMAT, Status.INVALID_IDENTIFIER), what


def test_bytes_after_a_body_are_refused() -> None:
    body = b"\x02\x73\x31\x00"  # CreateStream "s1" and a stray byte, legacy era B
    rejected_with(
        (4 + len(body)).to_bytes(4, "little") + (202).to_bytes(4, "little") + body,
        Status.INVALID_FORMAT,
    )


def test_malformed_register_is_invalid_format() -> None:
    frame = bytearray(VECTORS["V2-request"].data)
    frame[256 + 4] = 200  # sdk_name length runs past the body
    rejected_with(bytes(frame), Status.INVALID_FORMAT)


@pytest.mark.parametrize(
    ("wire", "code"),
    [
        (bytes.fromhex("06000000 e7030000 0102"), 999),
        (bytes.fromhex("04000000 28000000"), 40),  # Register is VSR only
        (bytes.fromhex("04000000 5e020000"), 606),  # "There is no 606" before VSR (§9.2)
    ],
    ids=["999", "40", "606"],
)
def test_unknown_legacy_command_is_answered_feature_unavailable(wire: bytes, code: int) -> None:
    request = decode_one(wire)
    assert request.command == UnknownCommand(code=code, payload=wire[8:])
    reply = server().send_error(request, Status.FEATURE_UNAVAILABLE)
    assert reply == bytes.fromhex("05000000 00000000")


def test_unknown_vsr_command_and_operation() -> None:
    unknown = UnknownCommand(code=999, payload=b"\x01")
    request = decode_one(client().send(unknown))
    assert request.command == unknown
    assert request.header is not None and request.header.operation == 2
    legacy_login = client().send(UnknownCommand(code=38, payload=b""))  # legacy only
    assert decode_one(legacy_login).command == UnknownCommand(code=38, payload=b"")
    frame = bytearray(VECTORS["V1-request"].data)
    frame[176] = 99  # no such operation
    request = decode_one(bytes(frame))
    assert isinstance(request.command, UnknownCommand)
    reply = server().send_error(request, Status.FEATURE_UNAVAILABLE)
    assert answer(Ping(), reply) == IggyReply(command=Ping(), status=5)


# --- server misuse ------------------------------------------------------------------------------


def test_server_refuses_replies_the_client_cannot_parse() -> None:
    stats = decode_one(client().send(GetStats()))
    with pytest.raises(LocalProtocolError):
        server().send_ok(stats, StreamDetails(stream=samples.STREAM))  # not a stats reply
    poll = decode_one(client().send(samples.poll(Era.C)))
    with pytest.raises(LocalProtocolError):
        server().send_ok(poll)  # §6.3: never an empty poll body
    assert server().send_ok(poll, PolledMessages(partition_id=0, current_offset=0))
    with pytest.raises(LocalProtocolError):
        server().send_error(stats, Status.OK)
    with pytest.raises(LocalProtocolError):
        server().send_rejection(stats, Status.ERROR)  # op 2 has no result section
    legacy = decode_one(VECTORS["V9-ping"].data)
    with pytest.raises(LocalProtocolError):
        server().send_eviction(legacy, 1)
    details = StreamDetails(stream=samples.STREAM, topics=())  # topics_count says 1
    get = decode_one(client().send(GetStream(stream_id=1)))
    with pytest.raises(LocalProtocolError):
        server().send_ok(get, details)


# --- client -------------------------------------------------------------------------------------


def test_client_refuses_what_its_framing_cannot_carry() -> None:
    codec = client()
    with pytest.raises(LocalProtocolError):
        codec.send(LoginUser(username="u", password="p"))  # legacy only
    with pytest.raises(LocalProtocolError):
        codec.send(CreateStream(name=""))  # names are 1..255 bytes
    with pytest.raises(LocalProtocolError):
        codec.send(GetStream(stream_id=2**32))
    assert codec.next_reply() is NEED_DATA  # nothing was left outstanding
    with pytest.raises(LocalProtocolError):
        IggyClientCodec(Framing.VSR, era=Era.B)
    with pytest.raises(LocalProtocolError):
        IggyClientCodec(Framing.LEGACY, era=Era.C)


def vsr_reply(operation: int, payload: bytes, status: int = 0) -> bytes:
    header = ReplyHeader(client=1, request=1, operation=operation, status=status)
    return encode_reply_header(header, len(payload)) + payload


@pytest.mark.parametrize(
    ("command", "reply", "match"),
    [
        (Ping(), vsr_reply(2, b"x"), "unexpected bytes"),
        (CreateStream(name="s"), vsr_reply(128, (2).to_bytes(4, "little")), "2 results"),
        (Ping(), vsr_reply(77, b""), "not an Iggy operation"),
        (samples.LOGIN, vsr_reply(1, bytes(4)), "without a session"),
        (GetStats(), vsr_reply(2, b"\x01\x02"), "runs past"),
        (
            Ping(),
            bytes(48) + b"\x00\x01" + bytes(10) + b"\x07" + bytes(195),
            "expected Reply or Eviction",
        ),
    ],
    ids=["body", "results", "operation", "session", "truncated", "command"],
)
def test_client_rejects_malformed_replies(command: object, reply: bytes, match: str) -> None:
    codec = client()
    codec.send(command)  # type: ignore[arg-type]
    codec.receive_data(reply)
    with pytest.raises(RemoteProtocolError, match=match):
        codec.next_reply()


def test_client_rejects_bytes_it_owes_nothing_for_and_truncation() -> None:
    codec = client()
    codec.receive_data(b"\x00")
    with pytest.raises(RemoteProtocolError, match="no request outstanding"):
        codec.next_reply()
    codec = client(Era.B)
    codec.send(GetStats())
    codec.receive_data(bytes(4))
    assert codec.next_reply() is NEED_DATA
    codec.receive_eof()
    with pytest.raises(RemoteProtocolError, match="closed inside a reply"):
        codec.next_reply()
    codec = client()
    codec.receive_eof()
    assert codec.next_reply() is CONNECTION_CLOSED


def test_legacy_error_reply_and_a_truncated_body() -> None:
    assert answer(GetStats(), bytes.fromhex("28000000 00000000"), Era.B) == IggyReply(
        command=GetStats(), status=Status.UNAUTHENTICATED
    )
    with pytest.raises(RemoteProtocolError):
        answer(GetStats(), bytes.fromhex("00000000 02000000 0102"), Era.B)


def test_eviction_resets_the_session() -> None:
    codec = client()
    codec.session = 5
    codec.send(LogoutUser())
    reply = bytearray(256)
    reply[48:52] = (256).to_bytes(4, "little")
    reply[60] = 13
    reply[255] = 14
    reply[144:148] = (0x2C00).to_bytes(4, "little")
    codec.receive_data(bytes(reply))
    result = codec.next_reply()
    assert isinstance(result, IggyReply)
    assert result.status == Status.INCOMPATIBLE_PROTOCOL_VERSION
    assert result.eviction is not None and result.eviction.server_protocol_version == 0x2C00
    assert codec.session == 0


def test_legacy_login_version_picks_the_era() -> None:
    codec = server()
    codec.receive_data(VECTORS["V10-login"].data + VECTORS["V9-login"].data)
    eras = []
    for _ in range(2):
        codec.next_request()
        eras.append(codec.era)
    assert eras == [Era.A, Era.B]
    for version in ("", "x.y", "1", "0.6"):
        codec = server()
        sender = client(Era.B)
        codec.receive_data(sender.send(LoginUser(username="u", password="p", version=version)))
        codec.next_request()
        assert codec.era == (Era.A if version == "0.6" else Era.B)
