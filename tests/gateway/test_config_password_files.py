"""Passwords from files (``*_password_file``) and the environment, so that none needs argv."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.config import ConfigError, load


def test_root_and_rabbitmq_passwords_from_files(tmp_path: Path) -> None:
    (tmp_path / "root").write_text("root: secret, with ,commas\n")
    (tmp_path / "guest").write_text("guest-pw")
    config = load(
        overrides={
            "auth.root_password_file": str(tmp_path / "root"),
            "listeners.rabbitmq_stream.default_password_file": str(tmp_path / "guest"),
        }
    )
    assert config.auth.root_password == "root: secret, with ,commas"  # one trailing newline off
    assert config.listeners.rabbitmq_stream.default_password == "guest-pw"


def test_users_from_a_file_beside_the_inline_list(tmp_path: Path) -> None:
    (tmp_path / "users").write_text("# name:password, one per line\n\nalice:a:b,c\n  bob :pw-bob\n")
    config = load(
        environ={"STREAMGATE_AUTH_USERS": "carol:pw-carol"},
        overrides={"auth.users_password_file": str(tmp_path / "users")},
    )
    assert config.auth.user_map() == {"carol": "pw-carol", "alice": "a:b,c", "bob": "pw-bob"}


def test_passwords_from_the_environment() -> None:
    config = load(
        environ={
            "STREAMGATE_AUTH_ROOT_PASSWORD": "env-root",
            "STREAMGATE_LISTENERS_RABBITMQ_STREAM_DEFAULT_PASSWORD": "env-guest",
            "STREAMGATE_LOGIN_PASSWORD": "the users command's, not a setting",
        }
    )
    assert config.auth.root_password == "env-root"
    assert config.listeners.rabbitmq_stream.default_password == "env-guest"


def test_a_bad_password_file_is_refused_without_showing_its_lines(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"auth\.root_password_file: cannot read"):
        load(overrides={"auth.root_password_file": str(tmp_path / "missing")})
    (tmp_path / "users").write_text("alice:fine\nno-colon-here-secret\n")
    with pytest.raises(ConfigError, match="line 2 is not name:password") as info:
        load(overrides={"auth.users_password_file": str(tmp_path / "users")})
    assert "secret" not in str(info.value)
