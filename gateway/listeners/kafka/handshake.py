"""What a Kafka client says first: ApiVersions, and on a SASL listener SaslHandshake and
SaslAuthenticate: PLAIN, or SCRAM-SHA-256/512 (RFC 5802 as KIP-84 has it: two SaslAuthenticate
round trips, client-first -> server-first, client-final -> server-final), against the gateway's
users, the login itself through the router like every login.

Any failure (wrong password, unknown user, a malformed or replayed SCRAM message) is answered
SASL_AUTHENTICATION_FAILED and the connection closed, as Kafka's SaslServerAuthenticator does; the
log line names the user and the reason, never a password, proof or key. A login the login guard
refused unhashed (backoff, rate limit, full login queue: ``auth.*``) is answered the same, its
error_message saying to try again later and when.
"""

from __future__ import annotations

import secrets
from typing import Any

from kio.schema.errors import ErrorCode

from gateway.coordination.login_guard import LoginRefused
from gateway.coordination.users import MECHANISMS
from gateway.listeners.kafka.session import Session
from gateway.model import Authenticate, GatewayError
from protocols._wire import MalformedPlain, PlainNotUtf8, RemoteProtocolError, parse_plain
from protocols._wire.scram import (
    HASHES,
    MalformedScram,
    ScramMismatch,
    ScramServer,
    parse_client_first,
)
from protocols.kafka.framing import KafkaRequest


async def api_versions(session: Session, req: KafkaRequest) -> Any:
    versions = session.service.versions
    return session.respond(
        req,
        {
            "throttle_time": 0,
            "error_code": ErrorCode.none,
            "api_keys": [
                {"api_key": k, "min_version": lo, "max_version": hi}
                for k, (lo, hi) in sorted(versions.items())
            ],
        },
    )


async def sasl_handshake(session: Session, req: KafkaRequest) -> Any:
    if req.api_version == 0:
        # v0 is followed by raw, unframed SASL tokens; every client of kafka.md §1.1 uses v1.
        raise RemoteProtocolError("SaslHandshake v0 (unframed SASL tokens) is not supported")
    ok = req.body.mechanism in MECHANISMS
    if ok:
        session.sasl_mechanism = req.body.mechanism
        session.scram = None
    return session.respond(
        req,
        {
            "error_code": ErrorCode.none if ok else ErrorCode.unsupported_sasl_mechanism,
            "mechanisms": list(MECHANISMS),
        },
    )


async def sasl_authenticate(session: Session, req: KafkaRequest) -> Any:
    if session.sasl_mechanism in HASHES:
        return await _scram(session, req, session.sasl_mechanism)
    assert session.ctx is not None
    try:
        creds = parse_plain(bytes(req.body.auth_bytes))
    except PlainNotUtf8:
        # Names and passwords are UTF-8: such a token matches no user (a failed login, not a
        # malformed token).
        return _refused(session, req, "?", "not UTF-8")
    except MalformedPlain:
        return session.respond(
            req,
            {
                "error_code": ErrorCode.sasl_authentication_failed,
                "error_message": "malformed SASL/PLAIN token",
                "auth_bytes": b"",
            },
        )
    try:
        result = await session.router.execute(
            Authenticate(
                mechanism="PLAIN",
                username=creds.authcid,
                secret=creds.passwd.encode(),
                peer=session.conn.peer,
            ),
            session.ctx,
        )
    except GatewayError as exc:
        return _refused(session, req, creds.authcid, exc.message, throttled=_throttled(exc))
    session.authenticated = True
    session.conn.authenticated()
    session.user = result.username
    session.conn.bind(user=result.username)
    return session.respond(
        req,
        {
            "error_code": ErrorCode.none,
            "error_message": None,
            "auth_bytes": b"",
            "session_lifetime": 0,
        },
    )


async def _scram(session: Session, req: KafkaRequest, mechanism: str) -> Any:
    data = bytes(req.body.auth_bytes)
    if session.scram is None:  # client-first
        users = session.service.users
        try:
            first = parse_client_first(data)
        except MalformedScram as exc:
            return _refused(session, req, "?", f"{mechanism}: {exc}")
        if first.extensions.get("tokenauth", "").lower() == "true":
            return _refused(session, req, first.username, "delegation tokens are not supported")
        if users is None:
            return _refused(session, req, first.username, "no user store on this listener")
        credential = users.scram_credential(mechanism, first.username)
        exchange = ScramServer(
            mechanism,
            first,
            salt=credential.salt,
            iterations=credential.iterations,
            server_nonce=secrets.token_urlsafe(24),
        )
        session.scram = (exchange, credential.server_key)
        return _sasl_ok(session, req, exchange.server_first)
    exchange, server_key = session.scram
    session.scram = None
    username = exchange.first.username
    try:
        transcript = exchange.receive_client_final(data)
    except (MalformedScram, ScramMismatch) as exc:
        return _refused(session, req, username, f"{mechanism}: {exc}")
    assert session.ctx is not None
    try:
        result = await session.router.execute(
            Authenticate(
                mechanism=mechanism, username=username, secret=transcript, peer=session.conn.peer
            ),
            session.ctx,
        )
    except GatewayError as exc:
        return _refused(session, req, username, exc.message, throttled=_throttled(exc))
    session.authenticated = True
    session.conn.authenticated()
    session.user = result.username
    session.conn.bind(user=result.username)
    return _sasl_ok(session, req, exchange.server_final(transcript, server_key))


def _sasl_ok(session: Session, req: KafkaRequest, auth_bytes: bytes) -> Any:
    return session.respond(
        req,
        {
            "error_code": ErrorCode.none,
            "error_message": None,
            "auth_bytes": auth_bytes,
            "session_lifetime": 0,
        },
    )


def _throttled(exc: GatewayError) -> str | None:
    # Kafka has no transient SASL error: the wait goes in the message the client reports.
    return exc.message if isinstance(exc, LoginRefused) else None


def _refused(
    session: Session, req: KafkaRequest, username: str, error: str, *, throttled: str | None = None
) -> Any:
    session.conn.log.info("authentication failed", user=username, error=error)
    # Kafka answers SASL_AUTHENTICATION_FAILED and then closes; the client reports it.
    session.close_after_response = True
    return session.respond(
        req,
        {
            "error_code": ErrorCode.sasl_authentication_failed,
            "error_message": (
                f"Authentication failed: {throttled}"
                if throttled
                else "Authentication failed: invalid credentials"
            ),
            "auth_bytes": b"",
        },
    )


__all__ = ["api_versions", "sasl_authenticate", "sasl_handshake"]
