"""The configuration's values no type check catches (a bad log level, an fsync spec, ports out of
range, TLS sections that cannot work, login limits...), each refused in one line before anything
starts: ``check`` runs at the end of ``gateway.config.load``."""

from __future__ import annotations

from pathlib import Path

from gateway.config.schema import (
    ANONYMOUS_ACCESS,
    LOG_FORMATS,
    LOG_LEVELS,
    TLS_CLIENT_AUTH,
    TLS_PRINCIPALS,
    AuthConfig,
    Config,
    ConfigError,
    TlsConfig,
)


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


def check(config: Config) -> None:
    """Values no type check catches, refused in one line before anything starts."""
    for name in ("rog", "kafka", "iggy", "rabbitmq_stream"):
        _check_tls(f"listeners.{name}.tls", getattr(config.listeners, name).tls, config.workers)
    _check_tls("admin.tls", config.admin.tls, config.workers)
    if config.log.level.lower() not in LOG_LEVELS:
        raise ConfigError(f"log.level: one of {', '.join(LOG_LEVELS)}, not {config.log.level!r}")
    if config.log.format not in LOG_FORMATS:
        raise ConfigError(f"log.format: one of {', '.join(LOG_FORMATS)}, not {config.log.format!r}")
    _check_fsync(config.backend.fsync)
    if config.backend.max_open_files < 0:
        raise ConfigError(
            "backend.max_open_files: 0 (half of the file descriptor limit) or more,"
            f" not {config.backend.max_open_files}"
        )
    if config.listeners.kafka.node_id < 0:
        raise ConfigError(
            f"listeners.kafka.node_id: 0 or more, not {config.listeners.kafka.node_id}"
        )
    if config.limits.max_buffered_bytes < 0:
        raise ConfigError(
            "limits.max_buffered_bytes: 0 (no limit) or more,"
            f" not {config.limits.max_buffered_bytes}"
        )
    if config.limits.max_partitions_per_topic < 1:
        raise ConfigError(
            "limits.max_partitions_per_topic: must be 1 or more,"
            f" not {config.limits.max_partitions_per_topic}"
        )
    _check_ports(config)
    _check_login_limits(config.auth)
    if config.auth.anonymous not in ANONYMOUS_ACCESS:
        raise ConfigError(
            f"auth.anonymous: one of {', '.join(ANONYMOUS_ACCESS)}, not {config.auth.anonymous!r}"
        )
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
    for key in ("max_pending_logins", "login_failures", "peer_login_rate", "login_cache_s"):
        if getattr(auth, key) < 0:
            raise ConfigError(f"auth.{key}: must be 0 or more, not {getattr(auth, key)}")
    for key in ("login_failure_window_s", "login_backoff_s", "login_max_backoff_s"):
        if not getattr(auth, key) > 0:
            raise ConfigError(f"auth.{key}: must be more than 0, not {getattr(auth, key)}")
    if auth.peer_login_rate > 0 and auth.peer_login_burst < 1:
        raise ConfigError(f"auth.peer_login_burst: must be 1 or more, not {auth.peer_login_burst}")


__all__ = ["check"]
