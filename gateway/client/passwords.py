"""Where ``streamgate users`` takes passwords from: never argv. A new password from
``--password-file``, ``--password-stdin`` (stdin's first line) or a prompt asked twice; the login
password of ``--url`` from the URL itself, ``STREAMGATE_LOGIN_PASSWORD``,
``--login-password-file`` or a prompt."""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from typing import Final

from gateway.client.session import ClientError

LOGIN_PASSWORD_ENV: Final = "STREAMGATE_LOGIN_PASSWORD"


def read_file(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().removesuffix("\n").removesuffix("\r")
    except (OSError, UnicodeDecodeError) as exc:
        raise ClientError(f"cannot read the password file {path}: {exc}") from None


def new_password(args: argparse.Namespace, what: str = "new password") -> str:
    if args.password_file:
        return read_file(args.password_file)
    if args.password_stdin:
        line = sys.stdin.readline()
        if not line:
            raise ClientError("--password-stdin: stdin is empty")
        return line.removesuffix("\n").removesuffix("\r")
    if not sys.stdin.isatty():
        raise ClientError("no password: use --password-stdin or --password-file (no terminal)")
    first = getpass.getpass(f"{what}: ")
    if getpass.getpass(f"{what} again: ") != first:
        raise ClientError("the passwords differ")
    return first


def login_password(args: argparse.Namespace, user: str) -> str:
    if args.login_password_file:
        return read_file(args.login_password_file)
    if (env := os.environ.get(LOGIN_PASSWORD_ENV)) is not None:
        return env
    if not sys.stdin.isatty():
        raise ClientError(
            f"no login password for {user!r}: put it in the URL, {LOGIN_PASSWORD_ENV} or "
            "--login-password-file"
        )
    return getpass.getpass(f"password of {user}: ")


__all__ = ["LOGIN_PASSWORD_ENV", "login_password", "new_password", "read_file"]
