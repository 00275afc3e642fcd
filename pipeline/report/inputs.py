"""Which files ``report`` reads. An ``--input`` is one of:

* a path, as ``access_log.path`` names it: that file and what the gateway makes of it, its
  rotated files (``path.1`` .. ``path.<backups>``) and, under ``streamgate run --workers N``,
  each worker's file and its rotations (``access.worker0.jsonl``, ``access.worker0.jsonl.1``:
  ``gateway.access_log.worker_path``); at least one of them must exist;
* a glob (``logs/access*``): the files it matches, nothing added (a path that exists is a
  path, even with ``[`` in its name);
* a URI of another filesystem (``hdfs://``, ``s3a://``): handed to Spark as it is (Spark lists
  and globs it, and says when it is missing).

Local files are checked here, before Spark starts: a missing or unreadable one is one line
naming it, not a JVM stack trace."""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Final

from pipeline.errors import PipelineError

_SCHEME: Final = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_MAGIC: Final = re.compile(r"[*?[]")
# Hadoop reads every path it is given as a glob: a local file's own [ or { must be escaped.
_HADOOP_GLOB: Final = re.compile(r"([*?\[\]{}\\])")


class InputError(PipelineError):
    """An ``--input`` that names no file, or a file that cannot be read."""


def access_log_files(inputs: Sequence[str]) -> list[str]:
    """Every file the inputs name, each once, in order: local ones as absolute paths."""
    if not inputs:
        raise InputError("no --input given")
    found: dict[str, None] = {}
    for given in inputs:
        if _SCHEME.match(given) and not given.startswith("file://"):
            found[given] = None
            continue
        local = given.removeprefix("file://")
        if _MAGIC.search(local) and not os.path.lexists(local):
            matches = [m for m in sorted(glob.glob(local)) if not os.path.isdir(m)]
            if not matches:
                try:  # a name with [ in it, whose own file is gone but not its companions
                    matches = _with_rotations(Path(local))
                except InputError:
                    raise InputError(f"no file matches {given}") from None
        else:
            matches = _with_rotations(Path(local))
        for match in matches:
            _readable(match)
            found[os.path.abspath(match)] = None
    return list(found)


def spark_paths(files: Iterable[str]) -> list[str]:
    """The paths to give ``spark.read``: local files with Hadoop's glob characters escaped."""
    return [f if _SCHEME.match(f) else _HADOOP_GLOB.sub(r"\\\1", f) for f in files]


def _with_rotations(path: Path) -> list[str]:
    if path.is_dir():
        raise InputError(f"cannot read {path}: is a directory (give the log's path, or a glob)")
    directory = path.parent
    # gateway/access_log.py: RotatingFile's path.N, worker_path's <stem>.worker<i><suffix>.
    own = re.compile(
        rf"^(?:{re.escape(path.name)}|{re.escape(path.stem)}\.worker(\d+){re.escape(path.suffix)})"
        rf"(?:\.(\d+))?$"
    )
    try:
        names = os.listdir(directory)
    except OSError as exc:
        if not path.exists():  # the directory's own problem says more than "no such file"
            raise InputError(f"no such file: {path} ({directory}: {exc.strerror})") from None
        names = [path.name]
    ours: list[tuple[int, int, str]] = []
    for name in names:
        if (m := own.match(name)) is not None:
            worker, rotation = m.group(1), m.group(2)
            # the live file, then its rotations oldest last; the workers' after
            ours.append((-1 if worker is None else int(worker), int(rotation or 0), name))
    if not ours:
        raise InputError(f"no such file: {path}")
    return [str(directory / name) for _, _, name in sorted(ours)]


def _readable(path: str) -> None:
    try:
        with open(path, "rb") as f:
            f.read(1)
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None


__all__ = ["InputError", "access_log_files", "spark_paths"]
