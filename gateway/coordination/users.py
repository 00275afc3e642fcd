"""The gateway's user store: who may connect to a listener that requires authentication.

Users come from the configuration (``[auth] users``); passwords are compared in constant time.
A backend with its own users (RabbitMQ, Iggy) is not asked: the gateway authenticates its own
clients and uses its configured credentials towards the backend (DESIGN.md §4).
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping

import trio

from gateway.model import Authenticate, AuthenticateResult, Unauthorized, Unsupported

MECHANISMS = ("PLAIN",)


class UserStore:
    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = {name: password.encode() for name, password in users.items()}
        self._ids = {name: i for i, name in enumerate(sorted(users), start=1)}

    async def authenticate(self, cmd: Authenticate) -> AuthenticateResult:
        await trio.lowlevel.checkpoint()
        if cmd.mechanism not in MECHANISMS:
            raise Unsupported(f"SASL mechanism {cmd.mechanism} is not supported")
        expected = self._users.get(cmd.username)
        # Compare against something even for an unknown user, so timing does not tell.
        ok = hmac.compare_digest(expected or b"\0" * 32, cmd.secret)
        if expected is None or not ok:
            raise Unauthorized(f"authentication failed for user {cmd.username!r}")
        return AuthenticateResult(user_id=self._ids[cmd.username], username=cmd.username)


__all__ = ["MECHANISMS", "UserStore"]
