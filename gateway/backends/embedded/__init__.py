"""The embedded backend: a persistent segmented log per partition under one root directory."""

from .backend import EmbeddedBackend, embedded_path, open_embedded
from .fsync import FsyncPolicy
from .owner import LOCK_FILE, Listener, Owner, StoreInUse

__all__ = [
    "LOCK_FILE",
    "EmbeddedBackend",
    "FsyncPolicy",
    "Listener",
    "Owner",
    "StoreInUse",
    "embedded_path",
    "open_embedded",
]
