"""System, client and login commands and their replies (iggy.md §5.1, §5.2, §9.2).

Field names follow the Iggy SDK; layouts are in ``body_system``.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "CacheMetrics",
    "ClientConsumerGroup",
    "ClientDetails",
    "ClientInfo",
    "Clients",
    "ClusterMetadata",
    "ClusterNode",
    "DescribeOptions",
    "GetClient",
    "GetClients",
    "GetClusterMetadata",
    "GetMe",
    "GetSnapshot",
    "GetStats",
    "IdentityInfo",
    "LoginRegister",
    "LoginRegisterResponse",
    "LoginRegisterWithPersonalAccessToken",
    "LoginUser",
    "LoginWithPersonalAccessToken",
    "LogoutUser",
    "OptionSpec",
    "OptionSpecs",
    "Ping",
    "RawReply",
    "Snapshot",
    "Stats",
    "UnknownCommand",
    "pack_protocol_version",
]


def pack_protocol_version(major: int, minor: int, patch: int) -> int:
    """§5.2: ``major<<20 | minor<<10 | patch``; 0.11.0 is 0x2C00."""
    return major << 20 | minor << 10 | patch


# --- requests ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Ping:
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class GetStats:
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class GetSnapshot:
    # Layout from the SDK (core/common get_snapshot.rs): not in iggy.md.
    compression: int
    snapshot_types: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class GetClusterMetadata:
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeOptions:
    scope: int  # 1 topic, 2 stream, 3 user


@dataclass(frozen=True, slots=True, kw_only=True)
class GetMe:
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class GetClient:
    client_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class GetClients:
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class LoginRegister:
    """VSR Register with a password (op 1, code 40, §5.2)."""

    protocol_version: int
    sdk_name: str
    sdk_version: str
    username: str
    password: str
    context: bytes = b""


@dataclass(frozen=True, slots=True, kw_only=True)
class LoginRegisterWithPersonalAccessToken:
    """VSR Register with a token (op 1, code 45, §5.2)."""

    protocol_version: int
    sdk_name: str
    sdk_version: str
    token: str
    context: bytes = b""


@dataclass(frozen=True, slots=True, kw_only=True)
class LoginUser:
    """Legacy login (code 38, §9.2/§9.3); ``version`` tells era A ("0.6.x") from B."""

    username: str
    password: str
    version: str = ""
    context: bytes = b""


@dataclass(frozen=True, slots=True, kw_only=True)
class LoginWithPersonalAccessToken:
    """Legacy token login (code 44)."""

    token: str


@dataclass(frozen=True, slots=True, kw_only=True)
class LogoutUser:
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class UnknownCommand:
    """A code this codec does not know (or that this framing does not carry): the listener
    answers it with ``Status.INVALID_COMMAND``, as the real server's parser does (§8). Sent as
    is by the client role, like the SDK's ``send_binary_request``."""

    code: int
    payload: bytes


# --- replies ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheMetrics:
    stream_id: int
    topic_id: int
    partition_id: int
    hits: int
    misses: int
    hit_ratio: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Stats:
    process_id: int
    cpu_usage: float
    total_cpu_usage: float
    memory_usage: int
    total_memory: int
    available_memory: int
    run_time: int
    start_time: int
    read_bytes: int
    written_bytes: int
    messages_size_bytes: int
    streams_count: int
    topics_count: int
    partitions_count: int
    segments_count: int
    messages_count: int
    clients_count: int
    consumer_groups_count: int
    hostname: str
    os_name: str
    os_version: str
    kernel_version: str
    iggy_server_version: str
    iggy_server_semver: int  # 0 = none
    cache_metrics: tuple[CacheMetrics, ...] = ()
    # Era C only (§5.1, verified against 0.9.0).
    threads_count: int = 0
    free_disk_space: int = 0
    total_disk_space: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Snapshot:
    data: bytes  # a zip archive


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterNode:
    name: str
    ip: str
    tcp_port: int
    quic_port: int
    http_port: int
    websocket_port: int
    role: int  # 0 Leader, 1 Follower
    status: int  # 0 Healthy, 1 Starting, 2 Stopping, 3 Unreachable, 4 Maintenance, 5 Unknown


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterMetadata:
    name: str
    nodes: tuple[ClusterNode, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class OptionSpec:
    key: str
    kind: int  # a HeaderKind
    default: bytes
    description: str


@dataclass(frozen=True, slots=True, kw_only=True)
class OptionSpecs:
    specs: tuple[OptionSpec, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientInfo:
    client_id: int
    user_id: int  # 0xFFFFFFFF = not logged in (SDK mapper)
    transport: int  # 1 tcp, 2 quic, 4 websocket
    address: str
    consumer_groups_count: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientConsumerGroup:
    stream_id: int
    topic_id: int
    group_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientDetails:
    """ClientInfo followed by exactly ``client.consumer_groups_count`` groups."""

    client: ClientInfo
    consumer_groups: tuple[ClientConsumerGroup, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Clients:
    clients: tuple[ClientInfo, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class LoginRegisterResponse:
    user_id: int
    session: int  # must be > 0 (§3.6)
    server_protocol_version: int
    server_version: str


@dataclass(frozen=True, slots=True, kw_only=True)
class IdentityInfo:
    """The legacy login reply (codes 38 and 44)."""

    user_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RawReply:
    """The body of an OK reply to an ``UnknownCommand``, undecoded."""

    payload: bytes
