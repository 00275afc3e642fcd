"""Where the user store keeps its accounts (``users.UserStore`` builds on it): the accounts by id,
an index of their names, their personal access tokens by digest, and the JSON file several
gateways may share (``user_store_file``): read again when another gateway changed it, every
change made under the file's lock on top of what it holds and written before the lock goes.

Personal access tokens live here too: a token is a record of its account, kept as a digest
(``credentials.token_digest``), and found by it at login.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from gateway.model import AlreadyExists, InvalidRequest, NotFound, UnknownUser
from gateway.model.permissions import Permissions
from gateway.model.users import Account, TokenInfo, User, UserStatus

from . import user_store_file
from .credentials import PasswordSecrets, check_token_name, new_token, token_digest

ROOT_ID = 0
MAX_TOKENS_PER_USER = 100  # Iggy's personal_access_token.max_tokens_per_user default


def now_us() -> int:
    return time.time_ns() // 1000


class AccountBook:
    def __init__(self, path: str | Path | None, clock: Callable[[], int] = now_us) -> None:
        self._path = Path(path) if path is not None else None
        self._clock = clock
        self._accounts: dict[int, Account] = {}
        self._names: dict[str, int] = {}  # username -> id, an index ``_find`` keeps
        self._next_id = ROOT_ID + 1
        self._tokens: dict[str, tuple[int, str]] = {}  # digest -> (user id, token name)
        self._seen: user_store_file.Stamp | None = None  # the file as last read or written

    # -- personal access tokens -----------------------------------------------------------------

    def create_token(self, user: int | str, name: str, expiry_us: int | None = None) -> str:
        """A new token for ``user``, valid for ``expiry_us`` microseconds (None = for ever).

        Only its digest is kept: the returned string is the one chance to see the token.
        """
        check_token_name(name)
        if expiry_us is not None and expiry_us <= 0:
            raise InvalidRequest("token expiry must be positive")
        token = new_token()
        expiry_at = None if expiry_us is None else self._clock() + expiry_us
        with self._changing():
            account = self._account(user)
            if name in account.tokens:
                raise AlreadyExists(f"user {account.user.username!r} already has a token {name!r}")
            if len(account.tokens) >= MAX_TOKENS_PER_USER:
                raise InvalidRequest(f"a user may have at most {MAX_TOKENS_PER_USER} tokens")
            info = TokenInfo(name=name, expiry_at_us=expiry_at)
            self._add_token(account, info, token_digest(token))
        return token

    def list_tokens(self, user: int | str) -> list[TokenInfo]:
        self._refresh()
        return sorted((info for info, _ in self._account(user).tokens.values()), key=_by_name)

    def delete_token(self, user: int | str, name: str) -> None:
        with self._changing():
            account = self._account(user)
            entry = account.tokens.pop(name, None)
            if entry is None:
                raise NotFound(f"user {account.user.username!r} has no token {name!r}")
            del self._tokens[entry[1]]

    def delete_expired_tokens(self) -> int:
        """What Iggy's token cleaner does periodically; returns how many were removed."""
        now = self._clock()
        self._refresh()
        if not any(
            info.expiry_at_us is not None and info.expiry_at_us <= now
            for account in self._accounts.values()
            for info, _ in account.tokens.values()
        ):
            return 0
        with self._changing():
            expired = [
                (account, name)
                for account in self._accounts.values()
                for name, (info, _) in account.tokens.items()
                if info.expiry_at_us is not None and info.expiry_at_us <= now
            ]
            for account, name in expired:
                del self._tokens[account.tokens.pop(name)[1]]
        return len(expired)

    # -- bookkeeping ----------------------------------------------------------------------------

    def _find(self, username: str) -> Account | None:
        # By an index of names, checked on every hit (a rename or a reload leaves it stale) and
        # rebuilt on a miss: the authorizer finds the user of every request by name.
        uid = self._names.get(username)
        if uid is not None:
            account = self._accounts.get(uid)
            if account is not None and account.user.username == username:
                return account
        self._names = {a.user.username: uid for uid, a in self._accounts.items()}
        uid = self._names.get(username)
        return None if uid is None else self._accounts[uid]

    def _account(self, user: int | str) -> Account:
        account = self._accounts.get(user) if isinstance(user, int) else self._find(user)
        if account is None:
            raise UnknownUser(f"user {user!r} does not exist")
        return account

    def _add(
        self,
        user_id: int,
        username: str,
        password: PasswordSecrets,
        permissions: Permissions,
        status: UserStatus = UserStatus.ACTIVE,
    ) -> Account:
        user = User(
            id=user_id,
            username=username,
            status=status,
            permissions=permissions,
            created_at_us=self._clock(),
        )
        account = self._accounts[user_id] = Account(
            user, password.password_hash, scram=dict(password.scram)
        )
        self._next_id = max(self._next_id, user_id + 1)  # ids are never reused
        return account

    @staticmethod
    def _set_password(account: Account, secrets_: PasswordSecrets) -> None:
        account.password_hash = secrets_.password_hash
        account.scram = dict(secrets_.scram)

    def _add_token(self, account: Account, info: TokenInfo, digest: str) -> None:
        account.tokens[info.name] = (info, digest)
        self._tokens[digest] = (account.user.id, info.name)

    def _refresh(self) -> None:
        """Take in the file when another gateway changed it since this one last saw it."""
        if self._path is None:
            return
        stamp = user_store_file.stamp(self._path)
        if stamp == self._seen:
            return
        doc = user_store_file.load(self._path)
        self._accounts.clear()
        self._tokens.clear()
        self._next_id = ROOT_ID + 1
        if doc is not None:
            self._restore(doc)
        self._seen = stamp

    @contextmanager
    def _changing(self) -> Iterator[None]:
        """One change: under the file's lock, on top of what the file holds now, written before
        the lock goes (nothing is written when the change raises)."""
        if self._path is None:
            yield
            return
        with user_store_file.locked(self._path):
            self._refresh()
            try:
                yield
            except BaseException:
                self._seen = None  # what was changed in memory before the error: read again
                raise
            user_store_file.save(self._path, self._dump())
            self._seen = user_store_file.stamp(self._path)

    def _dump(self) -> dict[str, Any]:
        accounts = [self._accounts[i] for i in sorted(self._accounts)]
        return user_store_file.dump(accounts, next_user_id=self._next_id)

    def _restore(self, doc: Mapping[str, Any]) -> None:
        accounts, next_user_id = user_store_file.restore(doc)
        for account in accounts:
            self._accounts[account.user.id] = account
            for info, digest in account.tokens.values():
                self._tokens[digest] = (account.user.id, info.name)
        self._next_id = max([next_user_id, *(i + 1 for i in self._accounts)])


def _by_name(info: TokenInfo) -> str:
    return info.name


__all__ = ["MAX_TOKENS_PER_USER", "ROOT_ID", "AccountBook", "now_us"]
