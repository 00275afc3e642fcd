"""Users, permissions and personal access tokens. iggy.md only lists the operations (§3.5);
the layouts follow the Iggy SDK: eras A/B the legacy one (core/common commands/users,
personal_access_tokens, permissions_global.rs; reply mappers in core/binary_protocol
utils/mapper.rs), era C the 0.11 wire types (core/binary_protocol requests/users,
responses/users, primitives/permissions.rs), which add user options; see ``body_system``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from .headers import Header
from .identifiers import Identifier

__all__ = [
    "ChangePassword",
    "CreatePersonalAccessToken",
    "CreateUser",
    "DeletePersonalAccessToken",
    "DeleteUser",
    "GetPersonalAccessTokens",
    "GetUser",
    "GetUsers",
    "GlobalPermissions",
    "Permissions",
    "PersonalAccessTokenInfo",
    "PersonalAccessTokens",
    "RawPersonalAccessToken",
    "StreamPermissions",
    "TopicPermissions",
    "UpdatePermissions",
    "UpdateUser",
    "UserInfo",
    "UserInfoDetails",
    "UserStatus",
    "Users",
]


class UserStatus(IntEnum):
    ACTIVE = 1
    INACTIVE = 2


@dataclass(frozen=True, slots=True, kw_only=True)
class GlobalPermissions:
    manage_servers: bool = False
    read_servers: bool = False
    manage_users: bool = False
    read_users: bool = False
    manage_streams: bool = False
    read_streams: bool = False
    manage_topics: bool = False
    read_topics: bool = False
    poll_messages: bool = False
    send_messages: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicPermissions:
    topic_id: int
    manage_topic: bool = False
    read_topic: bool = False
    poll_messages: bool = False
    send_messages: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamPermissions:
    stream_id: int
    manage_stream: bool = False
    read_stream: bool = False
    manage_topics: bool = False
    read_topics: bool = False
    poll_messages: bool = False
    send_messages: bool = False
    topics: tuple[TopicPermissions, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Permissions:
    # The SDK's map is a list here, in wire order; no streams and "None" encode alike.
    global_permissions: GlobalPermissions
    streams: tuple[StreamPermissions, ...] = ()


# --- requests ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class GetUser:
    user_id: Identifier


@dataclass(frozen=True, slots=True, kw_only=True)
class GetUsers:
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateUser:
    username: str
    password: str
    status: int  # a UserStatus
    permissions: Permissions | None = None
    options: tuple[Header, ...] = ()  # era C: string-keyed TLV to the end of the body


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteUser:
    user_id: Identifier


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateUser:
    user_id: Identifier
    username: str | None = None
    status: int | None = None
    options: tuple[Header, ...] = ()  # era C: only the changed keys (a patch), to the end


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdatePermissions:
    user_id: Identifier
    permissions: Permissions | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ChangePassword:
    user_id: Identifier
    current_password: str
    new_password: str


@dataclass(frozen=True, slots=True, kw_only=True)
class GetPersonalAccessTokens:
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatePersonalAccessToken:
    name: str
    expiry: int  # microseconds; 0 = server default, u64::MAX = never


@dataclass(frozen=True, slots=True, kw_only=True)
class DeletePersonalAccessToken:
    name: str


# --- replies ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class UserInfo:
    id: int
    created_at: int
    status: int  # a UserStatus
    username: str
    options: tuple[Header, ...] = ()  # era C


@dataclass(frozen=True, slots=True, kw_only=True)
class UserInfoDetails:
    user: UserInfo
    permissions: Permissions | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Users:
    users: tuple[UserInfo, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class PersonalAccessTokenInfo:
    name: str
    expiry_at: int  # 0 = never


@dataclass(frozen=True, slots=True, kw_only=True)
class PersonalAccessTokens:
    tokens: tuple[PersonalAccessTokenInfo, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class RawPersonalAccessToken:
    token: str
