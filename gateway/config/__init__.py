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
from pathlib import Path
from typing import Any

from gateway.config.checks import check
from gateway.config.schema import (
    ANONYMOUS_ACCESS,
    LOG_FORMATS,
    LOG_LEVELS,
    TLS_CLIENT_AUTH,
    TLS_PRINCIPALS,
    AccessLogConfig,
    AdminConfig,
    AuthConfig,
    BackendConfig,
    Config,
    ConfigError,
    GroupsConfig,
    IggyListenerConfig,
    KafkaListenerConfig,
    LimitsConfig,
    ListenerConfig,
    ListenersConfig,
    LogConfig,
    MetricsConfig,
    RabbitStreamListenerConfig,
    TlsConfig,
    read_secret_file,
)


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


# Environment variables of the commands, not settings: the config file's path, the login
# password of ``streamgate users --url`` (gateway/client/users.py), and the Kafka backend's SASL
# password (gateway/backends/kafka/sasl.py).
_NOT_SETTINGS = frozenset(
    {"STREAMGATE_CONFIG", "STREAMGATE_LOGIN_PASSWORD", "STREAMGATE_BACKEND_PASSWORD"}
)


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
    check(config)
    return config


def parse_assignment(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise ConfigError(f"--set expects key=value, got {text!r}")
    return key.strip(), value.strip()


__all__ = [
    "ANONYMOUS_ACCESS",
    "LOG_FORMATS",
    "LOG_LEVELS",
    "TLS_CLIENT_AUTH",
    "TLS_PRINCIPALS",
    "AccessLogConfig",
    "AdminConfig",
    "AuthConfig",
    "BackendConfig",
    "Config",
    "ConfigError",
    "GroupsConfig",
    "IggyListenerConfig",
    "KafkaListenerConfig",
    "LimitsConfig",
    "ListenerConfig",
    "ListenersConfig",
    "LogConfig",
    "MetricsConfig",
    "RabbitStreamListenerConfig",
    "TlsConfig",
    "apply",
    "env_name",
    "keys",
    "load",
    "parse_assignment",
    "read_secret_file",
]
