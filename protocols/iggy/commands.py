"""The command table: for each code its request frame, the reply bodies that may answer it and
the eras that carry it; and the payload encoders/decoders the two framings share."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, TypeAlias

from protocols._wire import LocalProtocolError, RemoteProtocolError

from . import body_groups, body_messages, body_streams, body_system
from .codes import CommandCode, Era
from .frames_groups import (
    ConsumerGroupAssignment,
    ConsumerGroupDetails,
    ConsumerGroups,
    ConsumerOffsetInfo,
    CreateConsumerGroup,
    DeleteConsumerGroup,
    DeleteConsumerOffset,
    GetConsumerGroup,
    GetConsumerGroups,
    GetConsumerOffset,
    JoinConsumerGroup,
    LeaveConsumerGroup,
    StoreConsumerOffset,
    SyncConsumerGroup,
)
from .frames_messages import (
    FlushUnsavedBuffer,
    PolledMessages,
    PollMessages,
    SendMessages,
    SendMessagesResponse,
)
from .frames_streams import (
    CreatePartitions,
    CreateStream,
    CreateTopic,
    DeletePartitions,
    DeleteSegments,
    DeleteStream,
    DeleteTopic,
    GetStream,
    GetStreams,
    GetTopic,
    GetTopics,
    PurgeStream,
    PurgeTopic,
    StreamDetails,
    Streams,
    TopicDetails,
    Topics,
    UpdateStream,
    UpdateTopic,
)
from .frames_system import (
    ClientDetails,
    Clients,
    ClusterMetadata,
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
    OptionSpecs,
    Ping,
    RawReply,
    Snapshot,
    Stats,
    UnknownCommand,
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
    PersonalAccessTokens,
    RawPersonalAccessToken,
    UpdatePermissions,
    UpdateUser,
    UserInfoDetails,
    Users,
)
from .layout import ALL_ERAS, LEGACY, VSR, Kind, decode_body
from .status import Status

__all__ = [
    "COMMANDS",
    "LAYOUTS",
    "Command",
    "CommandSpec",
    "ReplyBody",
    "code_of",
    "decode_register",
    "decode_reply_body",
    "decode_request_body",
    "encode_reply_body",
    "encode_request_body",
]

Command: TypeAlias = (
    Ping
    | GetStats
    | GetSnapshot
    | GetClusterMetadata
    | DescribeOptions
    | GetMe
    | GetClient
    | GetClients
    | GetUser
    | GetUsers
    | CreateUser
    | DeleteUser
    | UpdateUser
    | UpdatePermissions
    | ChangePassword
    | LoginUser
    | LogoutUser
    | LoginRegister
    | GetPersonalAccessTokens
    | CreatePersonalAccessToken
    | DeletePersonalAccessToken
    | LoginWithPersonalAccessToken
    | LoginRegisterWithPersonalAccessToken
    | PollMessages
    | SendMessages
    | FlushUnsavedBuffer
    | GetConsumerOffset
    | StoreConsumerOffset
    | DeleteConsumerOffset
    | GetStream
    | GetStreams
    | CreateStream
    | DeleteStream
    | UpdateStream
    | PurgeStream
    | GetTopic
    | GetTopics
    | CreateTopic
    | DeleteTopic
    | UpdateTopic
    | PurgeTopic
    | CreatePartitions
    | DeletePartitions
    | DeleteSegments
    | GetConsumerGroup
    | GetConsumerGroups
    | CreateConsumerGroup
    | DeleteConsumerGroup
    | JoinConsumerGroup
    | LeaveConsumerGroup
    | SyncConsumerGroup
    | UnknownCommand
)

ReplyBody: TypeAlias = (
    Stats
    | Snapshot
    | ClusterMetadata
    | OptionSpecs
    | ClientDetails
    | Clients
    | UserInfoDetails
    | Users
    | IdentityInfo
    | LoginRegisterResponse
    | PersonalAccessTokens
    | RawPersonalAccessToken
    | PolledMessages
    | SendMessagesResponse
    | ConsumerOffsetInfo
    | StreamDetails
    | Streams
    | TopicDetails
    | Topics
    | ConsumerGroupDetails
    | ConsumerGroups
    | ConsumerGroupAssignment
    | RawReply
)


@dataclass(frozen=True, slots=True)
class CommandSpec:
    code: int
    request: type[Any]
    replies: tuple[type[Any], ...] = ()  # OK bodies besides None (an empty body)
    eras: frozenset[Era] = ALL_ERAS
    # §6.3: a poll reply is never empty; §3.6: the Register reply carries the session.
    reply_required: bool = False


_C = CommandCode
_SPECS = (
    CommandSpec(_C.PING, Ping),
    CommandSpec(_C.GET_STATS, GetStats, (Stats,)),
    CommandSpec(_C.GET_SNAPSHOT, GetSnapshot, (Snapshot,)),
    CommandSpec(_C.GET_CLUSTER_METADATA, GetClusterMetadata, (ClusterMetadata,)),
    CommandSpec(_C.DESCRIBE_OPTIONS, DescribeOptions, (OptionSpecs,)),
    CommandSpec(_C.GET_ME, GetMe, (ClientDetails,)),
    CommandSpec(_C.GET_CLIENT, GetClient, (ClientDetails,)),
    CommandSpec(_C.GET_CLIENTS, GetClients, (Clients,)),
    CommandSpec(_C.GET_USER, GetUser, (UserInfoDetails,)),
    CommandSpec(_C.GET_USERS, GetUsers, (Users,)),
    CommandSpec(_C.CREATE_USER, CreateUser, (UserInfoDetails,)),
    CommandSpec(_C.DELETE_USER, DeleteUser),
    CommandSpec(_C.UPDATE_USER, UpdateUser),
    CommandSpec(_C.UPDATE_PERMISSIONS, UpdatePermissions),
    CommandSpec(_C.CHANGE_PASSWORD, ChangePassword),
    CommandSpec(_C.LOGIN_USER, LoginUser, (IdentityInfo,), LEGACY),
    CommandSpec(_C.LOGOUT_USER, LogoutUser),
    CommandSpec(_C.LOGIN_REGISTER, LoginRegister, (LoginRegisterResponse,), VSR, True),
    CommandSpec(_C.GET_PERSONAL_ACCESS_TOKENS, GetPersonalAccessTokens, (PersonalAccessTokens,)),
    CommandSpec(
        _C.CREATE_PERSONAL_ACCESS_TOKEN, CreatePersonalAccessToken, (RawPersonalAccessToken,)
    ),
    CommandSpec(_C.DELETE_PERSONAL_ACCESS_TOKEN, DeletePersonalAccessToken),
    CommandSpec(
        _C.LOGIN_WITH_PERSONAL_ACCESS_TOKEN, LoginWithPersonalAccessToken, (IdentityInfo,), LEGACY
    ),
    CommandSpec(
        _C.LOGIN_REGISTER_WITH_PERSONAL_ACCESS_TOKEN,
        LoginRegisterWithPersonalAccessToken,
        (LoginRegisterResponse,),
        VSR,
        True,
    ),
    CommandSpec(_C.POLL_MESSAGES, PollMessages, (PolledMessages,), reply_required=True),
    CommandSpec(_C.SEND_MESSAGES, SendMessages, (SendMessagesResponse,)),
    CommandSpec(_C.FLUSH_UNSAVED_BUFFER, FlushUnsavedBuffer),
    CommandSpec(_C.GET_CONSUMER_OFFSET, GetConsumerOffset, (ConsumerOffsetInfo,)),
    CommandSpec(_C.STORE_CONSUMER_OFFSET, StoreConsumerOffset),
    CommandSpec(_C.DELETE_CONSUMER_OFFSET, DeleteConsumerOffset),
    CommandSpec(_C.GET_STREAM, GetStream, (StreamDetails,)),
    CommandSpec(_C.GET_STREAMS, GetStreams, (Streams,)),
    CommandSpec(_C.CREATE_STREAM, CreateStream, (StreamDetails,)),
    CommandSpec(_C.DELETE_STREAM, DeleteStream),
    CommandSpec(_C.UPDATE_STREAM, UpdateStream),
    CommandSpec(_C.PURGE_STREAM, PurgeStream),
    CommandSpec(_C.GET_TOPIC, GetTopic, (TopicDetails,)),
    CommandSpec(_C.GET_TOPICS, GetTopics, (Topics,)),
    CommandSpec(_C.CREATE_TOPIC, CreateTopic, (TopicDetails,)),
    CommandSpec(_C.DELETE_TOPIC, DeleteTopic),
    CommandSpec(_C.UPDATE_TOPIC, UpdateTopic),
    CommandSpec(_C.PURGE_TOPIC, PurgeTopic),
    CommandSpec(_C.CREATE_PARTITIONS, CreatePartitions),
    CommandSpec(_C.DELETE_PARTITIONS, DeletePartitions),
    CommandSpec(_C.DELETE_SEGMENTS, DeleteSegments),
    CommandSpec(_C.GET_CONSUMER_GROUP, GetConsumerGroup, (ConsumerGroupDetails,)),
    CommandSpec(_C.GET_CONSUMER_GROUPS, GetConsumerGroups, (ConsumerGroups,)),
    CommandSpec(_C.CREATE_CONSUMER_GROUP, CreateConsumerGroup, (ConsumerGroupDetails,)),
    CommandSpec(_C.DELETE_CONSUMER_GROUP, DeleteConsumerGroup),
    CommandSpec(_C.JOIN_CONSUMER_GROUP, JoinConsumerGroup),
    CommandSpec(_C.LEAVE_CONSUMER_GROUP, LeaveConsumerGroup),
    CommandSpec(_C.SYNC_CONSUMER_GROUP, SyncConsumerGroup, (ConsumerGroupAssignment,), VSR),
)
COMMANDS: Final[dict[int, CommandSpec]] = {spec.code: spec for spec in _SPECS}
_BY_CLASS: Final[dict[type[Any], CommandSpec]] = {spec.request: spec for spec in _SPECS}
_UNKNOWN = CommandSpec(0, UnknownCommand, (RawReply,))  # its code is the frame's own

LAYOUTS: Final[dict[type[Any], Kind]] = {
    **body_system.LAYOUTS,
    **body_streams.LAYOUTS,
    **body_groups.LAYOUTS,
    **body_messages.LAYOUTS,
}


def _spec(command: Command) -> CommandSpec:
    if isinstance(command, UnknownCommand):
        return _UNKNOWN
    return _BY_CLASS[type(command)]


def code_of(command: Command) -> int:
    return command.code if isinstance(command, UnknownCommand) else _spec(command).code


def encode_request_body(command: Command, era: Era) -> bytes:
    if isinstance(command, UnknownCommand):
        return command.payload
    spec = _spec(command)
    if era not in spec.eras:
        raise LocalProtocolError(f"{type(command).__name__} does not exist in era {era}")
    return bytes(LAYOUTS[spec.request].encode(command, era))


def decode_request_body(code: int, payload: bytes, era: Era) -> Command:
    """The frame of ``code``; a code this era does not carry is an UnknownCommand (§8)."""
    spec = COMMANDS.get(code)
    if spec is None or era not in spec.eras:
        return UnknownCommand(code=code, payload=payload)
    command: Command = decode_body(LAYOUTS[spec.request], payload, era, spec.request.__name__)
    return command


def decode_register(payload: bytes) -> LoginRegister | LoginRegisterWithPersonalAccessToken:
    """§5.2: no discriminator; the password shape must take the whole body, else a token."""
    try:
        password: LoginRegister = decode_body(
            LAYOUTS[LoginRegister], payload, Era.C, "Register body"
        )
        return password
    except RemoteProtocolError:
        pass
    try:
        token: LoginRegisterWithPersonalAccessToken = decode_body(
            LAYOUTS[LoginRegisterWithPersonalAccessToken], payload, Era.C, "Register body"
        )
    except RemoteProtocolError as exc:
        # The real server evicts with MalformedLogin, which the client reports as InvalidFormat.
        raise RemoteProtocolError(
            f"malformed Register body: {exc}", hint=Status.INVALID_FORMAT
        ) from exc
    return token


def encode_reply_body(command: Command, body: ReplyBody | None, era: Era) -> bytes:
    spec = _spec(command)
    if body is None:
        if spec.reply_required:
            raise LocalProtocolError(f"{type(command).__name__} must be answered with a body")
        return b""
    if not isinstance(body, spec.replies):
        raise LocalProtocolError(f"{type(body).__name__} does not answer {type(command).__name__}")
    return bytes(LAYOUTS[type(body)].encode(body, era))


def decode_reply_body(command: Command, payload: bytes, era: Era) -> ReplyBody | None:
    """An empty OK body is None: "not found" for Get*, nothing for the rest (§3.7)."""
    if not payload:
        return None
    spec = _spec(command)
    if not spec.replies:
        raise RemoteProtocolError(
            f"{len(payload)} unexpected bytes in the reply to {type(command).__name__}"
        )
    cls = spec.replies[0]
    body: ReplyBody = decode_body(LAYOUTS[cls], payload, era, cls.__name__)
    return body
