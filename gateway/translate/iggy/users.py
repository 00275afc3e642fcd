"""Iggy users, permissions and personal access tokens <-> the gateway's user store records
(iggy.md §5.1; the 0.11 SDK layouts are in protocols/iggy). Pure functions.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Final

from gateway.model import permissions as perm
from gateway.model.users import TokenInfo, User, UserStatus
from gateway.translate.iggy.errors import IggyStatus
from gateway.translate.iggy.requests import U64_MAX
from protocols.iggy.frames_users import (
    GlobalPermissions,
    Permissions,
    PersonalAccessTokenInfo,
    StreamPermissions,
    TopicPermissions,
    UserInfo,
    UserInfoDetails,
)
from protocols.iggy.frames_users import UserStatus as WireStatus
from protocols.iggy.status import Status

# --- users ----------------------------------------------------------------------------------------

# iggy_common's limits, counted in UTF-8 bytes (Rust's ``str::len``), not in characters.
USERNAME_BYTES: Final = range(3, 51)
PASSWORD_BYTES: Final = range(3, 101)


def check_username(username: str | None) -> None:
    """A real server refuses a username of the wrong byte length with InvalidUsername (43)."""
    if username is not None and len(username.encode()) not in USERNAME_BYTES:
        raise IggyStatus(Status.INVALID_USERNAME, "username must have 3..50 bytes")


def check_password(password: str) -> None:
    if len(password.encode()) not in PASSWORD_BYTES:
        raise IggyStatus(Status.INVALID_PASSWORD, "password must have 3..100 bytes")


def user_info(user: User) -> UserInfo:
    status = wire_user_status(user.status)
    return UserInfo(
        id=user.id, created_at=user.created_at_us, status=status, username=user.username
    )


def wire_user_status(status: UserStatus) -> int:
    return WireStatus.ACTIVE if status is UserStatus.ACTIVE else WireStatus.INACTIVE


def user_status(status: int) -> UserStatus:
    return UserStatus.INACTIVE if status == WireStatus.INACTIVE else UserStatus.ACTIVE


def user_details(user: User) -> UserInfoDetails:
    """A user with no permission at all is "no permissions" (None) on the wire, as created."""
    granted = user.permissions != perm.Permissions()
    return UserInfoDetails(
        user=user_info(user), permissions=wire_permissions(user.permissions) if granted else None
    )


def _flags(obj: Any) -> dict[str, bool]:
    """The boolean flags of a permissions record (every field but ids and nested lists)."""
    return {
        f.name: getattr(obj, f.name)
        for f in dataclasses.fields(obj)
        if f.name not in ("stream_id", "topic_id", "topics", "streams")
    }


def wire_permissions(p: perm.Permissions) -> Permissions:
    """The gateway's permissions (keyed by id) -> Iggy's (lists carrying their ids)."""
    return Permissions(
        global_permissions=GlobalPermissions(**_flags(p.global_permissions)),
        streams=tuple(
            StreamPermissions(
                stream_id=sid,
                topics=tuple(
                    TopicPermissions(topic_id=tid, **_flags(tp))
                    for tid, tp in sorted(sp.topics.items())
                ),
                **_flags(sp),
            )
            for sid, sp in sorted(p.streams.items())
        ),
    )


def gateway_permissions(p: Permissions | None) -> perm.Permissions:
    if p is None:
        return perm.Permissions()
    return perm.Permissions(
        global_permissions=perm.GlobalPermissions(**_flags(p.global_permissions)),
        streams={
            sp.stream_id: perm.StreamPermissions(
                topics={tp.topic_id: perm.TopicPermissions(**_flags(tp)) for tp in sp.topics},
                **_flags(sp),
            )
            for sp in p.streams
        },
    )


def token_info(info: TokenInfo) -> PersonalAccessTokenInfo:
    return PersonalAccessTokenInfo(name=info.name, expiry_at=info.expiry_at_us or 0)


def token_expiry(expiry: int) -> int | None:
    """CreatePersonalAccessToken's expiry (µs): 0 = server default and u64::MAX = never, both
    "never" here."""
    return None if expiry in (0, U64_MAX) else expiry


__all__ = [
    "PASSWORD_BYTES",
    "USERNAME_BYTES",
    "check_password",
    "check_username",
    "gateway_permissions",
    "token_expiry",
    "token_info",
    "user_details",
    "user_info",
    "user_status",
    "wire_permissions",
    "wire_user_status",
]
