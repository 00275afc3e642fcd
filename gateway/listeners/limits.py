"""What the listeners bound each connection, and all connections together, to: the limits an
operator sets (the configuration's ``limits``), and the bytes all connections of the process
hold of frames still arriving (gateway/listeners/connection.py enforces both)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BUFFERED", "BUFFERED_FLOOR", "Buffered", "Limits"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    max_frame_bytes: int = 64 << 20
    max_connections: int = 4096
    idle_timeout_s: float = 600.0  # Kafka's connections.max.idle.ms default
    send_queue_frames: int = 64
    drain_timeout_s: float = 10.0
    # Until the login (RabbitMQ main caps frames at 8 KiB until Open; the largest handshake
    # frames the clients send, Kafka SaslAuthenticate or an Iggy login with a long PAT, are far
    # below this). 0 = no separate limit.
    max_preauth_frame_bytes: int = 64 << 10
    auth_timeout_s: float = 10.0  # from accept (and TLS handshake) to a successful login
    request_timeout_s: float = 30.0  # from a frame's first byte to its last; 0 = none
    # What all connections of the process may hold of frames still arriving (``Buffered``);
    # 0 = no limit.
    max_buffered_bytes: int = 512 << 20


# A connection holding this much or less of a frame is never closed for the process's total:
# the handshake's frames, and every request a client sends a bit at a time.
BUFFERED_FLOOR = 64 << 10


class Buffered:
    """The bytes every connection of the process holds of frames not yet handled. Each frame is
    bounded by ``max_frame_bytes``, but a client that needs no login (Rog, Kafka without SASL)
    could hold a frame that size on every connection it opens; past ``max_buffered_bytes`` in
    all, the connection that grows the total with more than ``BUFFERED_FLOOR`` of its own is
    closed (``reason="memory"``), as Kafka's ``queued.max.request.bytes`` refuses to read.

    ``awaited``: the rest of big frames that connections let the kernel gather before they
    wake (``WakeWhole``), not yet read. Kept under a quarter of ``max_buffered_bytes``: past
    it, connections read as the bytes come, counted in ``total``, so the memory a client can
    make the gateway's sockets hold stays bounded too."""

    def __init__(self) -> None:
        self.total = 0
        self.awaited = 0


BUFFERED = Buffered()
