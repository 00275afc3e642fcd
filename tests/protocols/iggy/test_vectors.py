"""iggy.md §10: every captured frame decodes to what the doc says and re-encodes byte for byte
in the role that produced it (requests by the client codec, replies by the server codec)."""

from __future__ import annotations

import pytest

from protocols.iggy import (
    Balanced,
    Command,
    Consumer,
    ConsumerKind,
    CreateStream,
    CreateTopic,
    Era,
    EvictionReason,
    GetTopic,
    Header,
    HeaderKind,
    HeaderValue,
    IdentityInfo,
    IggyReply,
    IggyRequest,
    LoginRegister,
    LoginRegisterResponse,
    LoginUser,
    LogoutUser,
    Message,
    Partition,
    PartitionId,
    Ping,
    PolledMessages,
    PollingKind,
    PollingStrategy,
    PollMessages,
    SendMessages,
    SendMessagesConfirmation,
    SendMessagesResponse,
    Status,
    Stream,
    StreamDetails,
    Topic,
    TopicDetails,
)
from tests.protocols.iggy.support import (
    VECTORS,
    answer,
    client,
    client_like,
    decode_one,
    server,
    vsr_header_of,
)

KV = (Header(key=HeaderValue.string("k"), value=HeaderValue.string("v")),)
CLIENT_1 = 0xD5F13D6632E49199BD4EB8C177280ACD  # cd0a2877… of run 1, read little-endian


def test_the_vector_file_holds_every_hex_frame_of_section_10() -> None:
    sections = {v.raw["section"] for v in VECTORS.values()}
    assert sections == {"V1", "V2", "V3", "V4", "V5", "V6", "V8", "V9", "V10"}
    assert len(VECTORS) == 28


# --- VSR (apache-iggy 0.9.0): whole frames ------------------------------------------------------


def test_v1_ping_and_its_reply() -> None:
    wire, reply_wire = VECTORS["V1-request"].data, VECTORS["V1-reply"].data
    request = decode_one(wire)
    assert request.command == Ping()
    assert request.code == 1
    assert request.header is not None
    assert (request.header.client, request.header.request, request.header.session) == (
        CLIENT_1,
        1,
        0,
    )
    assert request.header.operation == 2
    assert client_like(request.header).send(Ping()) == wire
    assert server().send_ok(request) == reply_wire
    assert answer(Ping(), reply_wire) == IggyReply(command=Ping())


LOGIN = LoginRegister(
    protocol_version=0x2C00,
    sdk_name="rust-sdk",
    sdk_version="0.11.0",
    username="iggy",
    password="iggy",
)
LOGIN_REPLY = LoginRegisterResponse(
    user_id=0, session=1, server_protocol_version=0x2C00, server_version="0.9.0-fake"
)


def test_v2_register_and_its_reply_carrying_the_session() -> None:
    wire, reply_wire = VECTORS["V2-request"].data, VECTORS["V2-reply"].data
    request = decode_one(wire)
    assert request.command == LOGIN
    assert request.code == 40
    assert request.header is not None
    assert request.header.request_checksum == 0x8FDE203C2A3F8095
    codec = client(client_id=request.header.client)  # a fresh session: counter 1, session 0
    assert codec.send(LOGIN) == wire
    assert server().send_ok(request, LOGIN_REPLY) == reply_wire
    codec.receive_data(reply_wire)
    assert codec.next_reply() == IggyReply(command=LOGIN, body=LOGIN_REPLY)
    assert codec.session == 1
    assert codec.request_number == 1  # Register does not advance the counter (§3.6)


S1 = StreamDetails(
    stream=Stream(
        id=0,
        created_at=0x0660DAEC83A6A9,
        topics_count=0,
        size_bytes=0,
        messages_count=0,
        name="s1",
    )
)


def test_v3_create_stream_and_its_result_framed_reply() -> None:
    wire, body = VECTORS["V3-request"].data, VECTORS["V3-reply-body"].data
    request = decode_one(wire)
    assert request.command == CreateStream(name="s1")
    assert request.header is not None
    assert request.header.request_checksum == 0x2F81B4A25A20BEC2  # XXH3("027331")
    codec = client_like(request.header)
    assert codec.send(CreateStream(name="s1")) == wire
    assert codec.request_number == 2  # metadata ops take the counter and advance it
    reply = server().send_ok(request, S1)
    assert reply[256:] == body
    assert reply[208] == 128  # the operation is echoed
    assert answer(CreateStream(name="s1"), reply) == IggyReply(
        command=CreateStream(name="s1"), body=S1
    )


def test_v8_result_rejection_of_create_stream() -> None:
    request = decode_one(VECTORS["V3-request"].data)
    reply = server().send_rejection(request, Status.STREAM_NAME_ALREADY_EXISTS)
    assert reply[256:] == VECTORS["V8-rejection-body"].data
    assert answer(CreateStream(name="s1"), reply) == IggyReply(
        command=CreateStream(name="s1"), status=1012, result_rejection=True
    )


T2_OPTIONS = tuple(
    Header(key=HeaderValue.string(key), value=value)
    for key, value in (
        ("compression_algorithm", HeaderValue.string("gzip")),
        ("consumer_offset_durability", HeaderValue.string("replicated")),
        ("durability", HeaderValue.string("replicated")),
        ("message_expiry", HeaderValue.integer(HeaderKind.UINT64, 60_000_000)),
    )
)
CREATE_T2 = CreateTopic(stream_id=0, name="t2", partitions_count=1, options=T2_OPTIONS)
CREATED = TopicDetails(
    topic=Topic(
        id=0,
        created_at=0x0660DAF94F3159,
        partitions_count=1,
        message_expiry=0,
        compression_algorithm=1,
        max_topic_size=0,
        size_bytes=0,
        messages_count=0,
        name="created",
    ),
    partitions=(
        Partition(
            id=0,
            created_at=0x0660DAF94F3159,
            segments_count=1,
            current_offset=0,
            size_bytes=0,
            messages_count=0,
        ),
    ),
)


def test_v4_create_topic_with_options_and_topic_details() -> None:
    body = VECTORS["V4-request-body"].data
    frame = client().send(CREATE_T2)
    assert frame[256:] == body
    assert frame[176] == 132
    request = decode_one(frame)
    assert request.command == CREATE_T2
    reply = server().send_ok(request, CREATED)
    assert reply[256:] == VECTORS["V4-reply-body"].data
    assert answer(CREATE_T2, reply).body == CREATED
    assert T2_OPTIONS[3].value.to_python() == 60_000_000


def test_v4_get_topic_reply_has_no_result_section() -> None:
    get = GetTopic(stream_id=0, topic_id="created")
    request = decode_one(client().send(get))
    assert request.header is not None and request.header.operation == 2
    reply = server().send_ok(request, CREATED)
    assert reply[256:] == VECTORS["V4-get-topic-reply-body"].data
    assert answer(get, reply).body == CREATED


HELLO_WORLD = SendMessages(
    stream_id="s1",
    topic_id="t1",
    partitioning=PartitionId(id=0),
    messages=(
        Message(
            id=int.from_bytes(bytes.fromhex("74b7616919114618a91bd607fded04e3"), "little"),
            payload=b"hello",
            origin_timestamp=0x0660DAEC83ABF3,
        ),
        Message(
            id=int.from_bytes(bytes.fromhex("f59fba706bfd46b8a4a35cc3f5ba74c4"), "little"),
            payload=b"world",
            headers=KV,
            origin_timestamp=0x0660DAEC83ABF3 + 14,
        ),
    ),
)


def test_v5_send_messages_batch_with_checksums() -> None:
    wire = VECTORS["V5-request"].data
    request = decode_one(wire)
    assert request.command == HELLO_WORLD
    assert request.header is not None
    assert (request.header.request, request.header.session, request.header.operation) == (4, 1, 160)
    assert request.header.request_checksum == 0  # partition-plane ops carry none
    codec = client_like(request.header)
    assert codec.send(HELLO_WORLD) == wire
    assert codec.request_number == 4  # not advanced
    confirmation = SendMessagesResponse(
        confirmations=(
            SendMessagesConfirmation(stream_id=0, topic_id=0, partition_id=0, base_offset=0),
        )
    )
    reply = server().send_ok(request, confirmation)
    assert reply[256:] == VECTORS["V5-reply-body"].data
    assert answer(HELLO_WORLD, reply).body == confirmation


POLL_READER = PollMessages(
    consumer=Consumer(kind=ConsumerKind.CONSUMER, id="reader"),
    stream_id="orders",
    topic_id="created",
    partition_id=0,
    strategy=PollingStrategy(kind=PollingKind.FIRST),
    count=10,
    auto_commit=True,
)
ORDER_1 = Message(
    id=7,
    payload=b"order-1",
    headers=KV,
    offset=0,
    timestamp=0x0660DAF94F34CD,
    origin_timestamp=0x0660DAF94F3252,
    checksum=0x4762127FB2DA9AF3,
)


def test_v6_poll_and_its_batch_reply() -> None:
    frame = client().send(POLL_READER)
    assert frame[256:] == VECTORS["V6-request-body"].data
    assert int.from_bytes(frame[196:200], "little") == 100
    request = decode_one(frame)
    assert request.command == POLL_READER
    polled = PolledMessages(partition_id=0, current_offset=0, messages=(ORDER_1,))
    reply = server().send_ok(request, polled)
    assert reply[256:] == VECTORS["V6-reply-body"].data
    assert answer(POLL_READER, reply).body == polled


def test_v7_logout_then_the_client_starts_over() -> None:
    codec = client(client_id=CLIENT_1)
    codec.session, codec.request_number = 1, 6
    wire = codec.send(LogoutUser())
    header = vsr_header_of(wire)
    assert len(wire) == 256
    assert (header.operation, header.request, header.session) == (3, 6, 1)
    assert header.request_checksum == 0x2D06800538D394C2  # XXH3("")
    request = decode_one(wire)
    assert request.command == LogoutUser()
    reply = server().send_ok(request)
    assert len(reply) == 256 and reply[208] == 3
    codec.receive_data(reply)
    assert codec.next_reply() == IggyReply(command=LogoutUser())
    assert (codec.session, codec.request_number) == (0, 1)
    assert codec.client_id != CLIENT_1


def test_v8_status_reply_to_create_topic() -> None:
    request = decode_one(client().send(CREATE_T2))
    reply = server().send_error(request, Status.STREAM_ID_NOT_FOUND)
    assert len(reply) == 256
    assert reply[216:220] == bytes.fromhex("f1030000")
    assert answer(CREATE_T2, reply) == IggyReply(command=CREATE_T2, status=1009)


def test_v8_eviction_on_a_bad_login() -> None:
    request = decode_one(VECTORS["V2-request"].data)
    reply = server().send_eviction(request, EvictionReason.INVALID_CREDENTIALS)
    expected = bytearray(256)
    expected[48:52] = bytes.fromhex("00010000")
    expected[60] = 0x0D
    expected[128:144] = CLIENT_1.to_bytes(16, "little")
    expected[255] = 0x09
    assert reply == bytes(expected)
    result = answer(LOGIN, reply)
    assert result.status == Status.INVALID_CREDENTIALS
    assert result.eviction is not None and result.eviction.reason == 9


# --- legacy framing ------------------------------------------------------------------------------

ERA_B_LOGIN = LoginUser(username="iggy", password="iggy", version="0.10.0")
ERA_B: list[tuple[str, Command]] = [
    ("V9-ping", Ping()),
    ("V9-login", ERA_B_LOGIN),
    ("V9-create-stream", CreateStream(name="s1")),
    (
        "V9-create-topic",
        CreateTopic(
            stream_id="s1",
            name="t1",
            partitions_count=2,
            compression_algorithm=1,
            replication_factor=1,
        ),
    ),
    (
        "V9-send",
        SendMessages(
            stream_id="s1",
            topic_id="t1",
            partitioning=PartitionId(id=0),
            messages=tuple(
                Message(id=0, payload=p, origin_timestamp=0x0660DAF500104A)
                for p in (b"hello", b"world")
            ),
        ),
    ),
    (
        "V9-poll",
        PollMessages(
            consumer=Consumer(kind=ConsumerKind.CONSUMER, id=0),
            stream_id="s1",
            topic_id="t1",
            partition_id=0,
            strategy=PollingStrategy(kind=PollingKind.OFFSET, value=0),
            count=10,
            auto_commit=False,
        ),
    ),
]
ERA_A_LOGIN = LoginUser(username="iggy", password="iggy", version="0.6.202")
ERA_A: list[tuple[str, Command]] = [
    ("V10-login", ERA_A_LOGIN),
    ("V10-create-stream", CreateStream(name="s1", stream_id=1)),
    (
        "V10-create-topic",
        CreateTopic(
            stream_id=1,
            topic_id=1,
            name="t1",
            partitions_count=2,
            compression_algorithm=1,
            message_expiry=2**64 - 1,
            replication_factor=1,
        ),
    ),
    (
        "V10-send",
        SendMessages(
            stream_id=1,
            topic_id=1,
            partitioning=PartitionId(id=1),
            messages=(Message(id=0, payload=b"hello"),),
        ),
    ),
    (
        "V10-poll",
        PollMessages(
            consumer=Consumer(kind=ConsumerKind.CONSUMER, id=1),
            stream_id=1,
            topic_id=1,
            partition_id=1,
            strategy=PollingStrategy(kind=PollingKind.OFFSET, value=0),
            count=10,
            auto_commit=False,
        ),
    ),
]


@pytest.mark.parametrize(("era", "conversation"), [(Era.B, ERA_B), (Era.A, ERA_A)], ids=["B", "A"])
def test_legacy_requests_on_one_connection(
    era: Era, conversation: list[tuple[str, Command]]
) -> None:
    codec = server()  # era B until the login's version says "0.6.x"
    codec.receive_data(b"".join(VECTORS[name].data for name, _ in conversation))
    sender = client(era)
    for name, command in conversation:
        request = codec.next_request()
        assert isinstance(request, IggyRequest), request
        assert request.command == command, name
        # The login itself is read before its version is known; the era applies after it.
        assert request.era is (Era.B if isinstance(command, LoginUser) else era)
        assert sender.send(command) == VECTORS[name].data
    assert codec.era is era
    assert codec.trailing_data == b""


def test_era_b_replies() -> None:
    ping, login, send = (decode_one(VECTORS[n].data) for n in ("V9-ping", "V9-login", "V9-send"))
    codec = server()
    assert codec.send_ok(ping) == VECTORS["V9-ping-reply"].data
    assert codec.send_ok(login, IdentityInfo(user_id=0)) == VECTORS["V9-login-reply"].data
    # Eras A/B answer a send with an empty body; a confirmation is simply not carried.
    assert codec.send_ok(send) == VECTORS["V9-send-reply"].data
    assert codec.send_ok(send, SendMessagesResponse()) == VECTORS["V9-send-reply"].data
    assert answer(ERA_B_LOGIN, VECTORS["V9-login-reply"].data, Era.B) == IggyReply(
        command=ERA_B_LOGIN, body=IdentityInfo(user_id=0)
    )
    assert answer(Ping(), VECTORS["V9-ping-reply"].data, Era.B) == IggyReply(command=Ping())


def test_era_b_send_index_and_partitioning() -> None:
    command = ERA_B[4][1]
    assert isinstance(command, SendMessages)
    balanced = SendMessages(
        stream_id="s1", topic_id="t1", partitioning=Balanced(), messages=command.messages
    )
    # The server resolves Balanced in this era (§9.2); the frame only changes its partitioning.
    wire = client(Era.B).send(balanced)
    assert decode_one(wire).command == balanced
