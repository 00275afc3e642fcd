"""The user store under Kafka's SCRAM credential APIs (KIP-554): a credential set from a salted
password, an account made by one (no permissions, no password), an existing account's password
retired by one, deletions, one write for all, the file (and a file from before SCRAM) after."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from gateway.coordination import UserStore
from gateway.model import Authenticate, InvalidCredentials, InvalidRequest, NotFound
from gateway.model.permissions import Permissions
from gateway.model.users import ScramCredential
from protocols._wire.scram import HASHES, keys_from_salted_password
from tests.gateway.coordination.test_users_scram import _pre_scram_file, scram_login

SALT = b"0123456789abcdef"


def credential(mechanism: str, password: str, iterations: int = 4096) -> ScramCredential:
    """What the Kafka listener stores for an upsertion: the client salts, the server derives."""
    salted = hashlib.pbkdf2_hmac(HASHES[mechanism], password.encode(), SALT, iterations)
    keys = keys_from_salted_password(mechanism, salted, salt=SALT, iterations=iterations)
    return ScramCredential(
        salt=keys.salt, iterations=keys.iterations, stored_key=keys.stored_key,
        server_key=keys.server_key,
    )  # fmt: skip


async def plain(store: UserStore, username: str, password: str) -> str:
    cmd = Authenticate(mechanism="PLAIN", username=username, secret=password.encode())
    return (await store.authenticate(cmd)).username


async def test_an_upsertion_creates_a_scram_only_account(tmp_path: Path) -> None:
    store = UserStore(root_password="root-pw", path=tmp_path / "u.json")
    refused = store.alter_scram_credentials(
        {}, {"carol": ("SCRAM-SHA-512", credential("SCRAM-SHA-512", "carol-pw", 8192))}
    )
    assert refused == {}
    assert store.get_user("carol").permissions == Permissions()
    assert store.scram_iterations()["carol"] == {"SCRAM-SHA-512": 8192}
    assert await scram_login(store, "SCRAM-SHA-512", "carol", "carol-pw") == "carol"
    for login in (
        scram_login(store, "SCRAM-SHA-256", "carol", "carol-pw"),
        plain(store, "carol", "carol-pw"),
        plain(store, "carol", ""),  # no password is not an empty password
        store.change_password("carol", "", "new-password"),
    ):
        with pytest.raises(InvalidCredentials):
            await login
    # Another gateway on the file, and a restart: the same.
    again = UserStore(root_password="root-pw", path=tmp_path / "u.json")
    assert await scram_login(again, "SCRAM-SHA-512", "carol", "carol-pw") == "carol"
    text = (tmp_path / "u.json").read_text()
    assert "carol-pw" not in text
    carol = next(u for u in json.loads(text)["users"] if u["username"] == "carol")
    assert carol["password"] == "" and sorted(carol["scram"]) == ["SCRAM-SHA-512"]
    # An administrator's reset gives it a password (and both SCRAM credentials) again.
    await again.set_password("carol", "carol-reset")
    assert await plain(again, "carol", "carol-reset") == "carol"
    assert await scram_login(again, "SCRAM-SHA-256", "carol", "carol-reset") == "carol"


async def test_an_upsertion_for_an_existing_user_retires_its_password(tmp_path: Path) -> None:
    store = UserStore(root_password="root-pw", path=tmp_path / "u.json")
    await store.create_user("bob", "bob-old", permissions=Permissions.all())
    store.alter_scram_credentials(
        {}, {"bob": ("SCRAM-SHA-256", credential("SCRAM-SHA-256", "bob-new", 10000))}
    )
    assert store.get_user("bob").permissions == Permissions.all()  # the account is the same
    assert store.scram_iterations()["bob"] == {"SCRAM-SHA-256": 10000, "SCRAM-SHA-512": 4096}
    assert await scram_login(store, "SCRAM-SHA-256", "bob", "bob-new") == "bob"
    # the other mechanism keeps its credential, as Kafka keeps mechanisms apart
    assert await scram_login(store, "SCRAM-SHA-512", "bob", "bob-old") == "bob"
    for login in (
        scram_login(store, "SCRAM-SHA-256", "bob", "bob-old"),
        plain(store, "bob", "bob-old"),
        plain(store, "bob", "bob-new"),
    ):
        with pytest.raises(InvalidCredentials):
            await login


async def test_deletions_and_refusals_in_one_change(tmp_path: Path) -> None:
    store = UserStore({"alice": "alice-pw"}, root_password="root-pw", path=tmp_path / "u.json")
    refused = store.alter_scram_credentials(
        {"alice": "SCRAM-SHA-256", "nobody": "SCRAM-SHA-512"},
        {"ok": ("SCRAM-SHA-256", credential("SCRAM-SHA-256", "pw")),
         "dave": ("SCRAM-SHA-256", credential("SCRAM-SHA-256", "dave-pw"))},
    )  # fmt: skip
    assert sorted(refused) == ["nobody", "ok"]
    assert isinstance(refused["nobody"], NotFound)
    assert isinstance(refused["ok"], InvalidRequest)  # too short a name for a new account
    assert store.find_user("ok") is None
    assert store.scram_iterations()["alice"] == {"SCRAM-SHA-512": 4096}
    assert await scram_login(store, "SCRAM-SHA-256", "dave", "dave-pw") == "dave"
    with pytest.raises(InvalidCredentials):
        await scram_login(store, "SCRAM-SHA-256", "alice", "alice-pw")
    assert await plain(store, "alice", "alice-pw") == "alice"  # a deletion keeps the password
    again = store.alter_scram_credentials({"alice": "SCRAM-SHA-256"}, {})
    assert isinstance(again["alice"], NotFound)
    # Both gone: no credential left, so Describe does not list her; the account stays.
    store.alter_scram_credentials({"alice": "SCRAM-SHA-512"}, {})
    assert "alice" not in store.scram_iterations()
    assert store.find_user("alice") is not None


async def test_the_configuration_gives_a_configured_user_its_password_back(
    tmp_path: Path,
) -> None:
    path = tmp_path / "u.json"
    store = UserStore({"alice": "alice-pw"}, root_password="root-pw", path=path)
    store.alter_scram_credentials(
        {}, {"alice": ("SCRAM-SHA-512", credential("SCRAM-SHA-512", "kafka-pw"))}
    )
    with pytest.raises(InvalidCredentials):
        await plain(store, "alice", "alice-pw")
    restarted = UserStore({"alice": "alice-pw"}, root_password="root-pw", path=path)
    assert await plain(restarted, "alice", "alice-pw") == "alice"
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        assert await scram_login(restarted, mechanism, "alice", "alice-pw") == "alice"


async def test_a_store_from_before_scram_takes_kafka_credentials(tmp_path: Path) -> None:
    path = tmp_path / "users.json"
    _pre_scram_file(path, {"iggy": "iggy", "dave": "dave-pw"})
    store = UserStore(path=path)
    assert "dave" not in store.scram_iterations()  # no credential yet: not listed
    store.alter_scram_credentials(
        {}, {"dave": ("SCRAM-SHA-256", credential("SCRAM-SHA-256", "dave-kafka"))}
    )
    assert await scram_login(store, "SCRAM-SHA-256", "dave", "dave-kafka") == "dave"
    with pytest.raises(InvalidCredentials):
        await plain(store, "dave", "dave-pw")
