"""Kafka listener (default port 9092): the broker side of the Kafka protocol for real clients.

Requests on one connection are handled one at a time and answered in order, as a Kafka broker
does (it mutes a connection while a request is in flight); clients pipeline anyway and keep
their coordinator traffic on a connection of its own. A Produce with acks=0 gets no answer
(kafka.md §1.4 trap 4). On a SASL listener nothing but ApiVersions, SaslHandshake and
SaslAuthenticate is accepted before authentication succeeds. Bad input closes the connection
(Kafka does the same for requests it cannot parse); errors of single partitions or groups are
answered with their Kafka error codes.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kio.index import load_response_schema

from gateway.coordination import ProducerIds
from gateway.coordination.users import MECHANISMS
from gateway.listeners.connection import Connection, Handler, advertised_address
from gateway.listeners.kafka import admin as kafka_admin
from gateway.listeners.kafka import data as kafka_data
from gateway.listeners.kafka import groups as kafka_groups
from gateway.model import Authenticate, GatewayError
from gateway.router import RequestContext, Router
from gateway.translate.kafka import requests as tr
from protocols._wire import NEED_DATA, RemoteProtocolError
from protocols.kafka.build import build
from protocols.kafka.framing import (
    CONNECTION_CLOSED,
    KafkaRequest,
    KafkaServerCodec,
    UnsupportedApiVersions,
    encode_api_versions_fallback,
)
from protocols.kafka.versions import ApiKey, advertised, api_name


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


@dataclass(slots=True)
class Session:
    """What one connection's handlers share: settings, where clients should connect, and the
    command context of the request being answered."""

    service: KafkaService
    conn: Connection
    host: str
    port: int
    client_id: str = ""
    authenticated: bool = False
    close_after_response: bool = False  # failed authentication: answer, then hang up
    user: str = ""
    ctx: RequestContext | None = None

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


# Returns the response body (a kio object), raw frame bytes (hot encoders) or None (no answer).
ApiHandler = Callable[[Session, KafkaRequest], Awaitable[Any]]


class KafkaService:
    def __init__(
        self,
        router: Router,
        settings: KafkaSettings,
        *,
        producer_ids: ProducerIds | None = None,
    ) -> None:
        self.router = router
        self.settings = settings
        self.producer_ids = producer_ids or ProducerIds()
        self.versions = advertised(sasl=settings.sasl)
        self.handlers: dict[int, ApiHandler] = {
            ApiKey.API_VERSIONS: api_versions,
            ApiKey.SASL_HANDSHAKE: sasl_handshake,
            ApiKey.SASL_AUTHENTICATE: sasl_authenticate,
            ApiKey.METADATA: kafka_admin.metadata,
            ApiKey.CREATE_TOPICS: kafka_admin.create_topics,
            ApiKey.DELETE_TOPICS: kafka_admin.delete_topics,
            ApiKey.CREATE_PARTITIONS: kafka_admin.create_partitions,
            ApiKey.DESCRIBE_CONFIGS: kafka_admin.describe_configs,
            ApiKey.PRODUCE: kafka_data.produce,
            ApiKey.FETCH: kafka_data.fetch,
            ApiKey.LIST_OFFSETS: kafka_data.list_offsets,
            ApiKey.INIT_PRODUCER_ID: kafka_data.init_producer_id,
            ApiKey.FIND_COORDINATOR: kafka_groups.find_coordinator,
            ApiKey.JOIN_GROUP: kafka_groups.join_group,
            ApiKey.SYNC_GROUP: kafka_groups.sync_group,
            ApiKey.HEARTBEAT: kafka_groups.heartbeat,
            ApiKey.LEAVE_GROUP: kafka_groups.leave_group,
            ApiKey.OFFSET_COMMIT: kafka_groups.offset_commit,
            ApiKey.OFFSET_FETCH: kafka_groups.offset_fetch,
            ApiKey.DESCRIBE_GROUPS: kafka_groups.describe_groups,
            ApiKey.LIST_GROUPS: kafka_groups.list_groups,
        }
        assert set(self.handlers) >= set(self.versions)

    def handler(self) -> Handler:
        return self.handle

    def _address(self, conn: Connection) -> tuple[str, int]:
        s = self.settings
        return advertised_address(conn, s.advertised_host, s.advertised_port, 9092)

    async def handle(self, conn: Connection) -> None:
        codec = KafkaServerCodec(self.versions, self.settings.max_frame_bytes)
        host, port = self._address(conn)
        session = Session(self, conn, host, port, authenticated=not self.settings.sasl)
        metrics = conn.metrics
        inflight = metrics.inflight_requests.labels(tr.PROTOCOL)
        while True:
            req = codec.next_request()
            if req is NEED_DATA:
                await conn.feed(codec)
                continue
            if req is CONNECTION_CLOSED:
                return
            if isinstance(req, UnsupportedApiVersions):
                await conn.send(encode_api_versions_fallback(req.correlation_id, self.versions))
                continue
            if req.client_id and req.client_id != session.client_id:
                session.client_id = req.client_id
                conn.bind(client_id=req.client_id)
            if not session.authenticated and req.api_key not in _BEFORE_AUTH:
                raise RemoteProtocolError(
                    f"{api_name(req.api_key)} before SASL authentication on a SASL listener"
                )
            wire_command = api_name(req.api_key) or "unknown"
            t0 = time.perf_counter()
            ctx = session.ctx = RequestContext(tr.PROTOCOL, wire_command)
            inflight.inc()
            try:
                response = await self.handlers[req.api_key](session, req)
            finally:
                inflight.dec()
            if response is not None:
                await conn.send(
                    response if isinstance(response, bytes) else codec.send(req, response)
                )
            metrics.gateway_overhead.labels(tr.PROTOCOL, wire_command).observe(
                max(0.0, time.perf_counter() - t0 - ctx.command_s)
            )
            if session.close_after_response:
                return


_BEFORE_AUTH = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})


async def api_versions(session: Session, req: KafkaRequest) -> Any:
    versions = session.service.versions
    return session.respond(
        req,
        {
            "error_code": 0,
            "api_keys": [
                {"api_key": k, "min_version": lo, "max_version": hi}
                for k, (lo, hi) in sorted(versions.items())
            ],
        },
    )


async def sasl_handshake(session: Session, req: KafkaRequest) -> Any:
    if req.api_version == 0:
        # v0 is followed by raw, unframed SASL tokens; every client of kafka.md §1.1 uses v1.
        raise RemoteProtocolError("SaslHandshake v0 (unframed SASL tokens) is not supported")
    ok = req.body.mechanism in MECHANISMS
    return session.respond(req, {"error_code": 0 if ok else 33, "mechanisms": list(MECHANISMS)})


async def sasl_authenticate(session: Session, req: KafkaRequest) -> Any:
    # PLAIN (RFC 4616): [authzid] NUL authcid NUL passwd
    parts = bytes(req.body.auth_bytes).split(b"\0")
    if len(parts) != 3:
        return session.respond(
            req, {"error_code": 58, "error_message": "malformed SASL/PLAIN token"}
        )
    username = parts[1].decode("utf-8", "replace")
    assert session.ctx is not None
    try:
        result = await session.router.execute(
            Authenticate(mechanism="PLAIN", username=username, secret=parts[2]), session.ctx
        )
    except GatewayError as exc:
        session.conn.log.info("authentication failed", user=username, error=exc.message)
        # Kafka answers SASL_AUTHENTICATION_FAILED and then closes; the client reports it.
        session.close_after_response = True
        return session.respond(
            req, {"error_code": 58, "error_message": "Authentication failed: invalid credentials"}
        )
    session.authenticated = True
    session.user = result.username
    session.conn.bind(user=result.username)
    return session.respond(req, {"error_code": 0, "auth_bytes": b"", "session_lifetime": 0})


__all__ = ["KafkaService", "KafkaSettings", "Session"]
