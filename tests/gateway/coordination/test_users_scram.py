"""SCRAM credentials in the user store: derived whenever a password is set, kept instead of the
password, verified at the end of an exchange; stores written before SCRAM still load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gateway.coordination import UserStore
from gateway.coordination.credentials import hash_password
from gateway.model import Authenticate, InvalidCredentials, UserInactive
from gateway.model.users import UserStatus
from protocols._wire.scram import ScramClient, ScramServer, parse_client_first

MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")


async def scram_login(store: UserStore, mechanism: str, username: str, password: str) -> str:
    """One whole exchange as the Kafka listener runs it; the logged-in user's name."""
    client = ScramClient(mechanism, username, password, nonce="client-nonce")
    first = parse_client_first(client.client_first())
    credential = store.scram_credential(mechanism, first.username)
    server = ScramServer(
        mechanism, first, salt=credential.salt, iterations=credential.iterations,
        server_nonce="server-nonce",
    )  # fmt: skip
    transcript = server.receive_client_final(client.client_final(server.server_first))
    result = await store.authenticate(
        Authenticate(mechanism=mechanism, username=first.username, secret=transcript)
    )
    client.check_server_final(server.server_final(transcript, credential.server_key))
    return result.username


@pytest.mark.parametrize("mechanism", MECHANISMS)
async def test_every_way_of_setting_a_password_gives_scram_keys(
    tmp_path: Path, mechanism: str
) -> None:
    store = UserStore({"alice": "from-config"}, root_password="root-pw", path=tmp_path / "u.json")
    assert await scram_login(store, mechanism, "iggy", "root-pw") == "iggy"
    assert await scram_login(store, mechanism, "alice", "from-config") == "alice"
    await store.create_user("bob", "bob-pw")
    assert await scram_login(store, mechanism, "bob", "bob-pw") == "bob"
    await store.change_password("bob", "bob-pw", "bob-new")
    assert await scram_login(store, mechanism, "bob", "bob-new") == "bob"
    with pytest.raises(InvalidCredentials):
        await scram_login(store, mechanism, "bob", "bob-pw")
    await store.set_password("bob", "bob-reset")
    assert await scram_login(store, mechanism, "bob", "bob-reset") == "bob"
    store.ensure_user("guest", "guest")
    assert await scram_login(store, mechanism, "guest", "guest") == "guest"
    # Another gateway on the same file verifies the same keys.
    other = UserStore({"alice": "from-config"}, root_password="root-pw", path=tmp_path / "u.json")
    assert await scram_login(other, mechanism, "bob", "bob-reset") == "bob"


async def test_the_file_keeps_keys_never_the_password(tmp_path: Path) -> None:
    path = tmp_path / "u.json"
    store = UserStore(path=path)
    await store.create_user("carol", "very-secret-password")
    text = path.read_text()
    assert "very-secret-password" not in text
    carol = next(u for u in json.loads(text)["users"] if u["username"] == "carol")
    assert sorted(carol["scram"]) == list(MECHANISMS)
    assert {c["iterations"] for c in carol["scram"].values()} == {4096}
    assert carol["scram"]["SCRAM-SHA-256"]["salt"] != carol["scram"]["SCRAM-SHA-512"]["salt"]


async def test_wrong_password_unknown_user_and_inactive_user_fail(tmp_path: Path) -> None:
    store = UserStore({"alice": "pw-alice"})
    with pytest.raises(InvalidCredentials):
        await scram_login(store, "SCRAM-SHA-256", "alice", "wrong")
    with pytest.raises(InvalidCredentials):
        await scram_login(store, "SCRAM-SHA-256", "nobody", "pw-alice")
    # An unknown name gets a fake salt that does not change between attempts (no probing).
    a = store.scram_credential("SCRAM-SHA-256", "nobody")
    b = store.scram_credential("SCRAM-SHA-256", "nobody")
    assert a.salt == b.salt and len(a.salt) == 24
    store.update_user("alice", status=UserStatus.INACTIVE)
    with pytest.raises(UserInactive):
        await scram_login(store, "SCRAM-SHA-512", "alice", "pw-alice")


def _pre_scram_file(path: Path, users: dict[str, str]) -> None:
    """A users.json as gateways before SCRAM wrote it: no "scram" key."""
    everything = dict.fromkeys(
        ["manage_servers", "read_servers", "manage_users", "read_users", "manage_streams",
         "read_streams", "manage_topics", "read_topics", "poll_messages", "send_messages"], True,
    )  # fmt: skip
    path.write_text(
        json.dumps(
            {
                "version": 1,
                "next_user_id": len(users),
                "users": [
                    {
                        "id": i,
                        "username": name,
                        "status": "active",
                        "created_at_us": 1,
                        "password": hash_password(password),
                        "tokens": [],
                        "permissions": {"global": everything, "streams": {}},
                    }
                    for i, (name, password) in enumerate(users.items())
                ],
            }
        )
    )


async def test_a_store_from_before_scram_loads_plain_works_until_the_password_is_set(
    tmp_path: Path,
) -> None:
    path = tmp_path / "users.json"
    _pre_scram_file(path, {"iggy": "iggy", "dave": "dave-pw", "erin": "erin-pw"})
    # erin is configured: the configuration names her password, so she gets keys at start.
    store = UserStore({"erin": "erin-pw"}, path=path)
    plain = Authenticate(mechanism="PLAIN", username="dave", secret=b"dave-pw")
    assert (await store.authenticate(plain)).username == "dave"
    with pytest.raises(InvalidCredentials):
        await scram_login(store, "SCRAM-SHA-256", "dave", "dave-pw")
    assert await scram_login(store, "SCRAM-SHA-256", "erin", "erin-pw") == "erin"
    # the root's configured password (the default here) still matches: keys at start too
    assert await scram_login(store, "SCRAM-SHA-512", "iggy", "iggy") == "iggy"
    await store.change_password("dave", "dave-pw", "dave-pw2")
    assert await scram_login(store, "SCRAM-SHA-256", "dave", "dave-pw2") == "dave"
