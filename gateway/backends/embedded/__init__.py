"""The embedded backend: a persistent segmented log per partition under one root directory."""

from .backend import EmbeddedBackend, embedded_path, open_embedded
from .fsync import FsyncPolicy

__all__ = ["EmbeddedBackend", "FsyncPolicy", "embedded_path", "open_embedded"]
