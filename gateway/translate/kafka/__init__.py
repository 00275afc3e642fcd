"""Kafka <-> the canonical model: requests and responses (``requests``), records and the stored
``kafka`` wire format (``messages``), and the error codes both ways (``errors``)."""

from . import errors, messages, requests

__all__ = ["errors", "messages", "requests"]
