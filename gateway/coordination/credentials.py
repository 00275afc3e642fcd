"""Password hashes and personal access tokens: what the user store keeps instead of secrets.

Passwords: scrypt (RFC 7914) with a random 16-byte salt, stored as
``scrypt$<n>$<r>$<p>$<salt b64>$<hash b64>`` so the cost can be raised later without breaking
stored hashes. One hash costs about 30 ms and 16 MiB, so callers on the trio thread run it in a
worker thread.

SCRAM (RFC 5802 §3): for each Kafka SCRAM mechanism a random salt, 4096 iterations (Kafka's
default) and the StoredKey and ServerKey derived from the password, made whenever a password is
set; like the scrypt hash they let the gateway check a login but not recover the password.

Tokens: 32 random bytes, URL-safe base64, shown to the client once. Being uniformly random they
need no salt or slow KDF: the store keeps their SHA-256 and finds a token by that digest.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass

from gateway.model import InvalidRequest
from gateway.model.users import ScramCredential
from protocols._wire.scram import HASHES, derive_keys

_N, _R, _P, _DKLEN = 1 << 14, 8, 1, 32
_SALT_BYTES = 16
TOKEN_BYTES = 32
SCRAM_MECHANISMS = tuple(HASHES)  # SCRAM-SHA-256, SCRAM-SHA-512
SCRAM_ITERATIONS = 4096
_SCRAM_SALT_BYTES = 24
# The password hash of an account that has none: one Kafka's AlterUserScramCredentials made, or
# whose password it retired (KIP-554 gives the server a salted password, from which no scrypt
# hash can be made). It matches no password.
NO_PASSWORD = ""


@dataclass(frozen=True, slots=True)
class PasswordSecrets:
    """What the store keeps of one password."""

    password_hash: str
    scram: dict[str, ScramCredential]


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def hash_password(password: str) -> str:
    salt = secrets.token_bytes(_SALT_BYTES)
    digest = hashlib.scrypt(password.encode(), salt=salt, n=_N, r=_R, p=_P, dklen=_DKLEN)
    return f"scrypt${_N}${_R}${_P}${_b64(salt)}${_b64(digest)}"


def verify_password(password: str, stored: str | None) -> bool:
    """Constant time in the password; ``stored=None`` (unknown user) and ``NO_PASSWORD`` still
    pay for one hash."""
    if not stored:
        hash_password(password)
        return False
    scheme, n, r, p, salt, digest = stored.split("$")
    if scheme != "scrypt":
        raise ValueError(f"unknown password hash scheme {scheme!r}")
    expected = base64.b64decode(digest)
    got = hashlib.scrypt(
        password.encode(),
        salt=base64.b64decode(salt),
        n=int(n),
        r=int(r),
        p=int(p),
        dklen=len(expected),
    )
    return hmac.compare_digest(got, expected)


def scram_credentials(password: str) -> dict[str, ScramCredential]:
    out = {}
    for mechanism in SCRAM_MECHANISMS:
        keys = derive_keys(
            mechanism,
            password,
            salt=secrets.token_bytes(_SCRAM_SALT_BYTES),
            iterations=SCRAM_ITERATIONS,
        )
        out[mechanism] = ScramCredential(
            salt=keys.salt,
            iterations=keys.iterations,
            stored_key=keys.stored_key,
            server_key=keys.server_key,
        )
    return out


def password_secrets(password: str) -> PasswordSecrets:
    """Everything kept of a password being set; about 40 ms: run it in a worker thread."""
    return PasswordSecrets(hash_password(password), scram_credentials(password))


def new_token() -> str:
    return secrets.token_urlsafe(TOKEN_BYTES)


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


# Iggy's validation limits (iggy_common): usernames 3..50 and passwords 3..100 bytes (counted in
# UTF-8 bytes, as Iggy counts them: Rust's ``str::len``), token names 3..30 characters.
USERNAME_LENGTH = range(3, 51)
PASSWORD_LENGTH = range(3, 101)
TOKEN_NAME_LENGTH = range(3, 31)


def _bounds(r: range) -> str:
    return f"{r.start}..{r.stop - 1}"


def check_username(username: str) -> None:
    if len(username.encode()) not in USERNAME_LENGTH:
        raise InvalidRequest(f"username must have {_bounds(USERNAME_LENGTH)} bytes")


def check_password(password: str) -> None:
    if len(password.encode()) not in PASSWORD_LENGTH:
        raise InvalidRequest(f"password must have {_bounds(PASSWORD_LENGTH)} bytes")


def check_token_name(name: str) -> None:
    if len(name) not in TOKEN_NAME_LENGTH:
        raise InvalidRequest(f"token name must have {_bounds(TOKEN_NAME_LENGTH)} characters")


__all__ = [
    "NO_PASSWORD",
    "PASSWORD_LENGTH",
    "SCRAM_ITERATIONS",
    "SCRAM_MECHANISMS",
    "TOKEN_BYTES",
    "TOKEN_NAME_LENGTH",
    "USERNAME_LENGTH",
    "PasswordSecrets",
    "check_password",
    "check_token_name",
    "check_username",
    "hash_password",
    "new_token",
    "password_secrets",
    "scram_credentials",
    "token_digest",
    "verify_password",
]
