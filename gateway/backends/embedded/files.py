"""Files and directories of the store: escaped names, atomic JSON, the trash. All blocking.

Names are arbitrary text, so directory names are ESCAPED: every character outside
``[A-Za-z0-9_-]`` is percent-encoded (its UTF-8 bytes, upper-case hex). That covers ``/``,
``.``, ``..`` and a leading dot, so an escaped name never leaves its parent directory and never
looks like the store's own dot entries (``.trash``). A name whose escape would be too long for a
file name keeps a prefix plus ``~`` and a hash of the name (``~`` never appears in an escape).

The real name lives in the JSON file next to the data, never only in the path: when a
directory name is taken anyway (a case-insensitive file system folding ``A`` onto ``a``, a
leftover, a stream or topic renamed away from that name), ``make_dir`` takes the next free
``~<n>`` suffix, so two names never share a directory. JSON files are written tmp + fsync +
rename + fsync of the directory.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import uuid
from typing import Any, Final

from gateway.model import InvalidRequest

TRASH: Final = ".trash"
_SAFE = re.compile(r"[A-Za-z0-9_-]+")
_MAX_DIR_NAME: Final = 200  # below NAME_MAX (255) with room for a ~<n> suffix


def escape_name(name: str) -> str:
    if _SAFE.fullmatch(name):
        escaped = name
    else:
        escaped = "".join(
            c
            if _SAFE.fullmatch(c)
            else "".join(f"%{b:02X}" for b in c.encode("utf-8", "surrogatepass"))
            for c in name
        )
    if len(escaped) > _MAX_DIR_NAME:
        digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        escaped = f"{escaped[: _MAX_DIR_NAME - 40]}~{digest}"  # "~" is never an escape's
    return escaped


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_json(path: str, data: dict[str, Any]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, sort_keys=True)  # ASCII escapes: even lone surrogates round-trip
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(os.path.dirname(path))


def read_json(path: str) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def make_dir(parent: str, name: str) -> str:
    """A new directory for ``name`` under ``parent`` that no other name uses."""
    base = escape_name(name)
    for n in range(1, 1000):
        path = os.path.join(parent, base if n == 1 else f"{base}~{n}")
        try:
            os.mkdir(path)
        except FileExistsError:
            continue
        return path
    raise InvalidRequest(f"no free directory name for {name!r}")


def move_to_trash(root: str, path: str) -> str:
    """Atomically take ``path`` out of the store; the caller removes the returned path."""
    dest = os.path.join(root, TRASH, uuid.uuid4().hex)
    os.rename(path, dest)
    fsync_dir(os.path.dirname(path))
    return dest


def remove_tree(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)
