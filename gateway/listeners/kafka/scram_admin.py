"""Kafka's SCRAM credential APIs (KIP-554) on the gateway's user store: DescribeUserScramCredentials
(50) and AlterUserScramCredentials (51), answered as a KRaft broker's ScramImage and
ScramControlManager answer them.

- Describe lists, per user (every user holding a credential when ``users`` is null or empty),
  the mechanisms (SCRAM-SHA-256 = 1, SCRAM-SHA-512 = 2) and iterations of its credentials; a user
  with none (unknown, or one whose password was set before SCRAM) is RESOURCE_NOT_FOUND, a user
  named twice DUPLICATE_RESOURCE. Needs ``read_users`` (Kafka: CLUSTER DESCRIBE); refused, the
  top-level error is CLUSTER_AUTHORIZATION_FAILED with no results, as Kafka's
  ``DescribeUserScramCredentialsRequest.getErrorResponse`` builds it.
- Alter applies deletions and upsertions (the client salts: it sends salt, iterations and
  SaltedPassword; StoredKey and ServerKey are derived here, RFC 5802 §3) in one change of the
  store. Per user: DUPLICATE_RESOURCE when the request names it more than once (deletions and
  upsertions together, as KRaft counts); UNACCEPTABLE_CREDENTIAL for an empty name, iterations
  outside 4096..16384, and (stricter than Kafka, which would store a credential no client can
  use) an empty salt or a salted password that is not the hash's size, or a name the store
  cannot create an account for (3..50 bytes); UNSUPPORTED_SASL_MECHANISM for a mechanism other
  than 1 and 2; RESOURCE_NOT_FOUND for deleting a credential that does not exist. Needs
  ``manage_users`` (Kafka: CLUSTER ALTER); refused, every named user gets
  CLUSTER_AUTHORIZATION_FAILED, as Kafka's ``getErrorResponse`` does. What an upsertion does to
  the account (a new one without permissions or password; an existing one loses its password
  for other logins) is ``UserStore.alter_scram_credentials``.
- A listener without a user store (``KafkaService(users=None)``, where SCRAM logins fail too)
  describes as a broker without SCRAM credentials, and answers every alteration
  UNSUPPORTED_VERSION, as a KRaft broker whose metadata version cannot store SCRAM credentials.

No salt, salted password or key goes into a log line or an error message: they name users and
mechanisms only.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from typing import Any, Final

from kio.schema.errors import ErrorCode

from gateway.listeners.kafka.session import Session
from gateway.model import GatewayError, InvalidRequest, NotFound
from gateway.model.permissions import Action
from gateway.model.users import ScramCredential, allowed
from protocols._wire.scram import HASHES, MAX_ITERATIONS, MIN_ITERATIONS, keys_from_salted_password
from protocols.kafka.framing import KafkaRequest

# Kafka's org.apache.kafka.clients.admin.ScramMechanism types (0 is UNKNOWN).
MECHANISM_TYPES: Final = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
_TYPE_OF: Final = {name: t for t, name in MECHANISM_TYPES.items()}
# Errors.CLUSTER_AUTHORIZATION_FAILED's own message, which Kafka's error responses carry.
_DENIED = "Cluster authorization failed."
# ScramImage's and ScramControlManager's messages
_DESCRIBE_TWICE = "Cannot describe SCRAM credentials for the same user twice in a single request: "
_DESCRIBE_MISSING = "Attempt to describe a user credential that does not exist: "
_ALTER_TWICE = "A user credential cannot be altered twice in the same request"
_DELETE_MISSING = "Attempt to delete a user credential that does not exist"
_Refusal = tuple[ErrorCode, str]
_NO_STORE: Final[_Refusal] = (
    ErrorCode.unsupported_version,
    "This listener has no user store: SCRAM credentials cannot be stored",
)


def _may(session: Session, action: Action) -> bool:
    """As the router authorizes commands: the user as it is now (None: a router built without
    users, where every command runs)."""
    authorizer = session.router.authorizer
    if authorizer is None:
        return True
    assert session.ctx is not None
    return allowed(authorizer.user(session.ctx.user), action)


async def describe_user_scram_credentials(session: Session, req: KafkaRequest) -> Any:
    if not _may(session, "read_users"):
        return session.respond(
            req,
            {"throttle_time": 0, "error_code": ErrorCode.cluster_authorization_failed,
             "error_message": _DENIED, "results": []},
        )  # fmt: skip
    users = session.service.users
    held = users.scram_iterations() if users is not None else {}
    wanted = [u.name for u in req.body.users or ()]
    results = []
    if not wanted:  # null or empty: every user holding a credential
        results = [_described(name, creds) for name, creds in held.items()]
    else:
        counts = Counter(wanted)
        for name in dict.fromkeys(wanted):  # each once, in the order asked
            if counts[name] > 1:
                results.append(_failed(name, ErrorCode.duplicate_resource, _DESCRIBE_TWICE))
            elif name in held:
                results.append(_described(name, held[name]))
            else:
                results.append(_failed(name, ErrorCode.resource_not_found, _DESCRIBE_MISSING))
    return session.respond(
        req,
        {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None,
         "results": results},
    )  # fmt: skip


def _described(name: str, credentials: dict[str, int]) -> dict[str, Any]:
    return {
        "user": name,
        "error_code": ErrorCode.none,
        "error_message": None,
        "credential_infos": [
            {"mechanism": _TYPE_OF[mechanism], "iterations": iterations}
            for mechanism, iterations in credentials.items()
            if mechanism in _TYPE_OF
        ],
    }


def _failed(name: str, code: ErrorCode, message: str) -> dict[str, Any]:
    return {
        "user": name, "error_code": code, "error_message": message + name, "credential_infos": [],
    }  # fmt: skip


def _name_and_mechanism(name: str, mechanism: int) -> _Refusal | str:
    """The mechanism's name, or the refusal (ScramControlManager's first checks)."""
    if not name:
        return ErrorCode.unacceptable_credential, "Username must not be empty"
    found = MECHANISM_TYPES.get(mechanism)
    if found is None:
        return ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"
    return found


def _credential(upsertion: Any, mechanism: str) -> _Refusal | ScramCredential:
    iterations = upsertion.iterations
    if iterations < MIN_ITERATIONS:
        return ErrorCode.unacceptable_credential, "Too few iterations"
    if iterations > MAX_ITERATIONS:
        return ErrorCode.unacceptable_credential, "Too many iterations"
    salt, salted = bytes(upsertion.salt), bytes(upsertion.salted_password)
    if not salt:
        return ErrorCode.unacceptable_credential, "The salt must not be empty"
    size = hashlib.new(HASHES[mechanism]).digest_size
    if len(salted) != size:
        # Hi() of RFC 5802 §2.2 is one block of the hash: anything else matches no password.
        return (
            ErrorCode.unacceptable_credential,
            f"A {mechanism} salted password has {size} bytes, not {len(salted)}",
        )
    keys = keys_from_salted_password(mechanism, salted, salt=salt, iterations=iterations)
    return ScramCredential(
        salt=keys.salt,
        iterations=keys.iterations,
        stored_key=keys.stored_key,
        server_key=keys.server_key,
    )


async def alter_user_scram_credentials(session: Session, req: KafkaRequest) -> Any:
    body = req.body
    named = [d.name for d in body.deletions] + [u.name for u in body.upsertions]
    if not _may(session, "manage_users"):
        denied = (ErrorCode.cluster_authorization_failed, _DENIED)
        return _altered(session, req, dict.fromkeys(named, denied), sorted(set(named)))
    users = session.service.users
    refused: dict[str, _Refusal] = {}
    deletions: dict[str, str] = {}
    upsertions: dict[str, tuple[str, ScramCredential]] = {}

    # ScramControlManager.alterCredentials: deletions, then upsertions; a user's first refusal
    # stands; a second mention of a user withdraws its first change.
    def admit(name: str, mechanism: int) -> str | None:
        """The change's mechanism, or None with the user's refusal recorded."""
        if name in refused:
            return None
        if deletions.pop(name, None) is not None or upsertions.pop(name, None) is not None:
            refused[name] = ErrorCode.duplicate_resource, _ALTER_TWICE
            return None
        checked = _NO_STORE if users is None else _name_and_mechanism(name, mechanism)
        if isinstance(checked, str):
            return checked
        refused[name] = checked
        return None

    for d in body.deletions:
        if (mechanism := admit(d.name, d.mechanism)) is not None:
            deletions[d.name] = mechanism
    for u in body.upsertions:
        if (mechanism := admit(u.name, u.mechanism)) is not None:
            credential = _credential(u, mechanism)
            if isinstance(credential, ScramCredential):
                upsertions[u.name] = mechanism, credential
            else:
                refused[u.name] = credential
    if users is not None and (deletions or upsertions):
        for name, exc in users.alter_scram_credentials(deletions, upsertions).items():
            refused[name] = _store_refusal(exc)
        deleted = sorted(f"{n}/{m}" for n, m in deletions.items() if n not in refused)
        upserted = sorted(f"{n}/{m}" for n, (m, _) in upsertions.items() if n not in refused)
        if deleted or upserted:  # who and which mechanism: never a salt or key
            session.conn.log.info("scram credentials altered", deleted=deleted, upserted=upserted)
    return _altered(session, req, refused, list(dict.fromkeys(named)))


def _store_refusal(exc: GatewayError) -> _Refusal:
    if isinstance(exc, NotFound):
        return ErrorCode.resource_not_found, _DELETE_MISSING
    if isinstance(exc, InvalidRequest):
        return ErrorCode.unacceptable_credential, exc.message
    return ErrorCode.unknown_server_error, exc.message


def _altered(
    session: Session, req: KafkaRequest, refused: dict[str, _Refusal], order: list[str]
) -> Any:
    """One result per user named: its refusal, else NONE (its change was applied)."""
    results = []
    for name in order:
        code, message = refused.get(name, (ErrorCode.none, None))
        results.append({"user": name, "error_code": code, "error_message": message})
    return session.respond(req, {"throttle_time": 0, "results": results})


__all__ = ["MECHANISM_TYPES", "alter_user_scram_credentials", "describe_user_scram_credentials"]
