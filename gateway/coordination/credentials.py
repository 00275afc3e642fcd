"""Password hashes and personal access tokens: what the user store keeps instead of secrets.

Passwords: scrypt (RFC 7914) with a random 16-byte salt, stored as
``scrypt$<n>$<r>$<p>$<salt b64>$<hash b64>`` so the cost can be raised later without breaking
stored hashes. One hash costs about 30 ms and 16 MiB, so callers on the trio thread run it in a
worker thread.

Tokens: 32 random bytes, URL-safe base64, shown to the client once. Being uniformly random they
need no salt or slow KDF: the store keeps their SHA-256 and finds a token by that digest.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

_N, _R, _P, _DKLEN = 1 << 14, 8, 1, 32
_SALT_BYTES = 16
TOKEN_BYTES = 32


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def hash_password(password: str) -> str:
    salt = secrets.token_bytes(_SALT_BYTES)
    digest = hashlib.scrypt(password.encode(), salt=salt, n=_N, r=_R, p=_P, dklen=_DKLEN)
    return f"scrypt${_N}${_R}${_P}${_b64(salt)}${_b64(digest)}"


def verify_password(password: str, stored: str | None) -> bool:
    """Constant time in the password; ``stored=None`` (unknown user) still pays for one hash."""
    if stored is None:
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


def new_token() -> str:
    return secrets.token_urlsafe(TOKEN_BYTES)


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


__all__ = ["TOKEN_BYTES", "hash_password", "new_token", "token_digest", "verify_password"]
