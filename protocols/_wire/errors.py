"""Protocol error types shared by every codec (h11/wsproto style)."""

from __future__ import annotations


class ProtocolError(Exception):
    """Base of the codec errors."""


class RemoteProtocolError(ProtocolError):
    """The peer sent bytes that break the protocol.

    ``hint`` is whatever the codec suggests sending before closing: an error frame (bytes) or a
    protocol error code; ``None`` means close without a reply.
    """

    def __init__(self, message: str, *, hint: object = None) -> None:
        super().__init__(message)
        self.hint = hint


class FrameTooLarge(RemoteProtocolError):
    """A declared frame or field size is above the configured maximum; nothing was allocated."""

    def __init__(self, declared: int, maximum: int, *, hint: object = None) -> None:
        super().__init__(f"declared size {declared} exceeds maximum {maximum}", hint=hint)
        self.declared = declared
        self.maximum = maximum


class LocalProtocolError(ProtocolError):
    """We tried to encode something the protocol cannot carry (our own misuse)."""
