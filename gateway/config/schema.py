"""The configuration's shape: one dataclass per section, with its defaults (gateway.config reads
the file, the environment and the flags into it; gateway.config.checks refuses what no type
check catches)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


class ConfigError(ValueError):
    pass


TLS_CLIENT_AUTH = ("none", "optional", "required")
TLS_PRINCIPALS = ("cn", "san")
ANONYMOUS_ACCESS = ("auto", "none", "read", "write", "manage")
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
LOG_FORMATS = ("auto", "console", "json")


@dataclass(slots=True)
class TlsConfig:
    """TLS on a listener or the admin port (gateway/tls.py). Minimum TLS 1.2."""

    enabled: bool = False
    cert_file: str = ""  # PEM: the server's certificate chain
    key_file: str = ""  # PEM: its private key
    ca_file: str = ""  # PEM: the CAs client certificates must chain to (client_auth)
    client_auth: str = "none"  # none | optional | required
    # Who a client certificate names (the user on the connection): its subject CN, or its first
    # subjectAltName of type DNS or email.
    principal: str = "cn"
    # -1 = TLS only, on the listener's own port; else plaintext stays on ``port`` and TLS is
    # served on this one too (0 = any free port), as a Kafka broker's listener map allows.
    port: int = -1
    # What discovery answers carry to clients of the TLS port when it runs beside the plaintext
    # one; 0 = the port the client connected to.
    advertised_port: int = 0
    handshake_timeout_s: float = 10.0


@dataclass(slots=True)
class ListenerConfig:
    enabled: bool = True
    host: str = ""  # "" = the top-level host
    port: int = 0
    tls: TlsConfig = field(default_factory=TlsConfig)


@dataclass(slots=True)
class KafkaListenerConfig(ListenerConfig):
    port: int = 9092
    stream: str = "default"  # the namespace this listener's topics live in (DESIGN.md §3)
    # What Metadata/FindCoordinator answer; "" / 0 = the address the client connected to.
    advertised_host: str = ""
    advertised_port: int = 0
    # require SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512; the user store's users) before any other
    # request
    sasl: bool = False
    auto_create_topics: bool = True  # Kafka's auto.create.topics.enable
    default_partitions: int = 1  # Kafka's num.partitions
    node_id: int = 1  # Kafka's node.id: the broker id Metadata/FindCoordinator answer with


@dataclass(slots=True)
class IggyListenerConfig(ListenerConfig):
    port: int = 8090
    # What GetClusterMetadata answers; "" / 0 = the address the client connected to.
    advertised_host: str = ""
    advertised_port: int = 0


@dataclass(slots=True)
class RabbitStreamListenerConfig(ListenerConfig):
    port: int = 5552
    # What Open and Metadata answer (clients connect to it); "" / 0 = where the client connected.
    advertised_host: str = ""
    advertised_port: int = 0
    frame_max: int = 1_048_576  # proposed in Tune (the client may take less)
    heartbeat: int = 60  # seconds, proposed in Tune (0 = none)
    # RabbitMQ's default user, created in the user store when missing ("" = none); like RabbitMQ
    # it may only log in from loopback unless default_user_loopback_only is false.
    default_user: str = "guest"
    default_password: str = "guest"
    default_password_file: str = ""  # read default_password from this file instead
    default_user_loopback_only: bool = True


@dataclass(slots=True)
class ListenersConfig:
    rog: ListenerConfig = field(default_factory=lambda: ListenerConfig(port=7878))
    kafka: KafkaListenerConfig = field(default_factory=KafkaListenerConfig)
    iggy: IggyListenerConfig = field(default_factory=IggyListenerConfig)
    rabbitmq_stream: RabbitStreamListenerConfig = field(default_factory=RabbitStreamListenerConfig)


@dataclass(slots=True)
class GroupsConfig:
    # Kafka's group.initial.rebalance.delay.ms: a new group waits this long for more members.
    initial_rebalance_delay_ms: int = 3000
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000


@dataclass(slots=True)
class AuthConfig:
    users: str = ""  # "name:password,name2:password2": users made or reset on start
    # The gateway's root user (Iggy's default root; any listener that authenticates accepts it).
    root_username: str = "iggy"
    root_password: str = "iggy"
    # Passwords kept out of argv: root_password read from this file (its text, less one trailing
    # newline), and more users from a file of "name:password" lines ("#" comments); the
    # environment works too (STREAMGATE_AUTH_ROOT_PASSWORD, STREAMGATE_AUTH_USERS).
    root_password_file: str = ""
    users_password_file: str = ""
    # Where users, permissions and tokens are kept: "" = users.json in the embedded backend's
    # data directory (in memory for other backends), "none" = in memory, else a file path.
    users_file: str = ""
    # What a connection that did not authenticate (Rog always; Kafka without SASL) may do, as
    # the user "anonymous": none | read | write | manage (every stream), or "auto": everything
    # while no listener requires authentication, nothing once one does (gateway/authorization.py).
    anonymous: str = "auto"
    # Login floods (gateway/coordination/login_guard.py). Password hashes (scrypt, ~16 MiB each)
    # run on hash_threads threads of their own; max_pending_logins more logins wait, the next is
    # refused at once as a transient failure.
    hash_threads: int = 2
    max_pending_logins: int = 64
    # After login_failures failed logins from one address, or for one username, each within
    # login_failure_window_s of the one before, the next are refused without hashing for
    # login_backoff_s, doubled for every further failure up to login_max_backoff_s; a success
    # resets (0 failures = no backoff).
    login_failures: int = 5
    # Also per username, from any address (stops a brute force spread over addresses, but lets
    # anyone lock a user out by failing on purpose): off unless asked.
    user_login_backoff: bool = False
    login_failure_window_s: float = 60.0
    login_backoff_s: float = 1.0
    login_max_backoff_s: float = 60.0
    # Logins a second per client address, failed or not, with bursts of peer_login_burst
    # (0 = no limit); addresses and usernames tracked at most login_tracked each (LRU).
    peer_login_rate: float = 10.0
    peer_login_burst: int = 50
    login_tracked: int = 10_000
    # A password login that succeeded is remembered this long (in memory, as an HMAC of name and
    # password under a key of the process), so a client connecting again with the same
    # credentials costs no scrypt hash; a changed password never matches it. 0 = hash every time.
    login_cache_s: float = 300.0

    def user_map(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for item in filter(None, (x.strip() for x in self.users.split(","))):
            name, sep, password = item.partition(":")
            if not sep or not name:
                raise ConfigError(f"auth.users: expected name:password, got {item!r}")
            out[name] = password
        if self.users_password_file:
            text = read_secret_file(self.users_password_file, "auth.users_password_file")
            for number, line in enumerate(text.splitlines(), 1):
                if not line.strip() or line.lstrip().startswith("#"):
                    continue
                # the password is the rest of the line: it may hold "," and ":"
                name, sep, password = line.partition(":")
                if not sep or not name.strip():
                    raise ConfigError(  # the line itself may hold a password: not shown
                        f"auth.users_password_file: line {number} is not name:password"
                    )
                out[name.strip()] = password
        return out


@dataclass(slots=True)
class BackendConfig:
    url: str = "embedded:./data"
    # embedded: always | interval:<ms> | never (see gateway/backends/embedded/fsync.py)
    fsync: str = "interval:1000"
    segment_bytes: int = 64 << 20
    retention_ms: int = -1  # -1 = keep for ever (topics may set their own)
    retention_bytes: int = -1
    max_message_bytes: int = 16 << 20
    # embedded: segment files kept open at once, least recently used closed first (they reopen
    # on use); 0 = half of the soft RLIMIT_NOFILE (gateway/backends/embedded/fd_cache.py)
    max_open_files: int = 0


@dataclass(slots=True)
class AdminConfig:
    enabled: bool = True
    host: str = ""
    port: int = 9464
    tls: TlsConfig = field(default_factory=TlsConfig)  # advertised_port unused here


@dataclass(slots=True)
class LimitsConfig:
    max_frame_bytes: int = 64 << 20
    max_connections: int = 4096
    idle_timeout_s: float = 600.0
    drain_timeout_s: float = 10.0
    max_preauth_frame_bytes: int = 64 << 10  # until the login; 0 = max_frame_bytes
    auth_timeout_s: float = 10.0  # to log in, on listeners that authenticate; 0 = none
    request_timeout_s: float = 30.0  # from a frame's first byte to its last; 0 = none
    # of frames still arriving, all connections together; 0 = no limit (listeners/connection.py)
    max_buffered_bytes: int = 512 << 20
    # Partitions one topic may have, asked by any protocol (CreateTopic, CreatePartitions): each
    # is a directory and files on the embedded backend. Iggy listeners also keep Iggy's 1000.
    max_partitions_per_topic: int = 1000


@dataclass(slots=True)
class LogConfig:
    level: str = "info"
    format: str = "auto"  # auto | console | json


@dataclass(slots=True)
class AccessLogConfig:
    # One JSON line per command (gateway/access_log.py has the schema); "" = off. Under
    # ``--workers`` each worker writes its own file (``access.jsonl`` -> ``access.worker0.jsonl``).
    path: str = ""
    # When the next line would take the file past max_bytes it becomes path.1 (path.1 -> path.2
    # ...) and a new one begins; 0 = never rotate. backups = how many rotated files are kept.
    max_bytes: int = 100 << 20
    backups: int = 5


@dataclass(slots=True)
class MetricsConfig:
    # Opt-in label sets, so that what an operator did not ask for never becomes a series: shell
    # patterns (fnmatch, case-sensitive). A topic pattern with a "/" matches "stream/topic", one
    # without matches the topic's name in any stream. Lists in TOML; comma-separated in
    # STREAMGATE_METRICS_* and --set.
    # streamgate_consumer_group_lag{group,stream,topic}: groups x topics sampled every
    # lag_interval_s (a group whose name begins with "__" is the gateway's own bookkeeping and
    # matches only a pattern that begins with "__" too).
    lag_groups: tuple[str, ...] = ()
    lag_topics: tuple[str, ...] = ()
    lag_interval_s: float = 15.0
    # streamgate_topic_{messages,bytes}_{in,out}_total{stream,topic}
    topic_patterns: tuple[str, ...] = ()


@dataclass(slots=True)
class Config:
    host: str = "127.0.0.1"  # where listeners bind unless they say otherwise
    advertised_host: str = ""  # what discovery answers carry; "" = the bind host
    # Processes serving every listener port (SO_REUSEPORT), /metrics summed over them; on the
    # embedded backend they reach the store through one owner process (gateway.supervisor).
    workers: int = 1
    reuse_port: bool = False  # bind listeners with SO_REUSEPORT (set for each worker)
    # Set by the supervisor for the store owner of ``--workers`` on the embedded backend: serve
    # the store on this unix socket to the workers, and no listener (gateway.store_owner).
    store_socket: str = ""
    backend: BackendConfig = field(default_factory=BackendConfig)
    listeners: ListenersConfig = field(default_factory=ListenersConfig)
    admin: AdminConfig = field(default_factory=AdminConfig)
    limits: LimitsConfig = field(default_factory=LimitsConfig)
    groups: GroupsConfig = field(default_factory=GroupsConfig)
    auth: AuthConfig = field(default_factory=AuthConfig)
    log: LogConfig = field(default_factory=LogConfig)
    access_log: AccessLogConfig = field(default_factory=AccessLogConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)

    def listener_host(self, listener: ListenerConfig) -> str:
        return listener.host or self.host


def read_secret_file(path: str, key: str) -> str:
    """A password kept in a file (a Kubernetes secret, a Docker secret): its text without the
    trailing newline."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{key}: cannot read {path}: {exc}") from None
    return text.removesuffix("\n").removesuffix("\r")
