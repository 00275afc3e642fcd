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


@dataclass(frozen=True, slots=True, kw_only=True)
class ScramCredential:
    """What SCRAM (RFC 5802 §3) needs of a password, per mechanism: never the password."""

    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes


@dataclass(slots=True)
class Account:
    """The store's private record: the user plus what proves it is them. Never leaves the store."""

    user: User
    password_hash: str
    # token name -> (info, SHA-256 of the token)
    tokens: dict[str, tuple[TokenInfo, str]] = field(default_factory=dict)
    # SCRAM mechanism -> credential, derived whenever the password is set (none in a store
    # written before SCRAM: such a user has PLAIN only until the password is next set)
    scram: dict[str, ScramCredential] = field(default_factory=dict)


def allowed(
    user: User, action: Action, stream: int | None = None, topic: int | None = None
) -> bool:
    """May ``user`` do ``action`` (on Iggy stream id ``stream``, topic id ``topic``)?

    An inactive user may do nothing, whatever its permissions say.
    """
    return user.status is UserStatus.ACTIVE and grants(user.permissions, action, stream, topic)


__all__ = ["Account", "ScramCredential", "TokenInfo", "User", "UserStatus", "allowed"]
