"""The user store's file: one JSON document, replaced atomically on every change.

Write a temporary file next to the target, fsync it, ``os.replace`` it over the target and fsync
the directory, so a crash leaves either the old document or the new one, never a torn mix. The
file holds password hashes, SCRAM keys (salt, iterations, StoredKey, ServerKey per mechanism:
RFC 5802 §3; optional, a file from before SCRAM has none) and token digests only; it is still
created owner-only (0600).

Gateways sharing the file change it one at a time under ``locked`` (an exclusive flock on
``.<name>.lock`` beside it; local file systems and volumes, not NFS) and notice another's change
by its ``stamp`` (inode, size and mtime: the atomic replace always gives a new inode).
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from gateway.model.permissions import permissions_from_json, permissions_to_json
from gateway.model.users import Account, ScramCredential, TokenInfo, User, UserStatus

FORMAT_VERSION = 1

Stamp = tuple[int, int, int]  # st_ino, st_size, st_mtime_ns


def stamp(path: Path) -> Stamp | None:
    """What tells one version of the file from the next; None while there is no file."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold the exclusive lock of the store at ``path`` (blocking: other gateways hold it only
    for one read-change-write)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path.with_name(f".{path.name}.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def dump(accounts: Iterable[Account], *, next_user_id: int) -> dict[str, Any]:
    return {"next_user_id": next_user_id, "users": [_account_to_json(a) for a in accounts]}


def restore(doc: Mapping[str, Any]) -> tuple[list[Account], int]:
    """The accounts of a loaded document, and the next user id to hand out."""
    return [_account_from_json(u) for u in doc["users"]], int(doc["next_user_id"])


def _account_to_json(account: Account) -> dict[str, Any]:
    user = account.user
    return {
        "id": user.id,
        "username": user.username,
        "status": user.status.value,
        "created_at_us": user.created_at_us,
        "password": account.password_hash,
        "permissions": permissions_to_json(user.permissions),
        "tokens": [
            {"name": info.name, "expiry_at_us": info.expiry_at_us, "sha256": digest}
            for info, digest in sorted(account.tokens.values(), key=lambda e: e[0].name)
        ],
        "scram": {
            mechanism: {
                "salt": _b64(c.salt),
                "iterations": c.iterations,
                "stored_key": _b64(c.stored_key),
                "server_key": _b64(c.server_key),
            }
            for mechanism, c in sorted(account.scram.items())
        },
    }


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _account_from_json(u: Mapping[str, Any]) -> Account:
    user = User(
        id=int(u["id"]),
        username=u["username"],
        status=UserStatus(u["status"]),
        permissions=permissions_from_json(u["permissions"]),
        created_at_us=int(u["created_at_us"]),
    )
    tokens = {
        t["name"]: (TokenInfo(name=t["name"], expiry_at_us=t["expiry_at_us"]), t["sha256"])
        for t in u["tokens"]
    }
    scram = {
        mechanism: ScramCredential(
            salt=base64.b64decode(c["salt"]),
            iterations=int(c["iterations"]),
            stored_key=base64.b64decode(c["stored_key"]),
            server_key=base64.b64decode(c["server_key"]),
        )
        for mechanism, c in u.get("scram", {}).items()  # absent in files from before SCRAM
    }
    return Account(user, u["password"], tokens, scram)


def load(path: Path) -> dict[str, Any] | None:
    """The stored document, or None when there is no file yet."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    doc = json.loads(text)
    if not isinstance(doc, dict) or doc.get("version") != FORMAT_VERSION:
        raise ValueError(f"{path}: not a streamgate user store (version {FORMAT_VERSION})")
    return doc


def save(path: Path, doc: dict[str, Any]) -> None:
    data = json.dumps({**doc, "version": FORMAT_VERSION}, indent=1, sort_keys=True).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    # Makes the rename itself durable; not possible on every platform (Windows), hence optional.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


__all__ = ["FORMAT_VERSION", "Stamp", "dump", "load", "locked", "restore", "save", "stamp"]
