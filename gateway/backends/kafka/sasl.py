"""SASL from the Kafka backend to its brokers: PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 (KIP-43,
KIP-84), done on every new broker connection before anything else is sent on it.

The URL names the user, ``kafka://alice@h:9092?sasl=SCRAM-SHA-512``; the password is the URL's
(``alice:pw@``, discouraged: it shows wherever the URL is written), or read from
``password_file=PATH``, or from ``STREAMGATE_BACKEND_PASSWORD``. A refused login is
``BackendUnavailable`` naming the broker and the broker's message, never the password.

The exchange is SaslHandshake v1 (the mechanism; the broker answers the ones it has), then
SaslAuthenticate v1 with PLAIN's one token or SCRAM's two (RFC 5802 through
``protocols._wire.scram``; the salted password, PBKDF2, is computed in a worker thread).
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import trio
from kio.index import load_request_schema

from gateway.backends.base import BackendUrlError
from gateway.backends.kafka.conn import BrokerConnection
from gateway.model import BackendUnavailable
from protocols._wire.scram import HASHES, MalformedScram, ScramClient, ScramMismatch
from protocols.kafka.build import build

SASL_HANDSHAKE_KEY: Final = 17
SASL_AUTHENTICATE_KEY: Final = 36
MECHANISMS: Final = ("PLAIN", *HASHES)
PASSWORD_ENV: Final = "STREAMGATE_BACKEND_PASSWORD"
SASL_OPTIONS: Final = frozenset({"sasl", "password_file"})


@dataclass(frozen=True, slots=True)
class SaslLogin:
    mechanism: str
    username: str
    password: str = field(repr=False)


def sasl_login(
    username: str | None,
    password: str | None,
    options: Mapping[str, str],
    environ: Mapping[str, str] | None = None,
) -> SaslLogin | None:
    """The URL's user info and ``sasl``/``password_file`` options -> the login (None: none)."""
    mechanism = options.get("sasl", "").upper()
    if username is None:
        if mechanism or "password_file" in options:
            raise BackendUrlError("kafka backend SASL needs a user: kafka://user@host:port?sasl=")
        return None
    mechanism = mechanism or "PLAIN"
    if mechanism not in MECHANISMS:
        raise BackendUrlError(f"kafka backend sasl: one of {', '.join(MECHANISMS)}")
    if password is None and "password_file" in options:
        path = options["password_file"]
        try:
            with open(path, encoding="utf-8") as f:
                password = f.readline().rstrip("\r\n")
        except OSError as exc:
            raise BackendUrlError(
                f"kafka backend password_file {path!r}: {exc.strerror or exc}"
            ) from None
    if password is None:
        password = (os.environ if environ is None else environ).get(PASSWORD_ENV)
    if password is None:
        raise BackendUrlError(
            f"kafka backend SASL for {username!r}: no password (password_file=PATH, or"
            f" {PASSWORD_ENV})"
        )
    return SaslLogin(mechanism, username, password)


async def authenticate(conn: BrokerConnection, login: SaslLogin, *, timeout_s: float) -> None:
    """Log ``conn`` in; ``BackendUnavailable`` when the broker refuses."""

    async def call(key: int, values: dict[str, Any]) -> Any:
        body = build(load_request_schema(key, 1), values)
        return await conn.request(body, timeout_s=timeout_s)

    def refused(why: str) -> BackendUnavailable:
        conn.close("SASL authentication failed")
        return BackendUnavailable(
            f"{conn.label}: SASL {login.mechanism} login as {login.username!r} refused: {why}"
        )

    answer = await call(SASL_HANDSHAKE_KEY, {"mechanism": login.mechanism})
    if answer.error_code != 0:
        offered = ", ".join(answer.mechanisms) or "none"
        raise refused(f"the broker does not offer {login.mechanism} (it offers: {offered})")

    async def exchange(token: bytes) -> bytes:
        answer = await call(SASL_AUTHENTICATE_KEY, {"auth_bytes": token})
        if answer.error_code != 0:
            raise refused(answer.error_message or f"error {answer.error_code}")
        return bytes(answer.auth_bytes)

    if login.mechanism == "PLAIN":
        await exchange(b"\0" + login.username.encode() + b"\0" + login.password.encode())
        return
    client = ScramClient(
        login.mechanism, login.username, login.password, nonce=secrets.token_urlsafe(24)
    )
    server_first = await exchange(client.client_first())
    try:
        final = await trio.to_thread.run_sync(client.client_final, server_first)
        client.check_server_final(await exchange(final))
    except (MalformedScram, ScramMismatch) as exc:
        raise refused(f"the broker's SCRAM answer does not check out ({exc})") from None


__all__ = ["PASSWORD_ENV", "SASL_OPTIONS", "SaslLogin", "authenticate", "sasl_login"]
