"""What the user store holds per user (Iggy's UserInfo fields), and the permission check on it."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from gateway.model.permissions import Action, Permissions, grants


class UserStatus(StrEnum):
    ACTIVE = "active"
    INACTIVE = "inactive"


@dataclass(frozen=True, slots=True, kw_only=True)
class User:
    id: int
    username: str
    status: UserStatus
    permissions: Permissions
    created_at_us: int


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenInfo:
    name: str
    expiry_at_us: int | None  # None = never expires


@dataclass(slots=True)
class Account:
    """The store's private record: the user plus what proves it is them. Never leaves the store."""

    user: User
    password_hash: str
    # token name -> (info, SHA-256 of the token)
    tokens: dict[str, tuple[TokenInfo, str]] = field(default_factory=dict)


def allowed(
    user: User, action: Action, stream: int | None = None, topic: int | None = None
) -> bool:
    """May ``user`` do ``action`` (on Iggy stream id ``stream``, topic id ``topic``)?

    An inactive user may do nothing, whatever its permissions say.
    """
    return user.status is UserStatus.ACTIVE and grants(user.permissions, action, stream, topic)


__all__ = ["Account", "TokenInfo", "User", "UserStatus", "allowed"]
