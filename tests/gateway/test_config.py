"""Config precedence (defaults < TOML < env < flags) and refusal of unknown or bad settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.config import ConfigError, env_name, keys, load


def test_defaults_are_the_protocols_own_ports() -> None:
    c = load()
    assert c.listeners.rog.port == 7878
    assert c.admin.port == 9464
    assert c.backend.url == "embedded:./data"


def test_precedence(tmp_path: Path) -> None:
    f = tmp_path / "sg.toml"
    f.write_text('host = "0.0.0.0"\n[backend]\nfsync = "always"\n[listeners.rog]\nport = 1\n')
    c = load(f)
    assert (c.host, c.backend.fsync, c.listeners.rog.port) == ("0.0.0.0", "always", 1)
    c = load(f, environ={"STREAMGATE_LISTENERS_ROG_PORT": "2", "PATH": "/bin"})
    assert c.listeners.rog.port == 2 and c.backend.fsync == "always"
    c = load(f, environ={"STREAMGATE_LISTENERS_ROG_PORT": "2"},
             overrides={"listeners.rog.port": "3"})  # fmt: skip
    assert c.listeners.rog.port == 3


def test_every_key_has_an_env_name() -> None:
    assert env_name("backend.url") == "STREAMGATE_BACKEND_URL"
    assert len({env_name(k) for k in keys()}) == len(keys())


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ("[backend]\nurll = 'x'\n", "unknown setting 'backend.urll'"),
        ("[listeners.rog]\nport = 'x'\n", "expected int"),
        ("[limits\n", "sg.toml"),
    ],
)
def test_bad_files_are_refused(tmp_path: Path, toml: str, message: str) -> None:
    f = tmp_path / "sg.toml"
    f.write_text(toml)
    with pytest.raises(ConfigError, match=message):
        load(f)


def test_unknown_env_var_is_refused() -> None:
    with pytest.raises(ConfigError, match="STREAMGATE_ROGPORT"):
        load(environ={"STREAMGATE_ROGPORT": "1"})


def test_the_access_log_is_off_by_default_and_set_like_any_key(tmp_path: Path) -> None:
    assert load().access_log.path == ""
    f = tmp_path / "sg.toml"
    f.write_text('[access_log]\npath = "a.jsonl"\nmax_bytes = 1000\n')
    c = load(f, environ={"STREAMGATE_ACCESS_LOG_BACKUPS": "2"},
             overrides={"access_log.path": "b.jsonl"})  # fmt: skip
    assert (c.access_log.path, c.access_log.max_bytes, c.access_log.backups) == ("b.jsonl", 1000, 2)
    c = load(environ={"STREAMGATE_ACCESS_LOG_PATH": "c.jsonl"})
    assert c.access_log.path == "c.jsonl"


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        (
            "access_log.max_bytes",
            "-1",
            r"^access_log.max_bytes: must be 0 \(never rotate\) or more",
        ),
        ("access_log.backups", "-2", r"^access_log.backups: must be 0 or more, not -2$"),
        ("access_log.max_bytes", "lots", r"^command line: access_log.max_bytes: expected int"),
        (
            "access_log.path",
            "{tmp}",
            r"^access_log.path: '.*' is a directory, not a file to write$",
        ),
        ("access_log.path", "logs/", r"^access_log.path: 'logs/' is a directory"),
    ],
)
def test_bad_access_log_settings_are_one_line_errors(
    tmp_path: Path, key: str, value: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as refused:
        load(overrides={key: value.format(tmp=tmp_path)})
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("listeners.kafka.node_id", "-1", r"^listeners.kafka.node_id: 0 or more, not -1$"),
        ("backend.max_open_files", "-1", r"^backend.max_open_files: 0 \(half"),
        ("limits.max_partitions_per_topic", "0", r"^limits.max_partitions_per_topic: must be 1"),
    ],
)
def test_bad_numbers_are_one_line_errors(key: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as refused:
        load(overrides={key: value})
    assert "\n" not in str(refused.value)
