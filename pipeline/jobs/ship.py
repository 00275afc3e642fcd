"""This project's code for the executors of a cluster: ``gateway``, ``protocols`` and ``pipeline``
zipped from where the driver imports them, so that every task runs the code the driver
planned with (no version skew between nodes). Their third-party dependencies (pyarrow, trio,
structlog...) are not in the zip: the executors' Python must have them (README)."""

from __future__ import annotations

import tempfile
import zipfile
from pathlib import Path
from typing import Final

import gateway
import pipeline
import protocols

PACKAGES: Final = (gateway, protocols, pipeline)
# What a job file for ``spark-submit`` holds: it must not live inside a package, since Python
# puts a script's own directory first on sys.path.
LAUNCHER: Final = """\
# streamgate's Spark jobs for spark-submit: see `streamgate pipeline package --help`.
import sys

from pipeline.cli import main

sys.exit(main())
"""


def write_zip(path: Path) -> Path:
    """The packages' Python sources (and their ``py.typed``) in a zip at ``path``."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as out:
        for package in PACKAGES:
            assert package.__file__ is not None
            root = Path(package.__file__).parent
            for file in sorted(root.rglob("*")):
                if file.suffix in (".py", ".typed") and "__pycache__" not in file.parts:
                    out.write(file, Path(package.__name__) / file.relative_to(root))
    return path


def write_package(directory: Path) -> tuple[Path, Path]:
    """``streamgate.zip`` and ``streamgate_job.py`` in ``directory``: what ``spark-submit
    --py-files streamgate.zip streamgate_job.py <job> ...`` takes."""
    directory.mkdir(parents=True, exist_ok=True)
    job = directory / "streamgate_job.py"
    job.write_text(LAUNCHER)
    return write_zip(directory / "streamgate.zip"), job


def temporary_zip() -> Path:
    """A zip of the packages in a new temporary directory (removed with the driver's
    process by the caller's ``TemporaryDirectory``, or left to the OS's /tmp cleaning)."""
    directory = Path(tempfile.mkdtemp(prefix="streamgate-ship-"))
    return write_zip(directory / "streamgate.zip")


__all__ = ["LAUNCHER", "PACKAGES", "temporary_zip", "write_package", "write_zip"]
