"""The user store: logins, user management, Iggy's permissions, access tokens, the file."""

from __future__ import annotations

import json
import stat
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest

from gateway.coordination.login_guard import LoginGuard
from gateway.coordination.users import ROOT_ID, UserStatus, UserStore, allowed
from gateway.model import (
    AlreadyExists,
    Authenticate,
    InvalidCredentials,
    InvalidRequest,
    InvalidToken,
    NotFound,
    Unauthorized,
    UnknownUser,
    Unsupported,
    UserExists,
    UserInactive,
)
from gateway.model.permissions import (
    ACTIONS,
    Action,
    GlobalPermissions,
    Permissions,
    StreamPermissions,
    TopicPermissions,
    grants,
)

SECOND_US = 1_000_000
T = TypeVar("T")


class Clock:
    def __init__(self) -> None:
        self.now_us = 1_700_000_000 * SECOND_US

    def __call__(self) -> int:
        return self.now_us


# -- logins ------------------------------------------------------------------------------------


async def test_root_logs_in_with_the_default_credentials_and_has_every_permission() -> None:
    store = UserStore()
    root = await store.login("iggy", "iggy")
    assert (root.id, root.username, root.status) == (ROOT_ID, "iggy", UserStatus.ACTIVE)
    assert root.permissions == Permissions.all()
    assert all(allowed(root, action) for action in ACTIONS)


async def test_wrong_password_and_unknown_user_fail_alike() -> None:
    store = UserStore()
    for username, password in (("iggy", "wrong"), ("nobody", "iggy"), ("iggy", "")):
        with pytest.raises(InvalidCredentials):
            await store.login(username, password)


async def test_root_credentials_are_configurable() -> None:
    store = UserStore(root_username="admin", root_password="s3cret!")
    assert (await store.login("admin", "s3cret!")).id == ROOT_ID
    with pytest.raises(InvalidCredentials):
        await store.login("iggy", "iggy")


async def test_configured_users_authenticate_through_the_router_command() -> None:
    store = UserStore({"bob": "other", "alice": "s3cret"})
    result = await store.authenticate(
        Authenticate(mechanism="PLAIN", username="alice", secret=b"s3cret")
    )
    assert (result.user_id, result.username) == (1, "alice")  # ids 1.. in name order, as before
    assert store.get_user("bob").id == 2
    for bad in (b"wrong", b"\xff\xfe"):
        with pytest.raises(Unauthorized):
            await store.authenticate(Authenticate(mechanism="PLAIN", username="alice", secret=bad))
    with pytest.raises(Unsupported):
        await store.authenticate(
            Authenticate(mechanism="SCRAM-SHA-1", username="alice", secret=b"s3cret")
        )
    with pytest.raises(Unauthorized):  # a SCRAM secret is an exchange's transcript, not this
        await store.authenticate(
            Authenticate(mechanism="SCRAM-SHA-256", username="alice", secret=b"s3cret")
        )
    # Configured users may use data, not manage users or servers.
    alice = store.get_user("alice")
    assert allowed(alice, "send_messages") and allowed(alice, "manage_streams")
    assert not allowed(alice, "manage_users") and not allowed(alice, "read_users")


# -- user management ---------------------------------------------------------------------------


async def test_create_get_list_update_delete() -> None:
    clock = Clock()
    store = UserStore(clock=clock)
    perms = Permissions(global_permissions=GlobalPermissions(read_streams=True))
    bob = await store.create_user("bob", "secret", permissions=perms)
    assert (bob.id, bob.username, bob.status) == (1, "bob", UserStatus.ACTIVE)
    assert (bob.permissions, bob.created_at_us) == (perms, clock.now_us)
    carol = await store.create_user("carol", "secret", status=UserStatus.INACTIVE)
    assert carol.permissions == Permissions()  # nothing unless given
    assert store.get_user(1) == store.get_user("bob") == bob
    assert [u.username for u in store.list_users()] == ["iggy", "bob", "carol"]
    with pytest.raises(UserExists):
        await store.create_user("bob", "another")
    for missing in (99, "nobody"):
        with pytest.raises(UnknownUser):
            store.get_user(missing)

    with pytest.raises(UserInactive):
        await store.login("carol", "secret")
    assert store.update_user("carol", status=UserStatus.ACTIVE).status is UserStatus.ACTIVE
    assert (await store.login("carol", "secret")).id == carol.id

    renamed = store.update_user(bob.id, username="robert")
    assert (renamed.id, renamed.username, renamed.permissions) == (bob.id, "robert", perms)
    assert (await store.login("robert", "secret")).id == bob.id
    with pytest.raises(InvalidCredentials):
        await store.login("bob", "secret")
    with pytest.raises(UserExists):
        store.update_user("robert", username="carol")

    new_perms = Permissions(streams={3: StreamPermissions(read_stream=True)})
    assert store.update_permissions("robert", new_perms).permissions == new_perms

    assert store.delete_user("robert").id == bob.id
    with pytest.raises(UnknownUser):
        store.get_user(bob.id)
    with pytest.raises(UnknownUser):
        store.delete_user(bob.id)
    assert (await store.create_user("dave", "secret")).id == 3  # ids are not reused


async def test_the_root_user_is_protected() -> None:
    store = UserStore()
    with pytest.raises(InvalidRequest):
        store.delete_user(ROOT_ID)
    with pytest.raises(InvalidRequest):
        store.update_permissions("iggy", Permissions())
    with pytest.raises(InvalidRequest):
        store.update_user(ROOT_ID, status=UserStatus.INACTIVE)
    assert store.update_user(ROOT_ID, username="admin").username == "admin"
    assert store.get_user(ROOT_ID).permissions == Permissions.all()


async def test_names_and_passwords_are_validated_like_iggy() -> None:
    store = UserStore()
    for username, password in (("ab", "secret"), ("x" * 51, "secret"), ("bob", "ab")):
        with pytest.raises(InvalidRequest):
            await store.create_user(username, password)
    with pytest.raises(InvalidRequest):
        store.update_user(ROOT_ID, username="ab")
    assert store.list_users()[1:] == []


async def test_change_password_checks_the_current_one() -> None:
    store = UserStore()
    await store.create_user("bob", "first")
    with pytest.raises(InvalidCredentials):
        await store.change_password("bob", "wrong", "second")
    with pytest.raises(InvalidRequest):
        await store.change_password("bob", "first", "no")
    await store.change_password("bob", "first", "second")
    assert (await store.login("bob", "second")).username == "bob"
    with pytest.raises(InvalidCredentials):
        await store.login("bob", "first")
    with pytest.raises(UnknownUser):
        await store.change_password("nobody", "x", "second")


# -- permissions -------------------------------------------------------------------------------


def _only(*flags: str) -> GlobalPermissions:
    return GlobalPermissions(**dict.fromkeys(flags, True))


def _granted(p: Permissions, stream: int | None = None, topic: int | None = None) -> set[str]:
    return {a for a in ACTIONS if grants(p, a, stream, topic)}


DATA: set[str] = {"manage_streams", "read_streams", "manage_topics", "read_topics"}
MESSAGES: set[str] = {"poll_messages", "send_messages"}


@pytest.mark.parametrize(
    ("flag", "expected"),
    [
        ("manage_servers", {"manage_servers", "read_servers"}),
        ("read_servers", {"read_servers"}),
        ("manage_users", {"manage_users", "read_users"}),
        ("read_users", {"read_users"}),
        ("manage_streams", DATA | MESSAGES),
        ("read_streams", {"read_streams", "read_topics", "poll_messages"}),
        ("manage_topics", {"manage_topics", "read_topics"} | MESSAGES),
        ("read_topics", {"read_topics", "poll_messages"}),
        ("poll_messages", {"poll_messages"}),
        ("send_messages", {"send_messages"}),
    ],
)
def test_each_global_flag_grants_what_iggy_documents_it_includes(
    flag: str, expected: set[str]
) -> None:
    p = Permissions(global_permissions=_only(flag))
    assert _granted(p) == expected
    assert _granted(p, stream=1, topic=2) == expected  # global means every stream and topic


def test_stream_permissions_apply_to_that_stream_only() -> None:
    p = Permissions(streams={1: StreamPermissions(read_stream=True)})
    assert _granted(p) == set()  # e.g. listing all streams needs the global flag
    assert _granted(p, stream=1) == {"read_streams", "read_topics", "poll_messages"}
    assert _granted(p, stream=1, topic=9) == {"read_streams", "read_topics", "poll_messages"}
    assert _granted(p, stream=2, topic=9) == set()

    manage = Permissions(streams={1: StreamPermissions(manage_stream=True)})
    assert _granted(manage, stream=1) == DATA | MESSAGES
    assert not grants(manage, "manage_streams")  # creating a stream is a global right

    send = Permissions(streams={1: StreamPermissions(send_messages=True)})
    assert _granted(send, stream=1, topic=3) == {"send_messages"}


def test_topic_permissions_apply_to_that_topic_only() -> None:
    topic = TopicPermissions(manage_topic=True)
    p = Permissions(streams={1: StreamPermissions(topics={5: topic})})
    assert _granted(p, stream=1, topic=5) == {"manage_topics", "read_topics"} | MESSAGES
    assert _granted(p, stream=1, topic=6) == set()
    assert _granted(p, stream=1) == set()
    assert _granted(p, stream=2, topic=5) == set()
    reader = Permissions(
        streams={1: StreamPermissions(topics={5: TopicPermissions(read_topic=True)})}
    )
    assert _granted(reader, stream=1, topic=5) == {"read_topics", "poll_messages"}


def test_levels_only_add_never_take_away() -> None:
    p = Permissions(
        global_permissions=_only("poll_messages"),
        streams={1: StreamPermissions(topics={5: TopicPermissions(send_messages=True)})},
    )
    assert grants(p, "poll_messages", 1, 5)  # the empty stream entry does not revoke it
    assert _granted(p, stream=1, topic=5) == MESSAGES
    assert _granted(p, stream=1, topic=4) == {"poll_messages"}


def test_server_and_user_rights_are_only_global() -> None:
    everything = StreamPermissions(
        manage_stream=True, read_stream=True, manage_topics=True, read_topics=True,
        poll_messages=True, send_messages=True, topics={1: TopicPermissions(manage_topic=True)},
    )  # fmt: skip
    p = Permissions(streams={1: everything})
    only_global: list[Action] = ["manage_servers", "read_servers", "manage_users", "read_users"]
    assert not any(grants(p, a, 1, 1) for a in only_global)


async def test_an_inactive_user_is_allowed_nothing() -> None:
    store = UserStore()
    bob = await store.create_user("bob", "secret", permissions=Permissions.all())
    assert allowed(bob, "send_messages", 1, 1)
    bob = store.update_user("bob", status=UserStatus.INACTIVE)
    assert not any(allowed(bob, a, 1, 1) for a in ACTIONS)


# -- personal access tokens --------------------------------------------------------------------


async def test_tokens_create_login_list_delete() -> None:
    store = UserStore()
    bob = await store.create_user("bob", "secret")
    token = store.create_token("bob", "deploy")
    assert len(token) >= 40 and token != store.create_token(bob.id, "laptop")
    assert (await store.login_with_token(token)) == bob
    result = await store.authenticate(Authenticate(mechanism="TOKEN", secret=token.encode()))
    assert (result.user_id, result.username) == (bob.id, "bob")
    assert [(t.name, t.expiry_at_us) for t in store.list_tokens(bob.id)] == [
        ("deploy", None),
        ("laptop", None),
    ]
    with pytest.raises(AlreadyExists):
        store.create_token("bob", "deploy")
    for bad_name in ("ab", "x" * 31):
        with pytest.raises(InvalidRequest):
            store.create_token("bob", bad_name)
    assert store.list_tokens(ROOT_ID) == []  # names are per user
    store.create_token(ROOT_ID, "deploy")

    store.delete_token("bob", "deploy")
    with pytest.raises(InvalidToken):
        await store.login_with_token(token)
    with pytest.raises(NotFound):
        store.delete_token("bob", "deploy")
    assert [t.name for t in store.list_tokens("bob")] == ["laptop"]
    with pytest.raises(InvalidToken):
        await store.login_with_token("not-a-token")


async def test_tokens_expire_on_the_injected_clock() -> None:
    clock = Clock()
    store = UserStore(clock=clock)
    short = store.create_token(ROOT_ID, "short", expiry_us=60 * SECOND_US)
    forever = store.create_token(ROOT_ID, "forever")
    assert store.list_tokens(ROOT_ID)[1].expiry_at_us == clock.now_us + 60 * SECOND_US
    with pytest.raises(InvalidRequest):
        store.create_token(ROOT_ID, "zero", expiry_us=0)

    clock.now_us += 60 * SECOND_US - 1
    assert (await store.login_with_token(short)).id == ROOT_ID
    clock.now_us += 1
    with pytest.raises(InvalidToken):
        await store.login_with_token(short)
    assert (await store.login_with_token(forever)).id == ROOT_ID
    assert store.delete_expired_tokens() == 1
    assert [t.name for t in store.list_tokens(ROOT_ID)] == ["forever"]


async def test_tokens_follow_their_user() -> None:
    store = UserStore()
    await store.create_user("bob", "secret")
    token = store.create_token("bob", "deploy")
    store.update_user("bob", status=UserStatus.INACTIVE)
    with pytest.raises(UserInactive):
        await store.login_with_token(token)
    store.delete_user("bob")
    with pytest.raises(InvalidToken):
        await store.login_with_token(token)
    with pytest.raises(UnknownUser):
        store.create_token("bob", "deploy")


# -- persistence -------------------------------------------------------------------------------


async def test_the_file_round_trips_and_holds_no_secrets(tmp_path: Path) -> None:
    path = tmp_path / "data" / "users.json"
    clock = Clock()
    store = UserStore({"alice": "alice-pw"}, path=path, clock=clock)
    perms = Permissions(
        global_permissions=_only("read_servers"),
        streams={
            1: StreamPermissions(read_stream=True, topics={2: TopicPermissions(send_messages=True)})
        },
    )
    bob = await store.create_user("bob", "bob-password", permissions=perms)
    token = store.create_token("bob", "deploy", expiry_us=3600 * SECOND_US)
    await store.change_password(ROOT_ID, "iggy", "root-password")
    gone = await store.create_user("gone", "gone-password")
    store.delete_user(gone.id)

    text = path.read_text()
    for secret in ("alice-pw", "bob-password", "root-password", "gone-password", token):
        assert secret not in text
    assert json.loads(text)["version"] == 1
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    # no temporary file left; the lock file that gateways sharing the store take turns on
    assert sorted(p.name for p in path.parent.iterdir()) == [".users.json.lock", "users.json"]

    # Root credentials only apply on first start; the configuration keeps alice's password.
    again = UserStore({"alice": "alice-pw"}, path=path, root_password="ignored", clock=clock)
    assert again.list_users() == store.list_users()
    assert again.get_user("bob").permissions == perms
    assert (await again.login("bob", "bob-password")) == bob
    assert (await again.login("iggy", "root-password")).id == ROOT_ID
    assert (await again.login("alice", "alice-pw")).id == 1
    assert (await again.login_with_token(token)) == bob
    assert again.list_tokens("bob") == store.list_tokens("bob")
    assert (await again.create_user("next", "password")).id == gone.id + 1


async def test_the_configuration_stays_authoritative_for_its_users(tmp_path: Path) -> None:
    path = tmp_path / "users.json"
    store = UserStore({"alice": "old"}, path=path)
    await store.change_password("alice", "old", "changed-over-iggy")
    again = UserStore({"alice": "rotated"}, path=path)
    assert (await again.login("alice", "rotated")).id == 1
    with pytest.raises(InvalidCredentials):
        await again.login("alice", "changed-over-iggy")


def test_a_foreign_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "users.json"
    path.write_text('{"version": 99}')
    with pytest.raises(ValueError, match="not a streamgate user store"):
        UserStore(path=path)


# -- one file, several gateways ----------------------------------------------------------------


async def test_gateways_sharing_the_file_see_each_others_users(tmp_path: Path) -> None:
    """Two stores on one file, as two gateways on one volume: what either creates, changes or
    deletes, the other authenticates accordingly; changes from both are kept, ids unique."""
    path = tmp_path / "users.json"
    a = UserStore({"svc": "svc-pw"}, path=path)
    b = UserStore({"svc": "svc-pw"}, path=path)
    alice = await a.create_user("alice", "alice-pw")
    assert (await b.login("alice", "alice-pw")).id == alice.id
    bob = await b.create_user("bob", "bob-pw")  # b's change is made on top of a's
    assert bob.id != alice.id
    assert {u.username for u in a.list_users()} >= {"alice", "bob", "svc"}
    token = a.create_token("bob", "ci-deploy")
    assert (await b.login_with_token(token)).username == "bob"
    b.update_user("alice", status=UserStatus.INACTIVE)
    with pytest.raises(UserInactive):
        await a.login("alice", "alice-pw")
    a.delete_user("bob")
    with pytest.raises(InvalidToken):
        await b.login_with_token(token)
    with pytest.raises(InvalidCredentials):
        await b.login("bob", "bob-pw")
    # A name taken through the other gateway is refused, not stored twice.
    with pytest.raises(UserExists):
        await b.create_user("alice", "other-pw")
    names = [u.username for u in UserStore(path=path).list_users()]
    assert sorted(names) == sorted(set(names))


async def test_users_are_found_by_name_through_renames_deletions_and_reloads(
    tmp_path: Path,
) -> None:
    """Finding a user by name (every request) goes through an index of names: a rename, a
    deletion, a name given again and another gateway's change all find the right user."""
    path = tmp_path / "users.json"
    a, b = UserStore(path=path), UserStore(path=path)
    alice = await a.create_user("alice", "alice-pw")
    bob = await a.create_user("bob", "bob-pw")
    assert a.get_user("alice").id == alice.id and a.get_user("bob").id == bob.id
    a.update_user("alice", username="carol")
    assert a.get_user("carol").id == alice.id
    with pytest.raises(UnknownUser):
        a.get_user("alice")
    a.delete_user("bob")
    with pytest.raises(UnknownUser):
        a.get_user("bob")
    again = await a.create_user("bob", "bob-pw-2")
    assert again.id != bob.id and a.get_user("bob").id == again.id
    # Another gateway on the file sees a's rename at its next lookup, and a sees b's.
    assert (await b.login("carol", "alice-pw")).id == alice.id
    b.update_user("carol", username="dave")
    assert (await a.login("dave", "alice-pw")).id == alice.id
    with pytest.raises(InvalidCredentials):
        await a.login("carol", "alice-pw")
    many = [await a.create_user(f"user{i:02d}", "pw-pw-pw") for i in range(20)]
    assert all(a.get_user(u.username).id == u.id for u in many)


class CountingGuard(LoginGuard):
    """A real LoginGuard that counts the password hashes it runs."""

    def __init__(self) -> None:
        super().__init__()
        self.hashes = 0

    async def hash(self, fn: Callable[[], T], *, queue: bool = True) -> T:
        self.hashes += 1
        return await super().hash(fn, queue=queue)


async def test_a_successful_password_login_is_remembered_not_hashed_again() -> None:
    clock, guard = Clock(), CountingGuard()
    store = UserStore(clock=clock, guard=guard, login_cache_s=300)
    alice = await store.create_user("alice", "alice-pw")

    async def hashes(login: Awaitable[object]) -> int:
        before = guard.hashes
        await login
        return guard.hashes - before

    assert await hashes(store.login("alice", "alice-pw")) == 1
    assert await hashes(store.login("alice", "alice-pw")) == 0
    with pytest.raises(InvalidCredentials):  # a wrong password is always hashed
        await store.login("alice", "wrong-pw")
    # A changed password: the old one never logs in from what was remembered.
    await store.set_password("alice", "new-alice-pw")
    with pytest.raises(InvalidCredentials):
        await store.login("alice", "alice-pw")
    assert await hashes(store.login("alice", "new-alice-pw")) == 1
    assert await hashes(store.login("alice", "new-alice-pw")) == 0
    # Remembered for login_cache_s only.
    clock.now_us += 301 * SECOND_US
    assert await hashes(store.login("alice", "new-alice-pw")) == 1
    # A deactivated user is refused, a deleted one unknown, however recently it logged in.
    store.update_user("alice", status=UserStatus.INACTIVE)
    with pytest.raises(UserInactive):
        await store.login("alice", "new-alice-pw")
    store.update_user("alice", status=UserStatus.ACTIVE)
    store.delete_user(alice.id)
    with pytest.raises(InvalidCredentials):
        await store.login("alice", "new-alice-pw")
    await store.create_user("alice", "new-alice-pw")  # the same name and password, a new user
    fresh = await store.login("alice", "new-alice-pw")
    assert fresh.id != alice.id


async def test_without_the_login_cache_every_login_is_hashed() -> None:
    guard = CountingGuard()
    store = UserStore(guard=guard)  # login_cache_s=0
    await store.create_user("bob", "bob-pw-pw")
    before = guard.hashes
    for _ in range(3):
        await store.login("bob", "bob-pw-pw")
    assert guard.hashes - before == 3
