"""The gateway's users: who may connect, with which permissions, by password or access token.

Iggy keeps users, permissions and personal access tokens (PATs) on the server, so the gateway
keeps them too and answers Iggy's user commands from here (iggy.md §3.5, §5.2). The Kafka SASL
listener authenticates against the same store: SASL/PLAIN with the password, SCRAM-SHA-256 and
SCRAM-SHA-512 with the SCRAM keys derived whenever a password is set (create, change, the
configured users and root). A store written before SCRAM has no such keys: its users log in with
PLAIN (and through Iggy) until their password is next set; configured users get them on the next
start, the root when the configured root password still matches. Kafka's admin APIs set and
delete one mechanism's credential directly (KIP-554, ``alter_scram_credentials``): an account
they create, or whose credential they replace, has no password for other logins.

The root user (id 0, ``iggy``/``iggy`` unless configured) has every permission and can be
neither deleted nor re-permissioned, as in Iggy.

Users from the configuration (``[auth] users``) are created on start with the data permissions
(streams, topics, messages, server stats) but no user or server management. The configuration
stays authoritative for their passwords: one changed through Iggy is reset on the next start
(that includes the root's, if the configuration names it).
Root credentials, like Iggy's ``IGGY_ROOT_PASSWORD``, only apply when the root is first created.

With a ``path``, every change is written to that JSON file before the method returns, and the file
is loaded on start (``user_store_file``). Only password hashes, SCRAM keys and token digests are
stored. The file may be shared by several gateways (sidecars, replicas, ``--workers`` on one
volume): a change takes an exclusive lock on the file's lock file, reads what the others wrote,
applies itself and writes, so none is lost and user ids stay unique; every read first takes in a
newer file (a stat: inode, size, mtime), so a user created through one gateway logs in through
all.

Methods that hash a password (``login``, ``create_user``, ``change_password``, ``authenticate``)
are async and run scrypt in a worker thread of the store's ``LoginGuard`` (its own bounded
limiter, never the default one the embedded store's fsyncs wait in); ``authenticate`` also goes
through the guard's backoff and rate limits first (gateway/coordination/login_guard.py). The rest
are synchronous. Every change happens between two checkpoints, so concurrent trio tasks need no
lock.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path

import trio

from gateway.model import (
    Authenticate,
    AuthenticateResult,
    GatewayError,
    InvalidCredentials,
    InvalidRequest,
    InvalidToken,
    NotFound,
    Unsupported,
    UserExists,
    UserInactive,
)
from gateway.model.permissions import GlobalPermissions, Permissions
from gateway.model.users import ScramCredential, TokenInfo, User, UserStatus, allowed
from protocols._wire.scram import HASHES, verify_transcript

from .account_book import MAX_TOKENS_PER_USER, ROOT_ID, AccountBook, now_us
from .credentials import (
    NO_PASSWORD,
    SCRAM_ITERATIONS,
    SCRAM_MECHANISMS,
    PasswordSecrets,
    check_password,
    check_username,
    password_secrets,
    scram_credentials,
    token_digest,
    verify_password,
)
from .login_guard import LoginGuard

# Advertised by the Kafka listener; authenticate() also takes "TOKEN" (an Iggy PAT).
MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS)

# What a user from the configuration may do: everything on data, nothing on users or servers.
CONFIG_USER_PERMISSIONS = Permissions(
    global_permissions=GlobalPermissions(
        read_servers=True, manage_streams=True, read_streams=True, manage_topics=True,
        read_topics=True, poll_messages=True, send_messages=True,
    )
)  # fmt: skip


_CACHED = 4096  # password logins remembered at most (``login_cache_s``)


class UserStore(AccountBook):
    def __init__(
        self,
        users: Mapping[str, str] | None = None,
        *,
        root_username: str = "iggy",
        root_password: str = "iggy",
        path: str | Path | None = None,
        clock: Callable[[], int] = now_us,
        guard: LoginGuard | None = None,
        login_cache_s: float = 0.0,
    ) -> None:
        super().__init__(path, clock)
        self.guard = guard if guard is not None else LoginGuard()
        # Fake SCRAM salts for names with no SCRAM keys (RFC 5802 §5.1 "SHOULD NOT reveal"): the
        # same name gets the same salt from this gateway, so a probe learns nothing.
        self._fake_salt_key = secrets.token_bytes(32)
        # Password logins that succeeded, remembered for login_cache_s (0: not at all) so a
        # client that connects again costs no scrypt hash: keyed by an HMAC of name and password
        # under a key of this process (nothing of it is written anywhere), holding the user id
        # and the password hash it matched (a changed password, a deleted or renamed user never
        # match again) and when it expires; at most _CACHED entries, least recently used go.
        self._cache_us = int(login_cache_s * 1_000_000)
        self._cache_key = secrets.token_bytes(32)
        self._verified: OrderedDict[bytes, tuple[int, str, int]] = OrderedDict()
        with self._changing():
            root = self._accounts.get(ROOT_ID)
            if root is None:
                root_secrets = password_secrets(root_password)
                self._add(ROOT_ID, root_username, root_secrets, Permissions.all())
            elif not root.scram and verify_password(root_password, root.password_hash):
                root.scram = scram_credentials(root_password)  # a store from before SCRAM
            for name, password in sorted((users or {}).items()):
                account = self._find(name)
                if account is None:
                    self._add(
                        self._next_id, name, password_secrets(password), CONFIG_USER_PERMISSIONS
                    )
                elif not verify_password(password, account.password_hash):
                    self._set_password(account, password_secrets(password))
                elif not account.scram:
                    account.scram = scram_credentials(password)

    # -- authentication -------------------------------------------------------------------------

    async def authenticate(self, cmd: Authenticate) -> AuthenticateResult:
        """The router's ``authenticate`` command: SASL PLAIN (Kafka, RabbitMQ Stream, Iggy), a
        token (Iggy PAT), or the end of a SCRAM exchange (Kafka): ``secret`` is then the
        exchange's transcript (AuthMessage and the client's proof) the listener checked for shape
        and nonce, and its proof is verified here against the user's StoredKey."""
        if cmd.mechanism != "TOKEN" and cmd.mechanism not in MECHANISMS:
            raise Unsupported(f"SASL mechanism {cmd.mechanism} is not supported")
        username = "" if cmd.mechanism == "TOKEN" else cmd.username
        self.guard.check(cmd.peer, username)  # backoff and rate limit: before any hashing
        try:
            user = await self._authenticate(cmd)
        except (InvalidCredentials, InvalidToken):
            self.guard.failed(cmd.peer, username)
            raise
        self.guard.succeeded(cmd.peer, username)
        return AuthenticateResult(user_id=user.id, username=user.username)

    async def _authenticate(self, cmd: Authenticate) -> User:
        if cmd.mechanism in SCRAM_MECHANISMS:
            await trio.lowlevel.checkpoint()
            return self._scram_login(cmd.mechanism, cmd.username, cmd.secret)
        try:
            secret = cmd.secret.decode()
        except UnicodeDecodeError:
            raise InvalidCredentials("authentication failed") from None
        if cmd.mechanism == "TOKEN":
            return await self.login_with_token(secret)
        return await self.login(cmd.username, secret)

    async def login(self, username: str, password: str) -> User:
        self._refresh()
        account = self._find(username)
        stored = account.password_hash if account is not None else None
        key = b""
        if self._cache_us > 0 and account is not None and stored:
            secret = f"{username}\0{password}".encode("utf-8", "surrogatepass")
            key = hmac.new(self._cache_key, secret, "sha256").digest()
            hit = self._verified.get(key)
            if hit is not None and hit[:2] == (account.user.id, stored) and hit[2] > self._clock():
                self._verified.move_to_end(key)
                await trio.lowlevel.checkpoint()
                return self._active(account.user)
        # An unknown user still costs one hash, so timing does not tell which names exist.
        ok = await self.guard.hash(lambda: verify_password(password, stored))
        account = self._find(username)  # it may have changed while we hashed
        if not ok or account is None or account.password_hash != stored:
            raise InvalidCredentials(f"authentication failed for user {username!r}")
        if key and stored:
            self._verified[key] = (account.user.id, stored, self._clock() + self._cache_us)
            self._verified.move_to_end(key)
            while len(self._verified) > _CACHED:
                self._verified.popitem(last=False)
        return self._active(account.user)

    def scram_credential(self, mechanism: str, username: str) -> ScramCredential:
        """The salt and keys a SCRAM exchange for ``username`` runs with. A name with none (no
        such user, or one whose password was set before SCRAM) gets a stable fake salt and keys
        that match no proof, so the exchange fails only at its end, as for a wrong password."""
        self._refresh()
        account = self._find(username)
        credential = account.scram.get(mechanism) if account is not None else None
        if credential is not None:
            return credential
        salt = hmac.new(self._fake_salt_key, f"{mechanism}\0{username}".encode(), "sha256")
        size = hashlib.new(HASHES[mechanism]).digest_size
        return ScramCredential(
            salt=salt.digest()[:24],
            iterations=SCRAM_ITERATIONS,
            stored_key=secrets.token_bytes(size),
            server_key=secrets.token_bytes(size),
        )

    def _scram_login(self, mechanism: str, username: str, transcript: bytes) -> User:
        self._refresh()
        account = self._find(username)
        credential = account.scram.get(mechanism) if account is not None else None
        if account is None or credential is None:
            why = "no such user" if account is None else "no SCRAM keys (PLAIN until next set)"
            raise InvalidCredentials(f"authentication failed for user {username!r}: {why}")
        if not verify_transcript(mechanism, credential.stored_key, transcript):
            raise InvalidCredentials(f"authentication failed for user {username!r}")
        return self._active(account.user)

    async def login_with_token(self, token: str) -> User:
        await trio.lowlevel.checkpoint()
        self._refresh()
        # Tokens are uniformly random, so finding one by its SHA-256 leaks nothing useful.
        owner = self._tokens.get(token_digest(token))
        if owner is None:
            raise InvalidToken("invalid personal access token")
        account = self._accounts[owner[0]]
        info, _ = account.tokens[owner[1]]
        if info.expiry_at_us is not None and info.expiry_at_us <= self._clock():
            raise InvalidToken(f"personal access token {info.name!r} has expired")
        return self._active(account.user)

    @staticmethod
    def _active(user: User) -> User:
        if user.status is not UserStatus.ACTIVE:
            raise UserInactive(f"user {user.username!r} is inactive")
        return user

    # -- users ----------------------------------------------------------------------------------

    def get_user(self, user: int | str) -> User:
        self._refresh()
        return self._account(user).user

    @property
    def path(self) -> Path | None:
        """The file the store is kept in (None: in memory)."""
        return self._path

    def find_user(self, username: str) -> User | None:
        """The user of that name, or None (no exception: asked on every anonymous command)."""
        self._refresh()
        account = self._find(username)
        return None if account is None else account.user

    def list_users(self) -> list[User]:
        self._refresh()
        return [self._accounts[i].user for i in sorted(self._accounts)]

    async def create_user(
        self,
        username: str,
        password: str,
        *,
        status: UserStatus = UserStatus.ACTIVE,
        permissions: Permissions | None = None,
    ) -> User:
        check_username(username)
        check_password(password)
        hashed = await self.guard.hash(lambda: password_secrets(password), queue=False)
        with self._changing():
            if self._find(username) is not None:
                raise UserExists(f"user {username!r} already exists")
            account = self._add(
                self._next_id, username, hashed, permissions or Permissions(), status
            )
        return account.user

    def ensure_user(self, username: str, password: str) -> User:
        """A default user (RabbitMQ's guest): created with the configured users' permissions
        when missing, left as it is (password, permissions, status) when it exists."""
        with self._changing():
            account = self._find(username)
            if account is None:
                account = self._add(
                    self._next_id, username, password_secrets(password), CONFIG_USER_PERMISSIONS
                )
        return account.user

    def update_user(
        self, user: int | str, *, username: str | None = None, status: UserStatus | None = None
    ) -> User:
        with self._changing():
            account = self._account(user)
            if username is not None and username != account.user.username:
                check_username(username)
                if self._find(username) is not None:
                    raise UserExists(f"user {username!r} already exists")
            if status is UserStatus.INACTIVE and account.user.id == ROOT_ID:
                raise InvalidRequest("the root user cannot be deactivated")
            account.user = replace(
                account.user,
                username=username if username is not None else account.user.username,
                status=status if status is not None else account.user.status,
            )
        return account.user

    def revoke_grants(self, stream_id: int, topic_id: int | None = None) -> int:
        """Remove every user's grants on a stream (``topic_id`` None) or one of its topics, as
        it is deleted: a stream or topic created later with the same id starts with none.
        Returns how many users had some."""
        changed = 0
        with self._changing():
            for account in self._accounts.values():
                p = account.user.permissions
                sp = p.streams.get(stream_id)
                if sp is None or (topic_id is not None and topic_id not in sp.topics):
                    continue
                streams = dict(p.streams)
                if topic_id is None:
                    del streams[stream_id]
                else:
                    topics = dict(sp.topics)
                    del topics[topic_id]
                    streams[stream_id] = replace(sp, topics=topics)
                account.user = replace(account.user, permissions=replace(p, streams=streams))
                changed += 1
        return changed

    def update_permissions(self, user: int | str, permissions: Permissions) -> User:
        with self._changing():
            account = self._account(user)
            if account.user.id == ROOT_ID:  # Iggy: CannotChangePermissions
                raise InvalidRequest("the root user's permissions cannot be changed")
            account.user = replace(account.user, permissions=permissions)
        return account.user

    async def change_password(self, user: int | str, current: str, new: str) -> None:
        """Iggy checks the current password even when an admin changes another user's."""
        check_password(new)
        self._refresh()
        stored = self._account(user).password_hash
        ok, hashed = await self.guard.hash(
            lambda: (verify_password(current, stored), password_secrets(new)), queue=False
        )
        with self._changing():
            account = self._account(user)
            if not ok or account.password_hash != stored:
                raise InvalidCredentials("the current password is wrong")
            self._set_password(account, hashed)

    async def set_password(self, user: int | str, new: str) -> None:
        """An administrator's reset (``streamgate users passwd`` on the store's file): no current
        password asked, unlike Iggy's ChangePassword."""
        check_password(new)
        self._account(user)
        hashed = await self.guard.hash(lambda: password_secrets(new), queue=False)
        with self._changing():
            self._set_password(self._account(user), hashed)

    def delete_user(self, user: int | str) -> User:
        with self._changing():
            account = self._account(user)
            if account.user.id == ROOT_ID:  # Iggy: CannotDeleteUser
                raise InvalidRequest("the root user cannot be deleted")
            del self._accounts[account.user.id]
            for _, digest in account.tokens.values():
                del self._tokens[digest]
        return account.user

    # -- Kafka's SCRAM credentials (KIP-554) -----------------------------------------------------

    def scram_iterations(self) -> dict[str, dict[str, int]]:
        """username -> {mechanism: iterations} for every user holding a SCRAM credential: what
        Kafka's DescribeUserScramCredentials reports (never a salt or key)."""
        self._refresh()
        accounts = (self._accounts[i] for i in sorted(self._accounts))
        return {
            a.user.username: {m: c.iterations for m, c in sorted(a.scram.items())}
            for a in accounts
            if a.scram
        }

    def alter_scram_credentials(
        self,
        deletions: Mapping[str, str],
        upsertions: Mapping[str, tuple[str, ScramCredential]],
    ) -> dict[str, GatewayError]:
        """Kafka's AlterUserScramCredentials: ``deletions`` username -> mechanism,
        ``upsertions`` username -> (mechanism, credential), one change per user (the listener
        refuses a user named twice, as Kafka does), all applied in one write. Returns the users
        whose change was refused, and why; the others' changes are applied.

        - A deletion removes that mechanism's credential (``NotFound`` when there is none). The
          account stays, with its permissions, tokens and password if it has one, as Kafka keeps
          a user's ACLs when its credentials go.
        - An upsertion for a name the store does not hold creates an account with no
          permissions and no password: it logs in with SCRAM of that mechanism only, until it is
          granted permissions or given a password (``streamgate users grant``/``passwd``). A
          name Iggy would refuse (``check_username``) is ``InvalidRequest``.
        - An upsertion for an existing user replaces that mechanism's credential, keeps the
          other mechanism's (Kafka keeps them apart; Describe lists both) and retires the
          account's password: PLAIN, Iggy and RabbitMQ Stream logins no longer accept the old
          one. No hash of the new password can be made from a salted password, and a password
          changed through Kafka must not go on working elsewhere. A user from the configuration
          gets its configured password (and the SCRAM credentials derived from it) back on the
          next start, as after a change through Iggy.
        """
        refused: dict[str, GatewayError] = {}
        with self._changing():
            for username, mechanism in deletions.items():
                account = self._find(username)
                if account is None or account.scram.pop(mechanism, None) is None:
                    refused[username] = NotFound(
                        f"user {username!r} has no {mechanism} credential to delete"
                    )
            for username, (mechanism, credential) in upsertions.items():
                account = self._find(username)
                if account is None:
                    try:
                        check_username(username)
                    except InvalidRequest as exc:
                        refused[username] = exc
                        continue
                    only = PasswordSecrets(NO_PASSWORD, {mechanism: credential})
                    self._add(self._next_id, username, only, Permissions())
                else:
                    account.password_hash = NO_PASSWORD
                    account.scram[mechanism] = credential
        return refused


__all__ = [
    "CONFIG_USER_PERMISSIONS",
    "MAX_TOKENS_PER_USER",
    "MECHANISMS",
    "ROOT_ID",
    "TokenInfo",
    "User",
    "UserStatus",
    "UserStore",
    "allowed",
]
