"""The Kafka cluster as the backend sees it: bootstrap, API versions, brokers, topic metadata,
group coordinators, and being down (kafka.md §1, §6).

``run`` bootstraps (ApiVersions, then Metadata for the broker list) and, whenever a connection
cannot be opened, retries with exponential backoff (0.1 s doubling to 5 s). While the cluster is
down every request fails at once with ``BackendUnavailable`` instead of waiting on a dead
address; the first successful connection brings it back up.

Topic metadata (leaders, the topic id, its configs) is cached for ``metadata_max_age_s`` and
reloaded on demand: after this backend creates or deletes a topic, and whenever the broker
answers that a topic or leader is unknown.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

import structlog
import trio
from crc32c import crc32c
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from gateway.backends.base import Retries
from gateway.backends.kafka.conn import BrokerConnection, BrokerPool, open_connection
from gateway.backends.kafka.options import Options, parse_url
from gateway.backends.kafka.sasl import authenticate
from gateway.backends.watchdog import Watchdog
from gateway.model import (
    BackendUnavailable,
    GatewayError,
    TopicConfig,
    UnknownPartition,
    UnknownTopic,
    Unsupported,
)
from gateway.translate.kafka.errors import gateway_error
from gateway.translate.kafka.messages import topic_config
from protocols.kafka.build import build

log = structlog.get_logger("streamgate.backends.kafka")


class Api(NamedTuple):
    """An API the backend speaks, with the versions it is written for (kio has each schema)."""

    key: int
    low: int
    high: int
    name: str


PRODUCE: Final = Api(0, 3, 8, "Produce")
FETCH: Final = Api(1, 4, 11, "Fetch")
LIST_OFFSETS: Final = Api(2, 1, 7, "ListOffsets")
METADATA: Final = Api(3, 1, 12, "Metadata")
OFFSET_COMMIT: Final = Api(8, 2, 7, "OffsetCommit")
OFFSET_FETCH: Final = Api(9, 1, 7, "OffsetFetch")
FIND_COORDINATOR: Final = Api(10, 0, 3, "FindCoordinator")
JOIN_GROUP: Final = Api(11, 1, 7, "JoinGroup")
HEARTBEAT: Final = Api(12, 0, 4, "Heartbeat")
LEAVE_GROUP: Final = Api(13, 0, 4, "LeaveGroup")
SYNC_GROUP: Final = Api(14, 0, 5, "SyncGroup")
DESCRIBE_GROUPS: Final = Api(15, 0, 5, "DescribeGroups")
LIST_GROUPS: Final = Api(16, 0, 4, "ListGroups")
API_VERSIONS: Final = Api(18, 0, 0, "ApiVersions")
CREATE_TOPICS: Final = Api(19, 2, 4, "CreateTopics")
DELETE_TOPICS: Final = Api(20, 1, 5, "DeleteTopics")
DELETE_RECORDS: Final = Api(21, 0, 2, "DeleteRecords")
# v0/v1 answer error -1 on Tansu (kafka.md §5); v2 is v1 in the flexible encoding
INIT_PRODUCER_ID: Final = Api(22, 2, 4, "InitProducerId")
# Transactions (KIP-98), the client's versions: AddPartitionsToTxn v4+ is KIP-890's batched
# broker-to-broker form.
ADD_PARTITIONS_TO_TXN: Final = Api(24, 0, 3, "AddPartitionsToTxn")
ADD_OFFSETS_TO_TXN: Final = Api(25, 0, 3, "AddOffsetsToTxn")
END_TXN: Final = Api(26, 0, 3, "EndTxn")
TXN_OFFSET_COMMIT: Final = Api(28, 0, 3, "TxnOffsetCommit")
DESCRIBE_CONFIGS: Final = Api(32, 1, 4, "DescribeConfigs")
CREATE_PARTITIONS: Final = Api(37, 0, 3, "CreatePartitions")
DELETE_GROUPS: Final = Api(42, 0, 2, "DeleteGroups")
INCREMENTAL_ALTER_CONFIGS: Final = Api(44, 0, 1, "IncrementalAlterConfigs")
OFFSET_DELETE: Final = Api(47, 0, 0, "OffsetDelete")

TOPIC_RESOURCE: Final = 2
GROUP_KEY: Final = 0  # FindCoordinator key types
TXN_KEY: Final = 1
_BACKOFF_FIRST_S: Final = 0.1
_BACKOFF_MAX_S: Final = 5.0
# Metadata v8+ asks whether to compute ACL bitfields; the gateway never reads them.
_NO_AUTHORIZED_OPERATIONS: Final = {
    "include_cluster_authorized_operations": False,  # v8-v10
    "include_topic_authorized_operations": False,  # v8+
}


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicMeta:
    name: str
    id: int
    leaders: tuple[int, ...]  # partition i -> leader node id
    config: TopicConfig
    loaded_at: float

    def leader(self, partition: int) -> int:
        if not 0 <= partition < len(self.leaders):
            raise UnknownPartition(
                f"topic {self.name!r} has no partition {partition}", partitions=len(self.leaders)
            )
        return self.leaders[partition]


def topic_id(uuid_bytes: bytes | None, name: str) -> int:
    """A stable 31-bit id for the canonical model (Iggy speaks u32 ids): from the topic's UUID
    when the broker has one (Metadata v10+), else from its name."""
    return int(crc32c(uuid_bytes or name.encode())) & 0x7FFFFFFF


class Cluster:
    def __init__(self, bootstrap: Iterable[tuple[str, int]], options: Options) -> None:
        self.bootstrap = tuple(bootstrap)
        self.options = options
        if options.sasl is not None and options.sasl.mechanism == "PLAIN" and options.tls is None:
            log.warning("kafka backend: SASL PLAIN without TLS sends the password in clear")
        self.versions: dict[int, tuple[int, int]] = {}
        self.brokers: dict[int, tuple[str, int]] = {}
        self.controller = -1
        self._pools: dict[tuple[str, int], BrokerPool] = {}
        self._topics: dict[str, TopicMeta] = {}
        self._coordinators: dict[tuple[int, str], tuple[str, int]] = {}
        self._nursery: trio.Nursery | None = None
        self.watchdog = Watchdog()
        self._failure: str | None = "not started"
        self._backoff_s = 0.0
        self.retries = Retries()  # told of every reconnect attempt
        self._down_until = 0.0
        self._went_down = trio.Event()

    # --- lifecycle ------------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self.watchdog.run)
            try:
                with contextlib.suppress(GatewayError):
                    await self.connect()
                task_status.started()
                while True:  # reconnect in the background too, not only when asked
                    if self._failure is None:
                        await self._went_down.wait()
                        self._went_down = trio.Event()
                    await trio.sleep_until(self._down_until)
                    self.retries("reconnect")
                    with contextlib.suppress(GatewayError):
                        await self.connect()
            finally:
                for pool in self._pools.values():
                    pool.close("the backend is stopping")
                self._nursery = None
                nursery.cancel_scope.cancel()

    @property
    def failure(self) -> str | None:
        return self._failure

    async def connect(self) -> None:
        """Bootstrap: the first broker that answers gives the API versions and the brokers."""
        errors = []
        for host, port in self.bootstrap:
            try:
                conn = await self.pool((host, port)).shared()
                answer = await conn.request(
                    self._body(API_VERSIONS, 0, {}), timeout_s=self.options.request_timeout_s
                )
                self.versions = {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}
                await self.refresh_brokers(conn)
                self._failure, self._backoff_s = None, 0.0  # it answers, whatever failed before
                return
            except GatewayError as exc:
                errors.append(exc.message)
        raise BackendUnavailable("; ".join(errors) or "no bootstrap server")

    async def refresh_brokers(self, conn: BrokerConnection | None = None) -> None:
        answer = await self.request(
            METADATA, {"topics": [], **_NO_AUTHORIZED_OPERATIONS}, conn=conn
        )
        self.brokers = {b.node_id: (b.host, b.port) for b in answer.brokers}
        self.controller = answer.controller_id

    def pool(self, address: tuple[str, int]) -> BrokerPool:
        pool = self._pools.get(address)
        if pool is None:
            pool = self._pools[address] = BrokerPool(lambda: self._open(address))
        return pool

    async def _open(self, address: tuple[str, int]) -> BrokerConnection:
        now = trio.current_time()
        if self._failure is not None and now < self._down_until:
            raise BackendUnavailable(f"the Kafka cluster is unavailable: {self._failure}")
        if self._nursery is None:
            raise BackendUnavailable("the Kafka backend is not running")
        o = self.options
        try:
            conn = await open_connection(
                self._nursery, self.watchdog, *address, client_id=o.client_id,
                max_frame_bytes=o.max_frame_bytes, timeout_s=o.connect_timeout_s, tls=o.tls,
            )  # fmt: skip
            if o.sasl is not None:
                try:
                    await authenticate(conn, o.sasl, timeout_s=o.request_timeout_s)
                except GatewayError as exc:
                    conn.close("SASL login failed")
                    raise BackendUnavailable(exc.message) from None
        except BackendUnavailable as exc:
            if not self._backoff_s:  # up until now (or just started)
                log.warning("kafka cluster unavailable", error=exc.message)
                self._went_down.set()
            self._backoff_s = min(max(self._backoff_s * 2, _BACKOFF_FIRST_S), _BACKOFF_MAX_S)
            self._down_until = now + self._backoff_s
            self._failure = exc.message
            raise
        if self._failure is not None and self._backoff_s:
            log.info("kafka cluster reachable again", broker=f"{address[0]}:{address[1]}")
        self._failure = None
        self._backoff_s = 0.0
        return conn

    # --- requests -------------------------------------------------------------------------------

    def version(self, api: Api) -> int:
        low, high = self.versions.get(api.key, (0, -1))
        version = min(api.high, high)
        if version < max(api.low, low):
            raise Unsupported(
                f"the broker does not implement {api.name} (api {api.key}) in a version this "
                f"backend speaks ({api.low}-{api.high}; the broker offers {low}-{high})"
            )
        return version

    def _body(self, api: Api, version: int, values: Mapping[str, Any]) -> Any:
        return build(load_request_schema(api.key, version), values)

    async def node(self, node_id: int | None) -> BrokerPool:
        """The pool of a broker by node id; None = any (the first bootstrap server)."""
        if node_id is None:
            return self.pool(self.bootstrap[0])
        address = self.brokers.get(node_id)
        if address is None:
            await self.refresh_brokers()
            address = self.brokers.get(node_id)
            if address is None:
                raise BackendUnavailable(f"broker {node_id} is not in the cluster's metadata")
        return self.pool(address)

    async def request(
        self,
        api: Api,
        values: Mapping[str, Any],
        *,
        node: int | None = None,
        conn: BrokerConnection | None = None,
        extra_timeout_s: float = 0.0,
    ) -> Any:
        """One request in the highest common version, on ``conn`` or ``node``'s shared one."""
        if not self.versions:  # not bootstrapped yet (the cluster was down at start)
            await self.connect()
        if conn is None:
            conn = await (await self.node(node)).shared()
        body = self._body(api, self.version(api), values)
        return await conn.request(body, timeout_s=self.options.request_timeout_s + extra_timeout_s)

    async def request_alone(self, api: Api, values: Mapping[str, Any], *, node: int | None) -> Any:
        """A request that some brokers answer by dropping the connection (Tansu panics on
        DeleteRecords, kafka.md §5): on a connection of its own, so nothing else is lost, and a
        drop while the broker still answers others means the broker cannot do it."""
        pool = await self.node(node)
        async with pool.lease() as conn:
            try:
                return await self.request(api, values, conn=conn)
            except BackendUnavailable as exc:
                await self.request(API_VERSIONS, {}, node=node)  # still up? else propagate
                raise Unsupported(f"the broker dropped the connection on {api.name}") from exc

    # --- topic metadata -------------------------------------------------------------------------

    def forget(self, name: str | None = None) -> None:
        if name is None:
            self._topics.clear()
        else:
            self._topics.pop(name, None)

    async def topic(self, name: str, *, fresh: bool = False) -> TopicMeta:
        meta = self._topics.get(name)
        age = self.options.metadata_max_age_s
        if meta is None or fresh or trio.current_time() - meta.loaded_at > age:
            loaded = await self.load_topics([name])
            meta = loaded.get(name)
            if meta is None:
                raise UnknownTopic(f"topic {name!r} does not exist")
        return meta

    async def partition(self, name: str, partition: int) -> tuple[TopicMeta, int]:
        """The topic and the leader of one partition."""
        meta = await self.topic(name)
        return meta, meta.leader(partition)

    async def load_topics(self, names: list[str] | None) -> dict[str, TopicMeta]:
        """Metadata (and configs) of ``names``, or of every non-internal topic for None."""
        wanted = None if names is None else [{"name": n, "topic_id": None} for n in names]
        answer = await self.request(
            METADATA,
            {"topics": wanted, "allow_auto_topic_creation": False, **_NO_AUTHORIZED_OPERATIONS},
        )
        self.brokers = {b.node_id: (b.host, b.port) for b in answer.brokers}
        found: dict[str, tuple[int, tuple[int, ...]]] = {}
        for t in answer.topics:
            if t.error_code is ErrorCode.unknown_topic_or_partition or t.is_internal:
                continue
            if t.error_code is not ErrorCode.none:
                if names is None:  # listing: a topic in trouble (being created...) is left out
                    continue
                raise gateway_error(t.error_code, f"metadata of topic {t.name!r}")
            by_index = {p.partition_index: p.leader_id for p in t.partitions}
            uuid = getattr(t, "topic_id", None)
            found[t.name] = (
                topic_id(None if uuid is None or uuid.int == 0 else uuid.bytes, t.name),
                tuple(by_index.get(i, -1) for i in range(len(by_index))),
            )
        configs = await self._configs(list(found))
        now = trio.current_time()
        for name in names or ():
            self._topics.pop(name, None)
        metas = {}
        for name, (tid, leaders) in found.items():
            metas[name] = self._topics[name] = TopicMeta(
                name=name, id=tid, leaders=leaders, config=configs.get(name, TopicConfig()),
                loaded_at=now,
            )  # fmt: skip
        return metas

    async def _configs(self, names: list[str]) -> dict[str, TopicConfig]:
        if not names:
            return {}
        answer = await self.request(
            DESCRIBE_CONFIGS,
            {"resources": [{"resource_type": TOPIC_RESOURCE, "resource_name": n,
                            "configuration_keys": None} for n in names]},
        )  # fmt: skip
        out = {}
        for r in answer.results:
            if r.error_code is ErrorCode.none:
                out[r.resource_name] = topic_config((c.name, c.value) for c in r.configs)
        return out

    # --- coordinators ---------------------------------------------------------------------------

    async def coordinator_pool(self, key: str, key_type: int = GROUP_KEY) -> BrokerPool:
        """The connections of the coordinator of a group (``GROUP_KEY``) or of a transactional
        id (``TXN_KEY``): FindCoordinator, cached until ``forget_coordinator``."""
        address = self._coordinators.get((key_type, key))
        if address is None:
            answer = await self.request(FIND_COORDINATOR, {"key": key, "key_type": key_type})
            if answer.error_code is not ErrorCode.none:
                raise gateway_error(answer.error_code, getattr(answer, "error_message", None))
            address = self._coordinators[key_type, key] = (answer.host, answer.port)
        return self.pool(address)

    async def coordinator(self, key: str, key_type: int = GROUP_KEY) -> BrokerConnection:
        return await (await self.coordinator_pool(key, key_type)).shared()

    def forget_coordinator(self, key: str, key_type: int = GROUP_KEY) -> None:
        self._coordinators.pop((key_type, key), None)


__all__ = [
    "ADD_OFFSETS_TO_TXN",
    "ADD_PARTITIONS_TO_TXN",
    "CREATE_PARTITIONS",
    "CREATE_TOPICS",
    "DELETE_GROUPS",
    "DELETE_RECORDS",
    "DELETE_TOPICS",
    "DESCRIBE_CONFIGS",
    "DESCRIBE_GROUPS",
    "END_TXN",
    "FETCH",
    "GROUP_KEY",
    "HEARTBEAT",
    "INCREMENTAL_ALTER_CONFIGS",
    "INIT_PRODUCER_ID",
    "JOIN_GROUP",
    "LEAVE_GROUP",
    "LIST_GROUPS",
    "LIST_OFFSETS",
    "METADATA",
    "OFFSET_COMMIT",
    "OFFSET_DELETE",
    "OFFSET_FETCH",
    "PRODUCE",
    "SYNC_GROUP",
    "TOPIC_RESOURCE",
    "TXN_KEY",
    "TXN_OFFSET_COMMIT",
    "Api",
    "Cluster",
    "Options",
    "TopicMeta",
    "parse_url",
    "topic_id",
]
