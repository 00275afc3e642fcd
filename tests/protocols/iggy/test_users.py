"""Users, personal access tokens and clients pinned byte for byte.

Era C (apache-iggy 0.9.0, Rust SDK 0.11) follows the SDK's wire types in apache/iggy
``core/binary_protocol`` (the 2026 VSR-era tree; the copies read were in forks of it, and the
wheel's symbols name the same types):

* ``responses/users/user_response.rs`` UserResponse:
  ``[id u32][created_at u64][status u8][username Name][options_len u32][options TLV]``
  (``primitives/options.rs`` ``decode_options_prefixed``);
* ``responses/users/get_user.rs`` UserDetailsResponse (GetUser and CreateUser):
  UserResponse, then no permissions as a u32 0, or ``[1][len u32][permissions]``;
* ``responses/users/get_users.rs`` GetUsersResponse: UserResponse back to back;
* ``primitives/permissions.rs`` WirePermissions: 10 global flags, ``[has_streams]``, each
  stream ``[id u32][6 flags][has_topics]`` + topics ``[id u32][4 flags][has_next]``, then
  ``[has_next]``;
* ``requests/users/create_user.rs`` / ``update_user.rs``: the legacy fields, then an options
  TLV running to the end of the body;
* ``responses/personal_access_tokens/*`` and ``responses/clients/*``: as in eras A/B.

The user requests and replies were checked against the real client over a loopback probe: the
request bodies below are what it sent, and it decoded every reply below into the right users,
statuses and permissions; the legacy layout the codec sent before ended in "Invalid format".
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from protocols import iggy
from protocols._wire import RemoteProtocolError
from protocols.iggy.commands import (
    decode_reply_body,
    decode_request_body,
    encode_reply_body,
    encode_request_body,
)
from tests.protocols.iggy.samples import PERMISSIONS
from tests.protocols.iggy.support import answer, client, decode_one, server

IGGY = iggy.UserInfo(id=0, created_at=1111, status=1, username="iggy")
BOB = iggy.UserInfo(id=5, created_at=2222, status=2, username="bob")
OPT = iggy.UserInfo(
    id=6,
    created_at=4444,
    status=1,
    username="opt",
    options=(
        iggy.Header(key=iggy.HeaderValue.string("a_key"), value=iggy.HeaderValue.string("v1")),
        iggy.Header(
            key=iggy.HeaderValue.string("z_key"),
            value=iggy.HeaderValue.integer(iggy.HeaderKind.UINT64, 7),
        ),
    ),
)
# samples.PERMISSIONS with its second stream as 3, as the probe served it to the client.
BOB_PERMISSIONS = replace(
    PERMISSIONS, streams=(PERMISSIONS.streams[0], replace(PERMISSIONS.streams[1], stream_id=3))
)
# apache_iggy.Permissions(GlobalPermissions(read_streams=True), {2: StreamPermissions(
#     poll_messages=True, topics={4: TopicPermissions(read_topic=True)})})
CAROL_PERMISSIONS = iggy.Permissions(
    global_permissions=iggy.GlobalPermissions(read_streams=True),
    streams=(
        iggy.StreamPermissions(
            stream_id=2,
            poll_messages=True,
            topics=(iggy.TopicPermissions(topic_id=4, read_topic=True),),
        ),
    ),
)

# --- hand-built bodies ---------------------------------------------------------------------------

# UserResponse: id 0, created_at 1111, status 1 (Active), "iggy", options_len 0.
IGGY_C = bytes.fromhex("00000000 5704000000000000 01 04 69676779 00000000")
# UserResponse: id 5, created_at 2222, status 2 (Inactive), "bob", options_len 0.
BOB_C = bytes.fromhex("05000000 ae08000000000000 02 03 626f62 00000000")
# UserResponse with two options: String "a_key" -> String "v1", String "z_key" -> Uint64 7.
OPT_C = bytes.fromhex(
    "06000000 5c11000000000000 01 03 6f7074 28000000"
    "02 05000000 615f6b6579 02 02000000 7631"
    "02 05000000 7a5f6b6579 0c 08000000 0700000000000000"
)
# WirePermissions of BOB_PERMISSIONS (53 bytes).
BOB_PERMISSIONS_RAW = bytes.fromhex(
    "00 01 00 00 00 00 00 00 01 00"  # global: read_servers, poll_messages
    "01"  # has streams
    "01000000 00 01 00 00 00 00 00"  # stream 1: read_stream; no topics
    "01"  # another stream follows
    "03000000 00 00 00 00 00 01 01"  # stream 3: send_messages; has topics
    "00000000 00 01 00 00 01"  # topic 0: read_topic; another follows
    "09000000 01 00 00 01 00"  # topic 9: manage_topic, send_messages; last
    "00"  # last stream
)
# WirePermissions of CAROL_PERMISSIONS (32 bytes), as the client sent them.
CAROL_PERMISSIONS_RAW = bytes.fromhex(
    "00 00 00 00 00 01 00 00 00 00"  # global: read_streams
    "01"  # has streams
    "02000000 00 00 00 00 01 00 01"  # stream 2: poll_messages; has topics
    "04000000 00 01 00 00 00"  # topic 4: read_topic; last
    "00"  # last stream
)
NO_PERMISSIONS_C = bytes(4)  # UserDetailsResponse: None is a u32 0


def request_of(command: iggy.Command) -> iggy.IggyRequest:
    return decode_one(client().send(command))


def reply_frame(command: iggy.Command, body: iggy.ReplyBody | None) -> bytes:
    return server().send_ok(request_of(command), body)


def test_the_hand_built_permissions_are_53_and_32_bytes() -> None:
    assert len(BOB_PERMISSIONS_RAW) == 0x35
    assert len(CAROL_PERMISSIONS_RAW) == 0x20


# --- era C replies -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "body", "expected"),
    [
        (iggy.GetUser(user_id=0), iggy.UserInfoDetails(user=IGGY), IGGY_C + NO_PERMISSIONS_C),
        (
            iggy.GetUser(user_id="bob"),
            iggy.UserInfoDetails(user=BOB, permissions=BOB_PERMISSIONS),
            BOB_C + b"\x01\x35\x00\x00\x00" + BOB_PERMISSIONS_RAW,
        ),
        (iggy.GetUser(user_id=6), iggy.UserInfoDetails(user=OPT), OPT_C + NO_PERMISSIONS_C),
        (iggy.GetUsers(), iggy.Users(users=(IGGY, BOB, OPT)), IGGY_C + BOB_C + OPT_C),
        (iggy.GetUsers(), iggy.Users(users=()), b""),
    ],
    ids=["get-user-none", "get-user-permissions", "get-user-options", "get-users", "no-users"],
)
def test_era_c_user_reads_are_raw_user_details(
    command: iggy.Command, body: iggy.ReplyBody, expected: bytes
) -> None:
    frame = reply_frame(command, body)
    assert frame[208] == 2  # NonReplicated: no result section
    assert frame[256:] == expected
    decoded = None if not expected else body
    assert answer(command, frame) == iggy.IggyReply(command=command, body=decoded)


def test_era_c_get_user_not_found_is_an_empty_body() -> None:
    frame = reply_frame(iggy.GetUser(user_id=99), None)
    assert frame[256:] == b""
    assert answer(iggy.GetUser(user_id=99), frame) == iggy.IggyReply(
        command=iggy.GetUser(user_id=99)
    )


@pytest.mark.parametrize(
    ("details", "expected"),
    [
        (
            iggy.UserInfoDetails(
                user=iggy.UserInfo(id=7, created_at=3333, status=1, username="carol"),
                permissions=CAROL_PERMISSIONS,
            ),
            "07000000 050d000000000000 01 05 6361726f6c 00000000 01 20000000",
        ),
        (
            iggy.UserInfoDetails(
                user=iggy.UserInfo(id=7, created_at=3333, status=2, username="dave")
            ),
            "07000000 050d000000000000 02 04 64617665 00000000 00000000",
        ),
    ],
    ids=["permissions", "none"],
)
def test_era_c_create_user_answers_result_framed_user_details(
    details: iggy.UserInfoDetails, expected: str
) -> None:
    command = iggy.CreateUser(
        username=details.user.username,
        password="secret1",
        status=details.user.status,
        permissions=details.permissions,
    )
    frame = reply_frame(command, details)
    assert frame[208] == 141  # op 141 iggy.CreateUser
    tail = CAROL_PERMISSIONS_RAW if details.permissions else b""
    assert frame[256:] == bytes(4) + bytes.fromhex(expected) + tail  # result section 0 first
    assert answer(command, frame) == iggy.IggyReply(command=command, body=details)


def test_era_c_refuses_the_legacy_user_layout() -> None:
    # What the codec sent before: no options length, None as a single 0 byte.
    legacy = bytes.fromhex("00000000 5704000000000000 01 04 69676779 00")
    with pytest.raises(RemoteProtocolError):
        decode_reply_body(iggy.GetUser(user_id=0), legacy, iggy.Era.C)
    with pytest.raises(RemoteProtocolError):
        decode_reply_body(iggy.GetUsers(), legacy[:-1], iggy.Era.C)


def test_era_c_refuses_non_zero_padding_after_absent_permissions() -> None:
    with pytest.raises(RemoteProtocolError, match="padding"):
        decode_reply_body(iggy.GetUser(user_id=0), IGGY_C + b"\x00\x00\x01\x00", iggy.Era.C)
    with pytest.raises(RemoteProtocolError):
        decode_reply_body(iggy.GetUser(user_id=0), IGGY_C + b"\x00", iggy.Era.C)


# --- era C requests, as apache-iggy 0.9.0 sent them ---------------------------------------------


@pytest.mark.parametrize(
    ("body", "command"),
    [
        ("0104 00000000", iggy.GetUser(user_id=0)),
        ("0203 626f62", iggy.GetUser(user_id="bob")),
        (
            "05 6361726f6c 07 73656372657431 01 01 20000000" + CAROL_PERMISSIONS_RAW.hex(),
            iggy.CreateUser(
                username="carol", password="secret1", status=1, permissions=CAROL_PERMISSIONS
            ),
        ),
        (
            "04 64617665 07 73656372657432 02 00",
            iggy.CreateUser(username="dave", password="secret2", status=2),
        ),
        (
            "0104 07000000 01 06 6361726f6c32 01 02",
            iggy.UpdateUser(user_id=7, username="carol2", status=2),
        ),
        (
            "0206 6361726f6c32 00 00 02 01000000 6b 02 01000000 76",
            iggy.UpdateUser(
                user_id="carol2",
                options=(
                    iggy.Header(
                        key=iggy.HeaderValue.string("k"), value=iggy.HeaderValue.string("v")
                    ),
                ),
            ),
        ),
        (
            "0104 07000000 01 20000000" + CAROL_PERMISSIONS_RAW.hex(),
            iggy.UpdatePermissions(user_id=7, permissions=CAROL_PERMISSIONS),
        ),
        ("0104 07000000 00", iggy.UpdatePermissions(user_id=7)),
        (
            "0104 07000000 07 73656372657431 07 73656372657439",
            iggy.ChangePassword(user_id=7, current_password="secret1", new_password="secret9"),
        ),
        ("0206 6361726f6c32", iggy.DeleteUser(user_id="carol2")),
    ],
    ids=[
        "get-user-id",
        "get-user-name",
        "create-user-permissions",
        "create-user-none",
        "update-user",
        "update-user-options",
        "update-permissions",
        "update-permissions-none",
        "change-password",
        "delete-user",
    ],
)
def test_era_c_user_requests_of_the_real_client(body: str, command: iggy.Command) -> None:
    raw = bytes.fromhex(body)
    request = request_of(command)
    assert request.command == command
    assert decode_request_body(request.code, raw, iggy.Era.C) == command
    assert encode_request_body(command, iggy.Era.C) == raw


def test_create_user_options_run_to_the_end_of_the_body_in_era_c_only() -> None:
    options = (iggy.Header(key=iggy.HeaderValue.string("k"), value=iggy.HeaderValue.string("v")),)
    command = iggy.CreateUser(username="u", password="p", status=1, options=options)
    raw = bytes.fromhex("01 75 01 70 01 00 02 01000000 6b 02 01000000 76")
    assert encode_request_body(command, iggy.Era.C) == raw
    assert decode_request_body(33, raw, iggy.Era.C) == command
    # Eras A/B have no options: the same bytes are 12 too many.
    with pytest.raises(RemoteProtocolError):
        decode_request_body(33, raw, iggy.Era.B)
    assert encode_request_body(command, iggy.Era.B) == raw[:6]


# --- eras A/B: the legacy mappers, unchanged -----------------------------------------------------


@pytest.mark.parametrize("era", [iggy.Era.A, iggy.Era.B])
def test_legacy_user_replies_keep_the_single_byte_none_and_no_options(era: iggy.Era) -> None:
    legacy_iggy = bytes.fromhex("00000000 5704000000000000 01 04 69676779")
    legacy_bob = bytes.fromhex("05000000 ae08000000000000 02 03 626f62")
    cases: list[tuple[iggy.Command, iggy.ReplyBody, bytes]] = [
        (iggy.GetUser(user_id=0), iggy.UserInfoDetails(user=IGGY), legacy_iggy + b"\x00"),
        (
            iggy.GetUser(user_id=5),
            iggy.UserInfoDetails(user=BOB, permissions=BOB_PERMISSIONS),
            legacy_bob + b"\x01\x35\x00\x00\x00" + BOB_PERMISSIONS_RAW,
        ),
        (iggy.GetUsers(), iggy.Users(users=(IGGY, BOB)), legacy_iggy + legacy_bob),
    ]
    for command, body, expected in cases:
        assert encode_reply_body(command, body, era) == expected
        assert decode_reply_body(command, expected, era) == body


# --- tokens and clients (source layouts; the Python client has no typed methods for them) -------


CLIENT_3 = iggy.ClientInfo(
    client_id=3, user_id=0, transport=1, address="127.0.0.1:5555", consumer_groups_count=1
)
CLIENT_3_RAW = "03000000 00000000 01 0e000000 3132372e302e302e313a35353535 01000000"


@pytest.mark.parametrize(
    ("command", "body", "expected"),
    [
        (
            iggy.GetPersonalAccessTokens(),
            iggy.PersonalAccessTokens(
                tokens=(
                    iggy.PersonalAccessTokenInfo(name="ci", expiry_at=0),
                    iggy.PersonalAccessTokenInfo(name="deploy", expiry_at=1_700_000_000_000_000),
                )
            ),
            # [name Name][expiry_at u64] back to back (PersonalAccessTokenResponse)
            "02 6369 0000000000000000 06 6465706c6f79 00401e18240a0600",
        ),
        (
            iggy.CreatePersonalAccessToken(name="ci", expiry=0),
            iggy.RawPersonalAccessToken(token="iggypat-abc123"),
            # op 146: result section, then [token Name] (RawPersonalAccessTokenResponse)
            "00000000 0e 696767797061742d616263313233",
        ),
        (
            iggy.GetMe(),
            iggy.ClientDetails(
                client=CLIENT_3,
                consumer_groups=(iggy.ClientConsumerGroup(stream_id=0, topic_id=1, group_id=2),),
            ),
            # ClientResponse then consumer_groups_count x [stream u32][topic u32][group u32]
            CLIENT_3_RAW + "00000000 01000000 02000000",
        ),
        (
            iggy.GetClients(),
            iggy.Clients(
                clients=(
                    replace(CLIENT_3, consumer_groups_count=0),
                    replace(
                        CLIENT_3,
                        client_id=4,
                        user_id=0xFFFFFFFF,  # not logged in
                        transport=2,
                        address="10.0.0.1:1",
                        consumer_groups_count=2,
                    ),
                )
            ),
            # ClientResponse back to back, no count
            "03000000 00000000 01 0e000000 3132372e302e302e313a35353535 00000000"
            "04000000 ffffffff 02 0a000000 31302e302e302e313a31 02000000",
        ),
    ],
    ids=["pats", "create-pat", "get-me", "get-clients"],
)
def test_era_c_token_and_client_replies(
    command: iggy.Command, body: iggy.ReplyBody, expected: str
) -> None:
    frame = reply_frame(command, body)
    assert frame[256:] == bytes.fromhex(expected)
    assert answer(command, frame) == iggy.IggyReply(command=command, body=body)
