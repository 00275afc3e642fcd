"""Files and directories of the store: escaped names, atomic JSON, the trash, blocks reserved
ahead of appends. All blocking.

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

import ctypes
import hashlib
import json
import os
import re
import shutil
import uuid
from collections.abc import Callable
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


def _fallocate() -> Callable[[int, int, int, int], int] | None:
    """fallocate(2) from the C library, where there is one (Linux); the os module offers only
    posix_fallocate, which grows the file."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        call = getattr(libc, "fallocate64", None) or libc.fallocate
    except (OSError, AttributeError):
        return None
    call.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64)
    call.restype = ctypes.c_int
    return call


_FALLOCATE: Final = _fallocate()
_KEEP_SIZE: Final = 0x01  # FALLOC_FL_KEEP_SIZE


def reserve(fd: int, offset: int, length: int) -> bool:
    """Allocate the file's blocks for ``offset .. offset + length`` without changing its size
    (``fallocate(2)``, ``FALLOC_FL_KEEP_SIZE``): appends into them then skip the file system's
    block reservation page by page (on ext4 a quarter of the CPU of a buffered append of 1 MiB,
    fsyncs included). False where that cannot be done (not Linux, a file system without it, no
    space left): appends allocate as they write, as without it. Blocks past the end of a file
    are freed by truncating it to its size (``release``)."""
    if _FALLOCATE is None or length <= 0:
        return False
    return _FALLOCATE(fd, _KEEP_SIZE, offset, length) == 0


def release(fd: int, size: int) -> None:
    """Free what ``reserve`` allocated past ``size``, the file's end."""
    os.ftruncate(fd, size)


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
