"""``streamgate users``: create, delete, passwd, grant, revoke, list and tokens.

Two places to work on: the user store's file (``--users-file``, default ``./data/users.json``,
the embedded backend's), changed under the store's own file lock exactly as a gateway changes
it, so a running gateway sees the change on its next lookup; or a running gateway (or an Iggy
server) through its Iggy listener (``--url iggy://user@host:port``), with Iggy's own user
commands, so the logged-in user needs Iggy's ``manage_users``/``read_users``.

Passwords never come from the command line: a prompt (getpass), ``--password-stdin`` (the first
line of stdin) or ``--password-file``. The login password for ``--url`` likewise: the URL's
password if one is written there (discouraged), else ``STREAMGATE_LOGIN_PASSWORD``,
``--login-password-file`` or a prompt. Grants follow Iggy's permission model
(gateway/model/permissions.py): global flags, or a stream's (``--stream ID``), or a topic's
(``--stream ID --topic ID``), by Iggy's numeric ids or by name: resolved through ``--url``'s
gateway, or in the embedded data directory the users file lives in.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final

import trio

from gateway.client.grants import GLOBAL_FLAGS, changed, describe
from gateway.client.passwords import LOGIN_PASSWORD_ENV, new_password
from gateway.client.session import ClientError
from gateway.client.user_stores import (
    DEFAULT_USERS_FILE,
    RemoteUsers,
    Users,
    iggy_target,
    local_users,
)
from gateway.model import GatewayError
from gateway.model.permissions import Permissions
from gateway.model.users import TokenInfo, User


def _user_line(user: User) -> str:
    return f"{user.id}\t{user.username}\t{user.status}\t{describe(user.permissions)}"


def _token_line(info: TokenInfo) -> str:
    if info.expiry_at_us is None:
        return f"{info.name}\tnever"
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(info.expiry_at_us / 1e6))
    return f"{info.name}\t{when}"


# -- the commands ----------------------------------------------------------------------------------


async def _create(users: Users, args: argparse.Namespace) -> None:
    p = Permissions()
    for spec in args.grant:
        p = changed(p, spec.split(","), on=True)
    password = new_password(args, f"password of {args.name}")
    user = await users.create(args.name, password, not args.inactive, p)
    print(_user_line(user))


async def _delete(users: Users, args: argparse.Namespace) -> None:
    await users.delete(args.name)


async def _passwd(users: Users, args: argparse.Namespace) -> None:
    await users.passwd(args.name, new_password(args, f"new password of {args.name}"), args)


async def _grant_or_revoke(users: Users, args: argparse.Namespace, on: bool) -> None:
    user = await users.get(args.name)
    stream, topic = await users.resolve(args.stream, args.topic)
    p = changed(user.permissions, args.permissions, on=on, stream=stream, topic=topic)
    await users.set_permissions(args.name, p)
    print(_user_line(await users.get(args.name)))


async def _grant(users: Users, args: argparse.Namespace) -> None:
    await _grant_or_revoke(users, args, True)


async def _revoke(users: Users, args: argparse.Namespace) -> None:
    await _grant_or_revoke(users, args, False)


async def _list(users: Users, args: argparse.Namespace) -> None:
    for user in await users.users():
        print(_user_line(user))


async def _tokens_list(users: Users, args: argparse.Namespace) -> None:
    for info in await users.tokens(args.user):
        print(_token_line(info))


async def _tokens_create(users: Users, args: argparse.Namespace) -> None:
    expiry = None if args.expiry_s is None else int(args.expiry_s * 1_000_000)
    # stdout: the token alone (the one chance to see it), for a script to capture
    print(await users.create_token(args.user, args.token_name, expiry))


async def _tokens_delete(users: Users, args: argparse.Namespace) -> None:
    await users.delete_token(args.user, args.token_name)


_COMMANDS: Final[dict[str, Callable[[Users, argparse.Namespace], Awaitable[None]]]] = {
    "create": _create,
    "delete": _delete,
    "passwd": _passwd,
    "grant": _grant,
    "revoke": _revoke,
    "list": _list,
    "tokens_list": _tokens_list,
    "tokens_create": _tokens_create,
    "tokens_delete": _tokens_delete,
}


async def _main(args: argparse.Namespace) -> None:
    command = _COMMANDS[args.users_command]
    if not args.url:
        await command(local_users(args), args)
        return
    from gateway.backends.iggy.pool import IggyTarget, open_connection
    from protocols.iggy import DEFAULT_MAX_FRAME_SIZE

    host, port, user, password = iggy_target(args.url, args)
    target = IggyTarget(host=host, port=port, username=user, password=password)
    with trio.fail_after(args.timeout):
        conn = await open_connection(target, DEFAULT_MAX_FRAME_SIZE)
    try:
        with trio.fail_after(args.timeout):
            await command(RemoteUsers(conn, user, password), args)
    finally:
        conn.close()


def run_users(args: argparse.Namespace) -> int:
    try:
        trio.run(_main, args)
    except KeyboardInterrupt:  # Ctrl-C at a prompt: the shell's code for SIGINT
        return 130
    except (GatewayError, ClientError, OSError, ValueError, trio.TooSlowError) as exc:
        if isinstance(exc, GatewayError):
            message = exc.message
        elif isinstance(exc, trio.TooSlowError):
            message = f"no answer within {args.timeout:g} s"
        else:
            message = str(exc)
        print(f"streamgate: {message}", file=sys.stderr, flush=True)
        return 1
    return 0


# -- arguments ------------------------------------------------------------------------------------


def _where(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--users-file",
        default=None,
        help="the user store's file (default: auth.users_file, else users.json in the "
        f"embedded backend's directory: {DEFAULT_USERS_FILE})",
    )
    parser.add_argument(
        "--config", "-c", default=os.environ.get("STREAMGATE_CONFIG"),
        help="the gateway's TOML config (root user of a new store; env STREAMGATE_CONFIG)",
    )  # fmt: skip
    parser.add_argument(
        "--url",
        default=None,
        help="a running gateway's Iggy listener instead: iggy://user@host:port (the login "
        f"password from {LOGIN_PASSWORD_ENV}, --login-password-file or a prompt)",
    )
    parser.add_argument("--login-password-file", default=None, metavar="FILE")
    parser.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS")


def _password_source(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--password-stdin", action="store_true", help="read the password from stdin's first line"
    )
    group.add_argument("--password-file", default=None, metavar="FILE", help="read it from FILE")


def _level(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stream", default=None, metavar="ID|NAME", help="a stream's")
    parser.add_argument(
        "--topic", default=None, metavar="ID|NAME", help="a topic's (with --stream)"
    )


def add_users_command(sub: Any) -> None:
    """Add ``users`` to ``streamgate``'s subcommands."""
    users = sub.add_parser("users", help="users, permissions and access tokens")
    verbs = users.add_subparsers(dest="users_verb", required=True)

    def verb(name: str, command: str, text: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = verbs.add_parser(name, help=text)
        parser.set_defaults(users_command=command)
        _where(parser)
        return parser

    create = verb("create", "create", "create a user (password from a prompt, stdin or a file)")
    create.add_argument("name")
    create.add_argument("--inactive", action="store_true", help="created inactive")
    create.add_argument(
        "--grant", action="append", default=[], metavar="FLAGS",
        help=f"global permissions, comma-separated: all, {', '.join(GLOBAL_FLAGS)}",
    )  # fmt: skip
    _password_source(create)
    verb("delete", "delete", "delete a user").add_argument("name")
    passwd = verb("passwd", "passwd", "set a user's password (and its SCRAM keys)")
    passwd.add_argument("name")
    _password_source(passwd)
    passwd.add_argument(
        "--current-password-file", default=None, metavar="FILE",
        help="with --url: Iggy asks for the user's current password",
    )  # fmt: skip
    for name, text in (("grant", "grant permissions"), ("revoke", "revoke permissions")):
        parser = verb(name, name, f"{text}: global, of a stream, or of a topic")
        parser.add_argument("name")
        parser.add_argument("permissions", nargs="+", metavar="PERMISSION")
        _level(parser)
    verb("list", "list", "one line per user: id, name, status, permissions")
    tokens = verbs.add_parser("tokens", help="personal access tokens")
    token_verbs = tokens.add_subparsers(dest="tokens_verb", required=True)
    for name, text in (
        ("list", "a user's tokens: name, expiry"),
        ("create", "a new token, printed once"),
        ("delete", "delete a token"),
    ):
        parser = token_verbs.add_parser(name, help=text)
        parser.set_defaults(users_command=f"tokens_{name}")
        _where(parser)
        parser.add_argument(
            "--user", default=None, help="whose (a users file; through --url: the login's)"
        )
        if name != "list":
            parser.add_argument("token_name", metavar="NAME")
        if name == "create":
            parser.add_argument(
                "--expiry", dest="expiry_s", type=float, default=None, metavar="SECONDS",
                help="valid this long (default: never expires)",
            )  # fmt: skip


__all__ = ["add_users_command", "changed", "describe", "run_users"]
