"""The jobs users run on the ``streamgate`` source: ``archive`` (topics to Parquet) and ``mirror``
(topics to another URL, verified)."""

from .archive import Archive, archive
from .mirror import Mirror, MirrorRun, mirror
from .progress import Batches
from .session import LOCAL, SessionSettings, job_session
from .verify import PartitionCheck

__all__ = [
    "LOCAL",
    "Archive",
    "Batches",
    "Mirror",
    "MirrorRun",
    "PartitionCheck",
    "SessionSettings",
    "archive",
    "job_session",
    "mirror",
]
