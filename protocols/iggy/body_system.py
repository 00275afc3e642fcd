"""Payload layouts of system, login, user and token commands and replies (iggy.md §5.1-§5.2,
§9.2; users and tokens from the SDK, see ``frames_users``).

Users in era C (apache-iggy 0.9.0 / SDK 0.11, core/binary_protocol; verified against the
client): UserInfo (``responses/users/user_response.rs`` UserResponse) ends in
``[options_len u32][options TLV]``; in UserInfoDetails (``responses/users/get_user.rs``
UserDetailsResponse, the reply to GetUser and CreateUser) no permissions are a u32 0, four zero
bytes, and permissions are ``[1][len u32][permissions]``; CreateUser and UpdateUser requests
(``requests/users/create_user.rs``, ``update_user.rs``) end in an options TLV running to the
end of the body. Permissions (``primitives/permissions.rs``), tokens and clients are unchanged.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any, Final

from .codes import Era
from .frames_system import (
    CacheMetrics,
    ClientConsumerGroup,
    ClientDetails,
    ClientInfo,
    Clients,
    ClusterMetadata,
    ClusterNode,
    DescribeOptions,
    GetClient,
    GetClients,
    GetClusterMetadata,
    GetMe,
    GetSnapshot,
    GetStats,
    IdentityInfo,
    LoginRegister,
    LoginRegisterResponse,
    LoginRegisterWithPersonalAccessToken,
    LoginUser,
    LoginWithPersonalAccessToken,
    LogoutUser,
    OptionSpec,
    OptionSpecs,
    Ping,
    RawReply,
    Snapshot,
    Stats,
)
from .frames_users import (
    ChangePassword,
    CreatePersonalAccessToken,
    CreateUser,
    DeletePersonalAccessToken,
    DeleteUser,
    GetPersonalAccessTokens,
    GetUser,
    GetUsers,
    GlobalPermissions,
    Permissions,
    PersonalAccessTokenInfo,
    PersonalAccessTokens,
    RawPersonalAccessToken,
    StreamPermissions,
    TopicPermissions,
    UpdatePermissions,
    UpdateUser,
    UserInfo,
    UserInfoDetails,
    Users,
)
from .layout import (
    BYTES32,
    BYTES_REST,
    F32,
    FLAG,
    IDENT,
    LEGACY,
    NAME,
    STR32,
    TLV_REST,
    TLV_SIZED,
    U8,
    U16,
    U32,
    U64,
    VSR,
    Field,
    Kind,
    Layout,
    ListOf,
    Maybe,
)
from .wire import Reader, malformed, pack_bytes32, pack_u32

__all__ = ["LAYOUTS"]


class _ClientDetailsKind:
    """ClientInfo, then exactly ``consumer_groups_count`` groups (§5.1)."""

    def encode(self, value: ClientDetails, era: Era, /) -> bytes:
        return _CLIENT_INFO.encode(value.client, era) + b"".join(
            _CLIENT_GROUP.encode(group, era) for group in value.consumer_groups
        )

    def decode(self, reader: Reader, era: Era, /) -> ClientDetails:
        client: ClientInfo = _CLIENT_INFO.decode(reader, era)
        if client.consumer_groups_count * 12 > reader.remaining:
            malformed(f"{client.consumer_groups_count} consumer groups do not fit the body")
        groups = tuple(
            _CLIENT_GROUP.decode(reader, era) for _ in range(client.consumer_groups_count)
        )
        return ClientDetails(client=client, consumer_groups=groups)


# --- permissions: 10 flags, then streams and topics, each followed by a "more" flag ----------

_GLOBAL = Layout(GlobalPermissions, *(Field(f.name, FLAG) for f in fields(GlobalPermissions)))
_STREAM_FLAGS = [f.name for f in fields(StreamPermissions) if f.type == "bool"]
_TOPIC_FLAGS = [f.name for f in fields(TopicPermissions) if f.type == "bool"]


def _chain(items: tuple[Any, ...], encode_one: Any) -> bytes:
    # [has_items u8] then each item followed by 1 (another follows) or 0 (last).
    if not items:
        return b"\x00"
    parts = [b"\x01"]
    for i, item in enumerate(items):
        parts.append(encode_one(item))
        parts.append(b"\x01" if i < len(items) - 1 else b"\x00")
    return b"".join(parts)


def _read_chain(reader: Reader, read_one: Any) -> tuple[Any, ...]:
    items = []
    if reader.flag("permissions presence flag"):
        while True:
            items.append(read_one(reader))
            if not reader.flag("permissions continuation flag"):
                break
    return tuple(items)


def _flags(value: Any, names: list[str]) -> bytes:
    return bytes(int(getattr(value, name)) for name in names)


def _encode_topic(topic: TopicPermissions) -> bytes:
    return pack_u32(topic.topic_id, "topic id") + _flags(topic, _TOPIC_FLAGS)


def _read_topic(reader: Reader) -> TopicPermissions:
    topic_id = reader.u32("topic id")
    flags = {name: reader.flag(name) for name in _TOPIC_FLAGS}
    return TopicPermissions(topic_id=topic_id, **flags)


def _encode_stream(stream: StreamPermissions) -> bytes:
    return (
        pack_u32(stream.stream_id, "stream id")
        + _flags(stream, _STREAM_FLAGS)
        + _chain(stream.topics, _encode_topic)
    )


def _read_stream(reader: Reader) -> StreamPermissions:
    stream_id = reader.u32("stream id")
    flags = {name: reader.flag(name) for name in _STREAM_FLAGS}
    return StreamPermissions(stream_id=stream_id, topics=_read_chain(reader, _read_topic), **flags)


class _PermissionsKind:
    """``[len u32][permissions]``, as CreateUser, UpdatePermissions and GetUser carry them."""

    def encode(self, value: Permissions, era: Era, /) -> bytes:
        raw = _GLOBAL.encode(value.global_permissions, era) + _chain(value.streams, _encode_stream)
        return pack_bytes32(raw, "permissions")

    def decode(self, reader: Reader, era: Era, /) -> Permissions:
        inner = reader.sub(reader.u32("permissions length"), "permissions")
        value = Permissions(
            global_permissions=_GLOBAL.decode(inner, era), streams=_read_chain(inner, _read_stream)
        )
        inner.expect_end("permissions")
        return value


_PERMISSIONS = Maybe(_PermissionsKind())
# Era C user replies write absent permissions as a u32 0 (UserDetailsResponse).
_REPLY_PERMISSIONS_C = Maybe(_PermissionsKind(), padding=3)
_CLIENT_INFO = Layout(
    ClientInfo,
    Field("client_id", U32),
    Field("user_id", U32),
    Field("transport", U8),
    Field("address", STR32),
    Field("consumer_groups_count", U32),
)
_CLIENT_GROUP = Layout(
    ClientConsumerGroup, Field("stream_id", U32), Field("topic_id", U32), Field("group_id", U32)
)
_USER_INFO = Layout(
    UserInfo,
    Field("id", U32),
    Field("created_at", U64),
    Field("status", U8),
    Field("username", NAME),
    Field("options", TLV_SIZED, VSR),
)
_CACHE_METRICS = Layout(
    CacheMetrics,
    Field("stream_id", U32),
    Field("topic_id", U32),
    Field("partition_id", U32),
    Field("hits", U64),
    Field("misses", U64),
    Field("hit_ratio", F32),
)
_CLUSTER_NODE = Layout(
    ClusterNode,
    Field("name", STR32),
    Field("ip", STR32),
    Field("tcp_port", U16),
    Field("quic_port", U16),
    Field("http_port", U16),
    Field("websocket_port", U16),
    Field("role", U8),
    Field("status", U8),
)
_OPTION_SPEC = Layout(
    OptionSpec,
    Field("key", NAME),
    Field("kind", U8),
    Field("default", BYTES32),
    Field("description", STR32),
)
_TOKEN_INFO = Layout(PersonalAccessTokenInfo, Field("name", NAME), Field("expiry_at", U64))

# §5.1: the fixed part is 108 bytes (iggy.md says 104, but its own field list and the SDK's
# mapper add up to 108), then the strings; threads and disk space are era C only.
_STATS = Layout(
    Stats,
    Field("process_id", U32),
    Field("cpu_usage", F32),
    Field("total_cpu_usage", F32),
    *(
        Field(name, U64)
        for name in (
            "memory_usage",
            "total_memory",
            "available_memory",
            "run_time",
            "start_time",
            "read_bytes",
            "written_bytes",
            "messages_size_bytes",
        )
    ),
    *(
        Field(name, U32)
        for name in ("streams_count", "topics_count", "partitions_count", "segments_count")
    ),
    Field("messages_count", U64),
    Field("clients_count", U32),
    Field("consumer_groups_count", U32),
    *(
        Field(name, STR32)
        for name in ("hostname", "os_name", "os_version", "kernel_version", "iggy_server_version")
    ),
    Field("iggy_server_semver", U32),
    Field("cache_metrics", ListOf(_CACHE_METRICS, "u32")),
    Field("threads_count", U32, VSR),
    Field("free_disk_space", U64, VSR),
    Field("total_disk_space", U64, VSR),
)

_REGISTER_PREFIX = (
    Field("protocol_version", U32),
    Field("sdk_name", NAME),
    Field("sdk_version", NAME),
)

LAYOUTS: Final[dict[type[Any], Kind]] = {
    # requests
    Ping: Layout(Ping),
    GetStats: Layout(GetStats),
    GetSnapshot: Layout(
        GetSnapshot, Field("compression", U8), Field("snapshot_types", ListOf(U8, "u8"))
    ),
    GetClusterMetadata: Layout(GetClusterMetadata),
    DescribeOptions: Layout(DescribeOptions, Field("scope", U8)),
    GetMe: Layout(GetMe),
    GetClient: Layout(GetClient, Field("client_id", U32)),
    GetClients: Layout(GetClients),
    LoginRegister: Layout(
        LoginRegister,
        *_REGISTER_PREFIX,
        Field("username", NAME),
        Field("password", NAME),
        Field("context", BYTES32),
    ),
    LoginRegisterWithPersonalAccessToken: Layout(
        LoginRegisterWithPersonalAccessToken,
        *_REGISTER_PREFIX,
        Field("token", NAME),
        Field("context", BYTES32),
    ),
    LoginUser: Layout(
        LoginUser,
        Field("username", NAME),
        Field("password", NAME),
        Field("version", STR32),
        Field("context", BYTES32),
    ),
    LoginWithPersonalAccessToken: Layout(LoginWithPersonalAccessToken, Field("token", NAME)),
    LogoutUser: Layout(LogoutUser),
    GetUser: Layout(GetUser, Field("user_id", IDENT)),
    GetUsers: Layout(GetUsers),
    CreateUser: Layout(
        CreateUser,
        Field("username", NAME),
        Field("password", NAME),
        Field("status", U8),
        Field("permissions", _PERMISSIONS),
        Field("options", TLV_REST, VSR),
    ),
    DeleteUser: Layout(DeleteUser, Field("user_id", IDENT)),
    UpdateUser: Layout(
        UpdateUser,
        Field("user_id", IDENT),
        Field("username", Maybe(NAME)),
        Field("status", Maybe(U8)),
        Field("options", TLV_REST, VSR),
    ),
    UpdatePermissions: Layout(
        UpdatePermissions, Field("user_id", IDENT), Field("permissions", _PERMISSIONS)
    ),
    ChangePassword: Layout(
        ChangePassword,
        Field("user_id", IDENT),
        Field("current_password", NAME),
        Field("new_password", NAME),
    ),
    GetPersonalAccessTokens: Layout(GetPersonalAccessTokens),
    CreatePersonalAccessToken: Layout(
        CreatePersonalAccessToken, Field("name", NAME), Field("expiry", U64)
    ),
    DeletePersonalAccessToken: Layout(DeletePersonalAccessToken, Field("name", NAME)),
    # replies
    Stats: _STATS,
    Snapshot: Layout(Snapshot, Field("data", BYTES_REST)),
    ClusterMetadata: Layout(
        ClusterMetadata, Field("name", STR32), Field("nodes", ListOf(_CLUSTER_NODE, "u32"))
    ),
    OptionSpecs: Layout(OptionSpecs, Field("specs", ListOf(_OPTION_SPEC, "u32"))),
    ClientInfo: _CLIENT_INFO,
    ClientDetails: _ClientDetailsKind(),
    Clients: Layout(Clients, Field("clients", ListOf(_CLIENT_INFO, "rest"))),
    LoginRegisterResponse: Layout(
        LoginRegisterResponse,
        Field("user_id", U32),
        Field("session", U64),
        Field("server_protocol_version", U32),
        Field("server_version", NAME),
    ),
    IdentityInfo: Layout(IdentityInfo, Field("user_id", U32)),
    RawReply: Layout(RawReply, Field("payload", BYTES_REST)),
    UserInfoDetails: Layout(
        UserInfoDetails,
        Field("user", _USER_INFO),
        Field("permissions", _PERMISSIONS, LEGACY),
        Field("permissions", _REPLY_PERMISSIONS_C, VSR),
    ),
    Users: Layout(Users, Field("users", ListOf(_USER_INFO, "rest"))),
    PersonalAccessTokens: Layout(
        PersonalAccessTokens, Field("tokens", ListOf(_TOKEN_INFO, "rest"))
    ),
    RawPersonalAccessToken: Layout(RawPersonalAccessToken, Field("token", NAME)),
}
