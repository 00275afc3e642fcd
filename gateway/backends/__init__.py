"""Backend implementations behind the one ``Backend`` protocol, selected by URL."""

from .base import Backend, Capabilities

__all__ = ["Backend", "Capabilities"]
