"""Configuration: defaults, then one TOML file, then ``STREAMGATE_*`` env vars, then flags.

Every key has a dotted name (``backend.url``, ``listeners.rog.port``); its env var is
``STREAMGATE_`` + the name upper-cased with dots as underscores (``STREAMGATE_BACKEND_URL``,
``STREAMGATE_LISTENERS_ROG_PORT``), and ``--set listeners.rog.port=7879`` sets it from the
command line. Unknown keys are errors, so a typo never silently falls back to a default.
"""

from __future__ import annotations

import dataclasses
import tomllib
import types
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class ConfigError(ValueError):
    pass


TLS_CLIENT_AUTH = ("none", "optional", "required")
TLS_PRINCIPALS = ("cn", "san")


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


ANONYMOUS_ACCESS = ("auto", "none", "read", "write", "manage")
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
LOG_FORMATS = ("auto", "console", "json")


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


def read_secret_file(path: str, key: str) -> str:
    """A password kept in a file (a Kubernetes secret, a Docker secret): its text without the
    trailing newline."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{key}: cannot read {path}: {exc}") from None
    return text.removesuffix("\n").removesuffix("\r")


def _read_password_files(config: Config) -> None:
    """``*_password_file`` settings win over the password given inline."""
    auth = config.auth
    if auth.root_password_file:
        auth.root_password = read_secret_file(auth.root_password_file, "auth.root_password_file")
    rabbit = config.listeners.rabbitmq_stream
    if rabbit.default_password_file:
        rabbit.default_password = read_secret_file(
            rabbit.default_password_file, "listeners.rabbitmq_stream.default_password_file"
        )
    auth.user_map()  # a malformed users file stops the start here


@dataclass(slots=True)
class BackendConfig:
    url: str = "embedded:./data"
    # embedded: always | interval:<ms> | never (see gateway/backends/embedded/fsync.py)
    fsync: str = "interval:1000"
    segment_bytes: int = 64 << 20
    retention_ms: int = -1  # -1 = keep for ever (topics may set their own)
    retention_bytes: int = -1
    max_message_bytes: int = 16 << 20


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
    # Processes serving every listener port (SO_REUSEPORT), /metrics summed over them; more than
    # one only on a backend whose broker holds what must be shared (gateway.supervisor).
    workers: int = 1
    reuse_port: bool = False  # bind listeners with SO_REUSEPORT (set for each worker)
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


def _leaves(obj: Any, prefix: str = "") -> Iterator[tuple[str, Any, Any, str]]:
    """(dotted key, owner object, type, attribute) for every scalar setting."""
    hints = typing.get_type_hints(type(obj))
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        key = f"{prefix}{f.name}"
        if dataclasses.is_dataclass(value):
            yield from _leaves(value, key + ".")
        else:
            yield key, obj, hints[f.name], f.name


def keys() -> list[str]:
    return [k for k, *_ in _leaves(Config())]


def _names(key: str, raw: Any) -> tuple[str, ...]:
    """A list of names: a TOML array of strings, or "a,b" from the environment or --set."""
    if isinstance(raw, str):
        return tuple(x.strip() for x in raw.split(",") if x.strip())
    if isinstance(raw, list | tuple) and all(isinstance(x, str) for x in raw):
        return tuple(raw)
    raise ConfigError(f"{key}: expected a list of strings, got {raw!r}")


def _coerce(key: str, typ: Any, raw: Any) -> Any:
    if typing.get_origin(typ) is tuple:
        return _names(key, raw)
    if isinstance(typ, types.UnionType):
        typ = next(t for t in typing.get_args(typ) if t is not type(None))
    if typ is bool:
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and raw.lower() in ("1", "true", "yes", "on"):
            return True
        if isinstance(raw, str) and raw.lower() in ("0", "false", "no", "off"):
            return False
    elif typ is int:
        if isinstance(raw, int) and not isinstance(raw, bool):
            return raw
        if isinstance(raw, str):
            try:
                return int(raw.replace("_", ""), 0)
            except ValueError:
                pass
    elif typ is float:
        if isinstance(raw, int | float) and not isinstance(raw, bool):
            return float(raw)
        if isinstance(raw, str):
            try:
                return float(raw)
            except ValueError:
                pass
    elif typ is str and isinstance(raw, str):
        return raw
    raise ConfigError(f"{key}: expected {getattr(typ, '__name__', typ)}, got {raw!r}")


def _flatten(table: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for k, v in table.items():
        if isinstance(v, Mapping):
            yield from _flatten(v, f"{prefix}{k}.")
        else:
            yield f"{prefix}{k}", v


def apply(config: Config, values: Mapping[str, Any], source: str) -> None:
    slots = {k: (owner, typ, attr) for k, owner, typ, attr in _leaves(config)}
    for key, raw in values.items():
        if key not in slots:
            raise ConfigError(f"{source}: unknown setting {key!r}")
        owner, typ, attr = slots[key]
        setattr(owner, attr, _coerce(f"{source}: {key}", typ, raw))


# Environment variables of the commands, not settings: the config file's path, and the login
# password of ``streamgate users --url`` (gateway/client/users.py).
_NOT_SETTINGS = frozenset({"STREAMGATE_CONFIG", "STREAMGATE_LOGIN_PASSWORD"})


def env_name(key: str) -> str:
    return "STREAMGATE_" + key.replace(".", "_").upper()


def load(
    path: str | Path | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Config:
    config = Config()
    if path is not None:
        try:
            with open(path, "rb") as f:
                table = tomllib.load(f)
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"{path}: {exc}") from exc
        apply(config, dict(_flatten(table)), str(path))
    if environ is not None:
        known = {env_name(k): k for k in keys()}
        apply(
            config,
            {known[name]: v for name, v in environ.items() if name in known},
            "environment",
        )
        stray = sorted(
            n for n in environ if n.startswith("STREAMGATE_") and n not in known
            and n not in _NOT_SETTINGS
        )  # fmt: skip
        if stray:
            raise ConfigError(f"environment: unknown setting(s) {', '.join(stray)}")
    if overrides:
        apply(config, overrides, "command line")
    _read_password_files(config)
    _check(config)
    return config


def _check_tls(name: str, tls: TlsConfig, workers: int) -> None:
    if tls.client_auth not in TLS_CLIENT_AUTH:
        raise ConfigError(
            f"{name}.client_auth: none, optional or required, not {tls.client_auth!r}"
        )
    if tls.principal not in TLS_PRINCIPALS:
        raise ConfigError(f"{name}.principal: cn or san, not {tls.principal!r}")
    if not tls.enabled:
        return
    if not tls.cert_file or not tls.key_file:
        raise ConfigError(f"{name}.enabled needs {name}.cert_file and {name}.key_file")
    if tls.client_auth != "none" and not tls.ca_file:
        raise ConfigError(f"{name}.client_auth={tls.client_auth} needs {name}.ca_file")
    if not tls.handshake_timeout_s > 0:
        raise ConfigError(f"{name}.handshake_timeout_s: must be more than 0")
    if workers > 1 and tls.port == 0:
        # Each worker would bind a port of its own: the TLS port must be the same for all.
        raise ConfigError(f"{name}.port: --workers needs a fixed TLS port, not 0")


def _check(config: Config) -> None:
    """Values no type check catches, refused in one line before anything starts."""
    for name in ("rog", "kafka", "iggy", "rabbitmq_stream"):
        _check_tls(f"listeners.{name}.tls", getattr(config.listeners, name).tls, config.workers)
    _check_tls("admin.tls", config.admin.tls, config.workers)
    if config.log.level.lower() not in LOG_LEVELS:
        raise ConfigError(f"log.level: one of {', '.join(LOG_LEVELS)}, not {config.log.level!r}")
    if config.log.format not in LOG_FORMATS:
        raise ConfigError(f"log.format: one of {', '.join(LOG_FORMATS)}, not {config.log.format!r}")
    _check_fsync(config.backend.fsync)
    _check_ports(config)
    _check_login_limits(config.auth)
    if config.auth.anonymous not in ANONYMOUS_ACCESS:
        raise ConfigError(
            f"auth.anonymous: one of {', '.join(ANONYMOUS_ACCESS)}, not {config.auth.anonymous!r}"
        )
    if config.workers > 1 and config.admin.tls.enabled:
        raise ConfigError("admin.tls: not served by the --workers supervisor yet")
    a = config.access_log
    if a.max_bytes < 0:
        raise ConfigError(
            f"access_log.max_bytes: must be 0 (never rotate) or more, not {a.max_bytes}"
        )
    if a.backups < 0:
        raise ConfigError(f"access_log.backups: must be 0 or more, not {a.backups}")
    if a.path and (a.path.endswith("/") or Path(a.path).is_dir()):
        raise ConfigError(f"access_log.path: {a.path!r} is a directory, not a file to write")
    m = config.metrics
    if not m.lag_interval_s > 0:
        raise ConfigError(f"metrics.lag_interval_s: must be more than 0, not {m.lag_interval_s}")
    if bool(m.lag_groups) != bool(m.lag_topics):
        given, missing = (
            ("lag_groups", "lag_topics") if m.lag_groups else ("lag_topics", "lag_groups")
        )
        raise ConfigError(
            f"metrics.{given} is set but metrics.{missing} is not: lag is sampled for the groups"
            ' AND topics they match ("*" for every one)'
        )


def _check_ports(config: Config) -> None:
    # The kernel would take 99999 as 34463 (it keeps 16 bits): a typo must not bind elsewhere.
    ports: list[tuple[str, int, int]] = [("admin.port", config.admin.port, 0),
                                         ("admin.tls.port", config.admin.tls.port, -1)]  # fmt: skip
    for name in ("rog", "kafka", "iggy", "rabbitmq_stream"):
        listener = getattr(config.listeners, name)
        ports += [(f"listeners.{name}.port", listener.port, 0),
                  (f"listeners.{name}.tls.port", listener.tls.port, -1)]  # fmt: skip
    for key, port, lowest in ports:
        if not lowest <= port <= 65535:
            also = "-1 (TLS on the listener's own port) or " if lowest < 0 else ""
            raise ConfigError(f"{key}: {also}0 to 65535, not {port}")


def _check_fsync(spec: str) -> None:
    # The embedded store's own parser, so that the two never disagree; refused here, before
    # anything starts, whatever the backend (a typo is one still).
    from gateway.backends.embedded.fsync import FsyncPolicy
    from gateway.model import InvalidRequest

    try:
        FsyncPolicy.parse(spec)
    except InvalidRequest as exc:
        raise ConfigError(f"backend.fsync: {exc.message}") from None


def _check_login_limits(auth: AuthConfig) -> None:
    for key in ("hash_threads", "login_tracked"):
        if getattr(auth, key) < 1:
            raise ConfigError(f"auth.{key}: must be 1 or more, not {getattr(auth, key)}")
    for key in ("max_pending_logins", "login_failures", "peer_login_rate"):
        if getattr(auth, key) < 0:
            raise ConfigError(f"auth.{key}: must be 0 or more, not {getattr(auth, key)}")
    for key in ("login_failure_window_s", "login_backoff_s", "login_max_backoff_s"):
        if not getattr(auth, key) > 0:
            raise ConfigError(f"auth.{key}: must be more than 0, not {getattr(auth, key)}")
    if auth.peer_login_rate > 0 and auth.peer_login_burst < 1:
        raise ConfigError(f"auth.peer_login_burst: must be 1 or more, not {auth.peer_login_burst}")


def parse_assignment(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise ConfigError(f"--set expects key=value, got {text!r}")
    return key.strip(), value.strip()
