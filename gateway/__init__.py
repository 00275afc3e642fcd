"""streamgate: multi-protocol streaming gateway (listeners, translation, router, backends)."""

__version__ = "0.1.0"
