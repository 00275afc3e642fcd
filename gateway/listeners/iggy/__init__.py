"""The Iggy listener: the server side of both Iggy framings for real clients (port 8090)."""

from .service import IggyService
from .session import IggySettings

__all__ = ["IggyService", "IggySettings"]
