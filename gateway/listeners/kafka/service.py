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

from gateway.coordination import UserStore
from gateway.listeners.connection import Connection, Handler, advertised_address
from gateway.listeners.kafka import acls as kafka_acls
from gateway.listeners.kafka import admin as kafka_admin
from gateway.listeners.kafka import configs as kafka_configs
from gateway.listeners.kafka import data as kafka_data
from gateway.listeners.kafka import groups as kafka_groups
from gateway.listeners.kafka import handshake as kafka_handshake
from gateway.listeners.kafka import logs as kafka_logs
from gateway.listeners.kafka import replicas as kafka_replicas
from gateway.listeners.kafka import scram_admin as kafka_scram
from gateway.listeners.kafka import transactions as kafka_txn
from gateway.listeners.kafka.session import ApiHandlers, KafkaSettings, Session
from gateway.model import DeleteGroup, DeleteRecords, InitProducer, InitTransaction
from gateway.router import Router
from protocols._wire import NEED_DATA, Gather, RemoteProtocolError
from protocols.kafka.framing import (
    CONNECTION_CLOSED,
    KafkaServerCodec,
    UnsupportedApiVersions,
    encode_api_versions_fallback,
)
from protocols.kafka.versions import ApiKey, advertised, api_name

HANDLERS: ApiHandlers = {
    ApiKey.API_VERSIONS: kafka_handshake.api_versions,
    ApiKey.SASL_HANDSHAKE: kafka_handshake.sasl_handshake,
    ApiKey.SASL_AUTHENTICATE: kafka_handshake.sasl_authenticate,
    ApiKey.METADATA: kafka_admin.metadata,
    ApiKey.CREATE_TOPICS: kafka_admin.create_topics,
    ApiKey.DELETE_TOPICS: kafka_admin.delete_topics,
    ApiKey.CREATE_PARTITIONS: kafka_admin.create_partitions,
    ApiKey.DESCRIBE_CONFIGS: kafka_admin.describe_configs,
    ApiKey.DESCRIBE_ACLS: kafka_acls.describe_acls,
    ApiKey.CREATE_ACLS: kafka_acls.create_acls,
    ApiKey.DELETE_ACLS: kafka_acls.delete_acls,
    ApiKey.ALTER_CONFIGS: kafka_configs.alter_configs,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: kafka_configs.incremental_alter_configs,
    ApiKey.DESCRIBE_LOG_DIRS: kafka_logs.describe_log_dirs,
    ApiKey.DELETE_RECORDS: kafka_logs.delete_records,
    ApiKey.ALTER_REPLICA_LOG_DIRS: kafka_replicas.alter_replica_log_dirs,
    ApiKey.ELECT_LEADERS: kafka_replicas.elect_leaders,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: kafka_replicas.alter_partition_reassignments,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: kafka_replicas.list_partition_reassignments,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: kafka_scram.describe_user_scram_credentials,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: kafka_scram.alter_user_scram_credentials,
    ApiKey.PRODUCE: kafka_data.produce,
    ApiKey.FETCH: kafka_data.fetch,
    ApiKey.LIST_OFFSETS: kafka_data.list_offsets,
    ApiKey.INIT_PRODUCER_ID: kafka_data.init_producer_id,
    ApiKey.ADD_PARTITIONS_TO_TXN: kafka_txn.add_partitions_to_txn,
    ApiKey.ADD_OFFSETS_TO_TXN: kafka_txn.add_offsets_to_txn,
    ApiKey.END_TXN: kafka_txn.end_txn,
    ApiKey.TXN_OFFSET_COMMIT: kafka_txn.txn_offset_commit,
    ApiKey.FIND_COORDINATOR: kafka_groups.find_coordinator,
    ApiKey.JOIN_GROUP: kafka_groups.join_group,
    ApiKey.SYNC_GROUP: kafka_groups.sync_group,
    ApiKey.HEARTBEAT: kafka_groups.heartbeat,
    ApiKey.LEAVE_GROUP: kafka_groups.leave_group,
    ApiKey.OFFSET_COMMIT: kafka_groups.offset_commit,
    ApiKey.OFFSET_FETCH: kafka_groups.offset_fetch,
    ApiKey.DESCRIBE_GROUPS: kafka_groups.describe_groups,
    ApiKey.LIST_GROUPS: kafka_groups.list_groups,
    ApiKey.DELETE_GROUPS: kafka_groups.delete_groups,
}
_TXN_KEYS = (
    ApiKey.ADD_PARTITIONS_TO_TXN,
    ApiKey.ADD_OFFSETS_TO_TXN,
    ApiKey.END_TXN,
    ApiKey.TXN_OFFSET_COMMIT,
)
_BEFORE_AUTH = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})


class KafkaService:
    def __init__(
        self, router: Router, settings: KafkaSettings, *, users: UserStore | None = None
    ) -> None:
        self.router = router
        self.settings = settings
        self.users = users  # SCRAM's salts and keys (without it, SCRAM logins fail)
        self.versions = advertised(sasl=settings.sasl)
        if not router.supports(InitProducer):
            # Nothing on this backend deduplicates by producer id: Kafka's way of saying so is
            # not to offer InitProducerId (librdkafka: "idempotent producer not supported by
            # broker"; the Java client likewise), rather than grant an id that promises it.
            del self.versions[ApiKey.INIT_PRODUCER_ID]
        if not router.supports(InitTransaction):
            # No transactions on this backend (README): the transaction APIs are not offered,
            # and FindCoordinator / InitProducerId refuse a transactional id with Kafka's error.
            for key in _TXN_KEYS:
                del self.versions[key]
        if not router.supports(DeleteGroup):  # groups shared through a log cannot be deleted
            del self.versions[ApiKey.DELETE_GROUPS]
        if not router.supports(DeleteRecords):  # RabbitMQ Stream, Iggy: no log start to move
            del self.versions[ApiKey.DELETE_RECORDS]
        self.handlers = HANDLERS
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
        if conn.tls_principal is not None:
            # A verified client certificate is a login, as Kafka's SSL principal is: no SASL
            # handshake needed (a client that does one anyway becomes its SASL user).
            session.authenticated, session.user = True, conn.tls_principal
            conn.authenticated()
            conn.bind(user=conn.tls_principal)
        handlers = self.handlers
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
            with conn.request(api_name(req.api_key) or "unknown") as request:
                session.ctx = request.ctx
                # the SASL user, or None = anonymous (a listener without SASL)
                request.ctx.user = session.user or None
                response = await handlers[req.api_key](session, req)
                if isinstance(response, (bytes, Gather)):
                    await conn.send(response)
                elif response is not None:
                    await conn.send(codec.send(req, response))
            if session.close_after_response:
                return


__all__ = ["HANDLERS", "KafkaService", "KafkaSettings"]
