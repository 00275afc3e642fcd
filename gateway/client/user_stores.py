"""The two places ``streamgate users`` works on, with one interface: ``LocalUsers``, the user
store's file changed under its lock as a gateway sharing it would change it (a running gateway
sees the change on its next lookup); ``RemoteUsers``, a running gateway's (or an Iggy server's)
users through its Iggy listener with Iggy's own user commands, as the logged-in user."""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import unquote, urlsplit

import trio

from gateway.client.passwords import login_password, read_file
from gateway.client.session import ClientError
from gateway.model.permissions import Permissions
from gateway.model.users import TokenInfo, User, UserStatus

if TYPE_CHECKING:
    from gateway.backends.iggy.pool import Connection
    from gateway.coordination import UserStore

DEFAULT_USERS_FILE: Final = "./data/users.json"


def _number(ref: str | None) -> int | None:
    return int(ref) if ref is not None and ref.isdigit() else None


class LocalUsers:
    """The user store's file, as a gateway sharing it would change it. Stream and topic names
    in grants are resolved from the embedded data directory the file lives in (``catalog``),
    the ids a gateway on that directory uses."""

    def __init__(self, store: UserStore, catalog: str | None = None) -> None:
        self.store = store
        self.catalog = catalog

    async def resolve(self, stream: str | None, topic: str | None) -> tuple[int | None, int | None]:
        """(stream id, topic id) of a grant's ``--stream``/``--topic``, each an id or a name."""
        sid, tid = _number(stream), _number(topic)
        if (stream is None or sid is not None) and (topic is None or tid is not None):
            return sid, tid
        ids = (
            None
            if self.catalog is None
            else await trio.to_thread.run_sync(_catalog_ids, self.catalog)
        )
        if not ids:
            raise ClientError(
                "stream and topic names are resolved in an embedded data directory or through"
                " a running gateway (--url); give numeric ids here"
            )
        return _resolve_in(ids, stream, topic)

    async def users(self) -> list[User]:
        await trio.lowlevel.checkpoint()
        return self.store.list_users()

    async def get(self, name: str) -> User:
        await trio.lowlevel.checkpoint()
        return self.store.get_user(name)

    async def create(self, name: str, password: str, active: bool, p: Permissions) -> User:
        status = UserStatus.ACTIVE if active else UserStatus.INACTIVE
        return await self.store.create_user(name, password, status=status, permissions=p)

    async def delete(self, name: str) -> None:
        await trio.lowlevel.checkpoint()
        self.store.delete_user(name)

    async def passwd(self, name: str, password: str, args: argparse.Namespace) -> None:
        await self.store.set_password(name, password)

    async def set_permissions(self, name: str, p: Permissions) -> None:
        await trio.lowlevel.checkpoint()
        self.store.update_permissions(name, p)

    async def tokens(self, user: str | None) -> list[TokenInfo]:
        await trio.lowlevel.checkpoint()
        return self.store.list_tokens(_token_owner(user))

    async def create_token(self, user: str | None, name: str, expiry_us: int | None) -> str:
        await trio.lowlevel.checkpoint()
        return self.store.create_token(_token_owner(user), name, expiry_us)

    async def delete_token(self, user: str | None, name: str) -> None:
        await trio.lowlevel.checkpoint()
        self.store.delete_token(_token_owner(user), name)


def _catalog_ids(root: str) -> dict[str, tuple[int, dict[str, int]]]:
    """stream name -> (id, topic name -> id), read from the embedded catalog's JSON files."""
    from gateway.backends.embedded.catalog import STREAM_FILE, TOPIC_FILE
    from gateway.backends.embedded.files import read_json as read

    out: dict[str, tuple[int, dict[str, int]]] = {}
    if not os.path.isdir(root):
        return out
    for sdir in os.scandir(root):
        if not sdir.is_dir() or (smeta := read(os.path.join(sdir.path, STREAM_FILE))) is None:
            continue
        topics = {}
        for tdir in os.scandir(sdir.path):
            if tdir.is_dir() and (tmeta := read(os.path.join(tdir.path, TOPIC_FILE))):
                topics[str(tmeta["name"])] = int(tmeta["id"])
        out[str(smeta["name"])] = (int(smeta["id"]), topics)
    return out


def _resolve_in(
    ids: dict[str, tuple[int, dict[str, int]]], stream: str | None, topic: str | None
) -> tuple[int | None, int | None]:
    if stream is None:
        raise ClientError("--topic needs --stream")
    sid = _number(stream)
    by_id = {v[0]: (name, v[1]) for name, v in ids.items()}
    if sid is None:
        if stream not in ids:
            raise ClientError(f"no stream {stream!r}")
        sid, topics = ids[stream]
    else:
        topics = by_id[sid][1] if sid in by_id else {}
    if topic is None:
        return sid, None
    tid = _number(topic)
    if tid is None:
        if topic not in topics:
            raise ClientError(f"no topic {topic!r} in stream {stream!r}")
        tid = topics[topic]
    return sid, tid


def _token_owner(user: str | None) -> str:
    if user is None:
        raise ClientError("--user NAME: whose tokens (on a users file)")
    return user


class RemoteUsers:
    """A gateway's (or Iggy server's) users through its Iggy listener, as the logged-in user."""

    def __init__(self, conn: Connection, login: str, login_password: str) -> None:
        self.conn = conn
        self.login = login
        self._login_password = login_password

    async def _call(self, command: Any, what: str) -> Any:
        from gateway.translate.iggy.errors import error_of
        from protocols.iggy.status import Status

        reply = await self.conn.call(command)
        if reply.status != Status.OK:
            raise error_of(reply.status, what)
        return reply.body

    async def resolve(self, stream: str | None, topic: str | None) -> tuple[int | None, int | None]:
        """(stream id, topic id) of a grant's ``--stream``/``--topic``: ids, or names the
        gateway resolves (Iggy identifiers are either)."""
        from protocols.iggy import GetStream, GetTopic, StreamDetails, TopicDetails

        if stream is None:
            if topic is not None:
                raise ClientError("--topic needs --stream")
            return None, None
        sid = _number(stream)
        if sid is None:
            body = await self._call(GetStream(stream_id=stream), f"stream {stream!r}")
            if not isinstance(body, StreamDetails):
                raise ClientError(f"no stream {stream!r}")
            sid = body.stream.id
        if topic is None:
            return sid, None
        tid = _number(topic)
        if tid is None:
            body = await self._call(GetTopic(stream_id=sid, topic_id=topic), f"topic {topic!r}")
            if not isinstance(body, TopicDetails):
                raise ClientError(f"no topic {topic!r} in stream {stream!r}")
            tid = body.topic.id
        return sid, tid

    async def users(self) -> list[User]:
        from protocols.iggy import GetUsers, Users

        body = await self._call(GetUsers(), "list users")
        assert isinstance(body, Users)
        # Iggy's list carries no permissions: ask for each user's details.
        return [await self.get(u.id) for u in body.users]

    async def get(self, name: str | int) -> User:
        from gateway.translate.iggy import users as tu
        from protocols.iggy import GetUser, UserInfoDetails

        body = await self._call(GetUser(user_id=name), f"user {name!r}")
        if not isinstance(body, UserInfoDetails):
            raise ClientError(f"no user {name!r}")
        info = body.user
        return User(
            id=info.id,
            username=info.username,
            status=tu.user_status(info.status),
            permissions=tu.gateway_permissions(body.permissions),
            created_at_us=info.created_at,
        )

    async def create(self, name: str, password: str, active: bool, p: Permissions) -> User:
        from gateway.translate.iggy import users as tu
        from protocols.iggy import CreateUser

        status = tu.wire_user_status(UserStatus.ACTIVE if active else UserStatus.INACTIVE)
        granted = tu.wire_permissions(p) if p != Permissions() else None
        command = CreateUser(username=name, password=password, status=status, permissions=granted)
        await self._call(command, f"create user {name!r}")
        return await self.get(name)

    async def delete(self, name: str) -> None:
        from protocols.iggy import DeleteUser

        await self._call(DeleteUser(user_id=name), f"delete user {name!r}")

    async def passwd(self, name: str, password: str, args: argparse.Namespace) -> None:
        from protocols.iggy import ChangePassword

        # Iggy asks for the user's current password, even of an administrator.
        if args.current_password_file:
            current = read_file(args.current_password_file)
        elif name == self.login:
            current = self._login_password
        elif sys.stdin.isatty():
            current = getpass.getpass(f"current password of {name}: ")
        else:
            raise ClientError("Iggy needs the current password: --current-password-file")
        command = ChangePassword(user_id=name, current_password=current, new_password=password)
        await self._call(command, f"change the password of {name!r}")

    async def set_permissions(self, name: str, p: Permissions) -> None:
        from gateway.translate.iggy import users as tu
        from protocols.iggy import UpdatePermissions

        granted = tu.wire_permissions(p) if p != Permissions() else None
        await self._call(
            UpdatePermissions(user_id=name, permissions=granted), f"permissions of {name!r}"
        )

    def _own(self, user: str | None) -> None:
        if user is not None and user != self.login:
            raise ClientError(
                f"through Iggy, tokens are the logged-in user's ({self.login!r}), not {user!r}"
            )

    async def tokens(self, user: str | None) -> list[TokenInfo]:
        from protocols.iggy import GetPersonalAccessTokens, PersonalAccessTokens

        self._own(user)
        body = await self._call(GetPersonalAccessTokens(), "list tokens")
        assert isinstance(body, PersonalAccessTokens)
        return [TokenInfo(name=t.name, expiry_at_us=t.expiry_at or None) for t in body.tokens]

    async def create_token(self, user: str | None, name: str, expiry_us: int | None) -> str:
        from protocols.iggy import CreatePersonalAccessToken, RawPersonalAccessToken

        self._own(user)
        expiry = (1 << 64) - 1 if expiry_us is None else expiry_us  # u64::MAX = never
        body = await self._call(
            CreatePersonalAccessToken(name=name, expiry=expiry), f"create token {name!r}"
        )
        assert isinstance(body, RawPersonalAccessToken)
        return body.token

    async def delete_token(self, user: str | None, name: str) -> None:
        from protocols.iggy import DeletePersonalAccessToken

        self._own(user)
        await self._call(DeletePersonalAccessToken(name=name), f"delete token {name!r}")


Users = LocalUsers | RemoteUsers


def local_store(args: argparse.Namespace) -> UserStore:
    from gateway.backends.embedded import embedded_path
    from gateway.config import ConfigError, load
    from gateway.coordination import UserStore

    # A store that does not exist yet is made as the gateway would make it: the root user from
    # the configuration (file, STREAMGATE_* environment, *_password_file), never "iggy" by
    # surprise when the gateway is configured otherwise. STREAMGATE_URL is the client
    # commands' endpoint, not a setting.
    environ = {k: v for k, v in os.environ.items() if k != "STREAMGATE_URL"}
    try:
        config = load(args.config, environ=environ)
    except ConfigError as exc:
        raise ClientError(str(exc)) from None
    # Where the gateway keeps it (gateway.app.users_path): auth.users_file, else users.json in
    # the embedded backend's directory.
    path = args.users_file or config.auth.users_file
    if path == "none":
        raise ClientError("auth.users_file is 'none' (in memory): use --url or --users-file")
    if not path:
        url = config.backend.url
        if url.partition(":")[0].lower() != "embedded":
            raise ClientError(f"the {url.partition(':')[0]} backend keeps users in memory: --url")
        path = str(embedded_path(url) / "users.json")
    return UserStore(
        root_username=config.auth.root_username,
        root_password=config.auth.root_password,
        path=path,
    )


def local_users(args: argparse.Namespace) -> LocalUsers:
    """The users file, with the embedded data directory it lives in (a gateway's default) for
    the stream and topic names of grants."""
    store = local_store(args)
    path = store.path
    return LocalUsers(store, None if path is None else str(path.parent))


def iggy_target(url: str, args: argparse.Namespace) -> tuple[str, int, str, str]:
    try:
        parts = urlsplit(url)
        port = parts.port  # (a port that is not a number raises here)
    except ValueError:
        raise ClientError("--url: expected iggy://user@host:port (not a valid URL)") from None
    if parts.scheme != "iggy" or not parts.hostname:
        raise ClientError(f"--url: expected iggy://user@host:port, got {parts.scheme}://...")
    user = unquote(parts.username or "iggy")
    password = unquote(parts.password) if parts.password is not None else None
    if password is None:
        password = login_password(args, user)
    return parts.hostname, port or 8090, user, password


__all__ = [
    "DEFAULT_USERS_FILE",
    "LocalUsers",
    "RemoteUsers",
    "Users",
    "iggy_target",
    "local_store",
    "local_users",
]
