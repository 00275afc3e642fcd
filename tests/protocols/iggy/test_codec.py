"""Iggy codec behaviour: framing detection, three-way feeding of every frame kind, the VSR
session rules, and round trips of hand-made samples of every frame class in every era."""

from __future__ import annotations

from dataclasses import replace

import pytest

from protocols._wire import NEED_DATA
from protocols.iggy import (
    CONNECTION_CLOSED,
    Command,
    CommandCode,
    CreateStream,
    Era,
    Framing,
    GetStream,
    IggyReply,
    IggyRequest,
    LoginRegisterResponse,
    Message,
    PartitionId,
    Ping,
    PolledMessages,
    ReplyBody,
    SendMessages,
    StoreConsumerOffset,
    SyncConsumerGroup,
    UnknownCommand,
    detect,
)
from protocols.iggy.commands import COMMANDS, code_of
from tests.helpers.feeding import feed_three_ways
from tests.protocols.iggy import samples
from tests.protocols.iggy.support import (
    VECTORS,
    ClientFeed,
    ServerFeed,
    answer,
    client,
    decode_one,
    server,
    short_id,
    vsr_header_of,
)

ERAS = [Era.A, Era.B, Era.C]
PING = VECTORS["V9-ping"].data


def wire_of(commands: list[Command], era: Era) -> bytes:
    sender = client(era)
    return b"".join(sender.send(command) for command in commands)


def normalized(body: ReplyBody | None) -> ReplyBody | None:
    """Era C checksums are computed by the encoder: compare the rest."""
    if isinstance(body, PolledMessages):
        return replace(body, messages=tuple(replace(m, checksum=0) for m in body.messages))
    return body


# --- detection ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("first", "expected"),
    [
        (b"", NEED_DATA),
        (bytes(7), NEED_DATA),
        (bytes(8), Framing.VSR),
        (bytes(300), Framing.VSR),
        (b"\x04", Framing.LEGACY),
        (bytes(3) + b"\x01", Framing.LEGACY),
        (PING, Framing.LEGACY),
        (VECTORS["V1-request"].data, Framing.VSR),
        (VECTORS["V9-login"].data, Framing.LEGACY),
    ],
    ids=short_id,
)
def test_detect_from_the_first_bytes(first: bytes, expected: object) -> None:
    assert detect(first) == expected


def test_a_lone_8_byte_legacy_ping_is_answered_without_waiting_for_more() -> None:
    codec = server()
    for byte in PING[:-1]:
        codec.receive_data(bytes((byte,)))
        assert codec.next_request() is NEED_DATA
        assert codec.framing is Framing.LEGACY  # decided on the first non-zero byte
    codec.receive_data(PING[-1:])
    request = codec.next_request()
    assert isinstance(request, IggyRequest)
    assert request.command == Ping()
    assert codec.send_ok(request) == bytes(8)


def test_vsr_is_decided_after_eight_zero_bytes_and_then_kept() -> None:
    codec = server()
    codec.receive_data(bytes(7))
    assert codec.next_request() is NEED_DATA
    assert codec.framing is None
    codec.receive_data(VECTORS["V1-request"].data[7:])
    assert isinstance(codec.next_request(), IggyRequest)
    assert codec.framing is Framing.VSR
    assert codec.era is Era.C
    # A legacy ping on a VSR connection is the start of a 256-byte header, not a ping.
    codec.receive_data(PING)
    assert codec.next_request() is NEED_DATA


def test_eof_before_the_framing_is_known() -> None:
    codec = server()
    codec.receive_eof()
    assert codec.next_request() is CONNECTION_CLOSED
    codec = server()
    codec.receive_data(bytes(5))
    codec.receive_eof()
    with pytest.raises(Exception, match="closed inside a request"):
        codec.next_request()


# --- every frame class, every era: round trips and three-way feeding ---------------------------


def test_the_samples_cover_every_command_and_reply_class() -> None:
    request_classes = {type(c) for era in ERAS for c in samples.requests(era)}
    assert {spec.request for spec in COMMANDS.values()} <= request_classes
    reply_classes = {type(r) for era in ERAS for _, r in samples.replies(era)}
    assert {cls for spec in COMMANDS.values() for cls in spec.replies} <= reply_classes


@pytest.mark.parametrize("era", ERAS)
def test_every_request_round_trips(era: Era) -> None:
    codec = server(era)
    for command in samples.requests(era):
        wire = client(era).send(command)
        codec.receive_data(wire)
        request = codec.next_request()
        assert isinstance(request, IggyRequest)
        assert request.command == command
        assert request.code == code_of(command)
        codec.legacy_era = era  # a sample login may have switched it


@pytest.mark.parametrize("era", ERAS)
def test_every_reply_round_trips(era: Era) -> None:
    for command, body in samples.replies(era):
        request = decode_one(client(era).send(command), era)
        wire = server(era).send_ok(request, body)
        assert normalized(answer(command, wire, era).body) == normalized(body), type(body)


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("eof", [False, True])
def test_server_three_ways_over_a_whole_conversation(era: Era, eof: bool) -> None:
    commands = samples.requests(era)
    if era is not Era.C:  # a login would switch the era under the legacy samples
        commands = [c for c in commands if type(c).__name__ != "LoginUser"]
    frames = feed_three_ways(
        lambda: ServerFeed(era), wire_of(commands, era), eof=eof, stop_at=[CONNECTION_CLOSED]
    )
    assert [getattr(f, "command", None) for f in frames] == commands


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("eof", [False, True])
def test_client_three_ways_over_every_reply(era: Era, eof: bool) -> None:
    pairs = samples.replies(era)
    wire = b"".join(
        server(era).send_ok(decode_one(client(era).send(command), era), body)
        for command, body in pairs
    )
    frames = feed_three_ways(
        lambda: ClientFeed([command for command, _ in pairs], era),
        wire,
        eof=eof,
        stop_at=[CONNECTION_CLOSED],
        check_idle=False,  # the client rejects bytes it owes nothing for: tested below
    )
    assert [normalized(getattr(f, "body", None)) for f in frames] == [
        normalized(body) for _, body in pairs
    ]


REQUEST_FRAMES = sorted(
    v.id for v in VECTORS.values() if v.scope == "frame" and v.direction == "request"
)


@pytest.mark.parametrize("name", REQUEST_FRAMES)
def test_request_vectors_three_ways(name: str) -> None:
    vector = VECTORS[name]
    frames = feed_three_ways(
        lambda: ServerFeed(vector.era), vector.data, stop_at=[CONNECTION_CLOSED]
    )
    assert len(frames) == 1


def test_empty_ok_bodies_are_none_and_poll_is_never_empty() -> None:
    get = GetStream(stream_id="missing")
    request = decode_one(client().send(get))
    assert answer(get, server().send_ok(request)) == IggyReply(command=get)
    sync = SyncConsumerGroup(stream_id=0, topic_id=0, group_id=0)
    request = decode_one(client().send(sync))
    assert answer(sync, server().send_ok(request)).body is None  # "not a member" (§5.8)


# --- VSR session and request-number rules (§3.6) -----------------------------------------------


def test_request_numbers_and_sessions_follow_the_sdk() -> None:
    codec = client()
    login = samples.LOGIN
    sent: list[tuple[Command, int, int, int]] = [
        (Ping(), 1, 0, 2),
        (login, 0, 0, 1),
    ]
    for command, number, session, op in sent:
        header = vsr_header_of(codec.send(command))
        assert (header.request, header.session, header.operation) == (number, session, op)
    codec.receive_data(server().send_ok(decode_one(client().send(Ping()))))
    codec.receive_data(
        server().send_ok(
            decode_one(client().send(login)),
            LoginRegisterResponse(
                user_id=1, session=42, server_protocol_version=0, server_version="x"
            ),
        )
    )
    assert codec.next_reply() == IggyReply(command=Ping())
    assert isinstance(codec.next_reply(), IggyReply)
    assert codec.session == 42
    store = StoreConsumerOffset(
        consumer=samples.SINGLE, stream_id=0, topic_id=0, partition_id=0, offset=1
    )
    send = SendMessages(stream_id=0, topic_id=0, partitioning=PartitionId(id=0), messages=())
    expected: list[tuple[Command, int, int, int]] = [
        (Ping(), 1, 2, 0),
        (CreateStream(name="a"), 1, 128, 1),  # metadata: takes 1, the counter becomes 2
        (Ping(), 2, 2, 0),
        (send, 2, 160, 0),
        (store, 2, 161, 0),
        (CreateStream(name="b"), 2, 128, 1),
        (Ping(), 3, 2, 0),
    ]
    for command, number, op, checksummed in expected:
        header = vsr_header_of(codec.send(command))
        assert (header.request, header.operation, header.session) == (number, op, 42), command
        assert bool(header.request_checksum) == bool(checksummed)
        assert header.code == (CommandCode.PING if op == 2 else 0)


def test_pipelined_replies_are_paired_in_order() -> None:
    codec = client()
    commands: list[Command] = [Ping(), GetStream(stream_id=1), CreateStream(name="x")]
    wire = b"".join(server().send_ok(decode_one(codec.send(command))) for command in commands)
    codec.receive_data(wire)
    assert [getattr(codec.next_reply(), "command", None) for _ in commands] == commands
    assert codec.next_reply() is NEED_DATA


def test_a_register_body_with_a_token_decodes_as_a_token_login() -> None:
    token = next(
        c
        for c in samples.requests(Era.C)
        if type(c).__name__ == "LoginRegisterWithPersonalAccessToken"
    )
    request = decode_one(client().send(token))
    assert request.command == token
    assert request.code == CommandCode.LOGIN_REGISTER_WITH_PERSONAL_ACCESS_TOKEN
    assert request.header is not None and request.header.operation == 1


def test_messages_keep_their_absolute_values_across_batches() -> None:
    # Three stored batches (append times 100, 100, 200); the encoder splits at the change of
    # append timestamp and whenever a delta would not fit a u32.
    messages = (
        Message(id=1, payload=b"a", offset=5, timestamp=100, origin_timestamp=2**40),
        Message(id=2, payload=b"b", offset=6, timestamp=100, origin_timestamp=1),
        Message(id=3, payload=b"c", offset=2**33, timestamp=100, origin_timestamp=1),
        Message(id=4, payload=b"d", offset=2**33 + 1, timestamp=200, origin_timestamp=0),
    )
    polled = PolledMessages(partition_id=0, current_offset=2**33 + 1, messages=messages)
    poll = samples.poll(Era.C)
    wire = server().send_ok(decode_one(client().send(poll)), polled)
    assert normalized(answer(poll, wire).body) == polled


@pytest.mark.parametrize("first", [1, 100, 255, 256, 300])
def test_a_big_frame_whose_first_read_ends_inside_its_header(first: int) -> None:
    """The first read ends inside (or just after) the 256-byte header, the rest of a big frame
    comes in one read and is kept aside as it came: the header and then the body are read out of
    that chunk. (The body was read from the wrong place when the header had already reached into
    the kept chunk.)"""
    command = UnknownCommand(code=999, payload=bytes(range(256)) * 300)
    frame = client(Era.C).send(command)
    codec = server()
    codec.receive_data(frame[:first])
    assert codec.next_request() is NEED_DATA
    codec.receive_data(frame[first:])
    got = codec.next_request()
    assert isinstance(got, IggyRequest) and got.command == command
