"""The Iggy listener: the server side of both Iggy framings for real clients (port 8090)."""

from .group_store import IggyGroups, LocalGroups
from .groups_shared import SharedIggyGroups
from .service import IggyService
from .session import IggySettings

__all__ = ["IggyGroups", "IggyService", "IggySettings", "LocalGroups", "SharedIggyGroups"]
