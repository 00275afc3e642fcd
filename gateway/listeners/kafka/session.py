"""What one Kafka connection's handlers share: the listener's settings, the Session, and the type
of a handler. The listener (``service``) imports the handlers; they import only this."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from kio.index import load_response_schema

from gateway.coordination import UserStore
from gateway.listeners.connection import Connection
from gateway.router import RequestContext, Router
from protocols._wire.scram import ScramServer
from protocols.kafka.build import build
from protocols.kafka.framing import KafkaRequest


@dataclass(frozen=True, slots=True, kw_only=True)
class KafkaSettings:
    stream: str = "default"
    advertised_host: str = ""  # "" = the address the client connected to
    advertised_port: int = 0
    node_id: int = 1
    cluster_id: str = "streamgate"
    sasl: bool = False
    auto_create_topics: bool = True
    default_partitions: int = 1
    max_frame_bytes: int = 64 << 20


class Service(Protocol):
    """What handlers use of the listener every connection shares (``KafkaService``)."""

    @property
    def router(self) -> Router: ...

    @property
    def settings(self) -> KafkaSettings: ...

    @property
    def versions(self) -> Mapping[int, tuple[int, int]]: ...

    @property
    def users(self) -> UserStore | None: ...  # where SCRAM finds a user's salt and keys


@dataclass(slots=True)
class Session:
    """What one connection's handlers share: settings, where clients should connect, and the
    command context of the request being answered."""

    service: Service
    conn: Connection
    host: str
    port: int
    client_id: str = ""
    authenticated: bool = False
    close_after_response: bool = False  # failed authentication: answer, then hang up
    user: str = ""
    ctx: RequestContext | None = None
    sasl_mechanism: str = "PLAIN"  # as SaslHandshake chose
    # A SCRAM exchange between its client-first and client-final messages, and the server key
    # that signs its end.
    scram: tuple[ScramServer, bytes] | None = None

    @property
    def router(self) -> Router:
        return self.service.router

    @property
    def settings(self) -> KafkaSettings:
        return self.service.settings

    @property
    def peer_host(self) -> str:
        return self.conn.peer.rpartition(":")[0] or self.conn.peer

    def respond(self, req: KafkaRequest, values: dict[str, Any]) -> Any:
        return build(load_response_schema(req.api_key, req.api_version), values)


# A handler answers with a kio response body, a whole frame from the hot encoders (bytes, or a
# Gather of pieces: Fetch), or None (no answer: Produce with acks=0). The table is keyed by api
# key: every request of a key is a KafkaRequest whose body is that key's kio class.
ApiHandler = Callable[[Session, KafkaRequest], Awaitable[object]]
ApiHandlers = Mapping[int, ApiHandler]

__all__ = ["ApiHandler", "ApiHandlers", "KafkaSettings", "Service", "Session"]
