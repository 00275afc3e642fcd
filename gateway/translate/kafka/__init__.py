"""Kafka <-> the canonical model: requests and responses (``requests``), records and the stored
``kafka`` wire format (``messages``)."""

from . import messages, requests

__all__ = ["messages", "requests"]
