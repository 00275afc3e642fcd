"""Iggy <-> the canonical model: commands and replies (``requests``), messages and offsets
(``messages``), streams and topics (``topics``, ``topic_settings``), users (``users``) and the
status codes both ways (``errors``)."""

from . import errors, messages, requests, topic_settings, topics, users

__all__ = ["errors", "messages", "requests", "topic_settings", "topics", "users"]
