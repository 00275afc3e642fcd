"""apache-iggy 0.9.0: user management and the permissions the gateway enforces."""

from __future__ import annotations

import time

import pytest
from apache_iggy import (
    GlobalPermissions,
    Permissions,
    StreamPermissions,
    TopicPermissions,
    UserStatus,
)

from gateway.app import Running

from .conftest import ROOT_ID, ROOT_USER, Clients, get_me, run_iggy

READ_ONLY = Permissions(GlobalPermissions(read_streams=True, read_servers=True))


async def test_user_lifecycle(gateway: Running) -> None:
    async def scenario(clients: Clients) -> None:
        root = await clients.connect()
        before_us = time.time_ns() // 1000
        per_stream = Permissions(
            GlobalPermissions(read_users=True),
            {
                7: StreamPermissions(
                    read_stream=True, topics={3: TopicPermissions(send_messages=True)}
                )
            },
        )
        created = await root.create_user("alice", "alice-pw-1", UserStatus.Active, per_stream)
        assert (created.username, created.status, created.permissions) == (
            "alice", UserStatus.Active, per_stream,
        )  # fmt: skip
        assert created.id != ROOT_ID
        assert created.created_at >= before_us

        by_name, by_id = await root.get_user("alice"), await root.get_user(created.id)
        for found in (by_name, by_id):
            assert found is not None
            assert (found.id, found.username, found.created_at, found.permissions) == (
                created.id, "alice", created.created_at, per_stream,
            )  # fmt: skip
        users = {u.username: (u.id, u.status) for u in await root.get_users()}
        assert users == {
            ROOT_USER: (ROOT_ID, UserStatus.Active),
            "alice": (created.id, UserStatus.Active),
            # The RabbitMQ Stream listener's default user lives in the same store.
            "guest": (users["guest"][0], UserStatus.Active),
        }
        with pytest.raises(RuntimeError):
            await root.create_user("alice", "another-pw")  # the name is taken

        await root.update_user("alice", username="alicia")
        assert await root.get_user("alice") is None
        renamed = await root.get_user(created.id)
        assert renamed is not None and renamed.username == "alicia"
        await root.update_permissions("alicia", READ_ONLY)
        updated = await root.get_user("alicia")
        assert updated is not None and updated.permissions == READ_ONLY

        await root.change_password("alicia", "alice-pw-1", "alice-pw-2")
        with pytest.raises(RuntimeError):
            await root.change_password("alicia", "wrong-current", "alice-pw-3")
        alicia = await clients.connect(username=None)
        with pytest.raises(RuntimeError, match="Invalid credentials"):
            await alicia.login_user("alicia", "alice-pw-1")
        await alicia.login_user("alicia", "alice-pw-2")
        assert (await get_me(alicia)).user_id == created.id

        await root.update_user("alicia", status=UserStatus.Inactive)
        inactive = await root.get_user("alicia")
        assert inactive is not None and inactive.status == UserStatus.Inactive
        late = await clients.connect(username=None)
        with pytest.raises(RuntimeError, match="Unauthenticated"):  # UserInactive eviction, §3.4
            await late.login_user("alicia", "alice-pw-2")

        await root.delete_user("alicia")
        assert await root.get_user(created.id) is None
        assert [u.username for u in await root.get_users()] == [ROOT_USER, "guest"]
        gone = await clients.connect(username=None)
        with pytest.raises(RuntimeError, match="Invalid credentials"):
            await gone.login_user("alicia", "alice-pw-2")

    await run_iggy(gateway, scenario)


async def test_user_created_without_permissions_has_none(gateway: Running) -> None:
    # UserInfoDetails.permissions is "None when the user has none assigned" (the .pyi), and
    # update_permissions(user, None) "removes them entirely".
    async def scenario(clients: Clients) -> None:
        root = await clients.connect()
        created = await root.create_user("bare", "bare-pw-1")
        assert created.permissions is None
        fetched = await root.get_user("bare")
        assert fetched is not None and fetched.permissions is None
        await root.update_permissions("bare", READ_ONLY)
        await root.update_permissions("bare", None)
        cleared = await root.get_user("bare")
        assert cleared is not None and cleared.permissions is None

    await run_iggy(gateway, scenario)


async def test_permissions_are_enforced(gateway: Running) -> None:
    async def scenario(clients: Clients) -> None:
        root = await clients.connect()
        await root.create_user("nobody", "nobody-pw")
        await root.create_user("reader", "reader-pw", permissions=READ_ONLY)
        nobody = await clients.connect("nobody", "nobody-pw")
        reader = await clients.connect("reader", "reader-pw")

        with pytest.raises(RuntimeError, match="Unauthorized"):
            await nobody.create_stream("not-allowed")
        with pytest.raises(RuntimeError, match="Unauthorized"):
            await nobody.get_streams()
        with pytest.raises(RuntimeError, match="Unauthorized"):
            await reader.create_stream("not-allowed")
        await root.create_stream("allowed")
        assert [s.name for s in await reader.get_streams()] == ["allowed"]
        with pytest.raises(RuntimeError, match="Unauthorized"):
            await reader.delete_stream("allowed")
        assert [s.name for s in await root.get_streams()] == ["allowed"]

    await run_iggy(gateway, scenario)


async def test_permission_changes_apply_to_open_sessions(gateway: Running) -> None:
    # The real server checks every request against the user's current permissions, so a grant
    # or a revocation takes effect without a new login.
    async def scenario(clients: Clients) -> None:
        root = await clients.connect()
        await root.create_user("grantee", "grantee-pw", permissions=READ_ONLY)
        grantee = await clients.connect("grantee", "grantee-pw")
        with pytest.raises(RuntimeError, match="Unauthorized"):
            await grantee.create_stream("later")
        await root.update_permissions(
            "grantee", Permissions(GlobalPermissions(manage_streams=True))
        )
        await grantee.create_stream("later")
        await root.update_permissions("grantee", READ_ONLY)
        with pytest.raises(RuntimeError, match="Unauthorized"):
            await grantee.delete_stream("later")
        assert [s.name for s in await root.get_streams()] == ["later"]

    await run_iggy(gateway, scenario)
