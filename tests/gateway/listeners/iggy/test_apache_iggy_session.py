"""apache-iggy 0.9.0: connecting, logging in (password and personal access token), logging out,
the refusal of unauthenticated requests, and the metrics every Iggy command feeds."""

from __future__ import annotations

import pytest
from apache_iggy import IggyClient, PollingStrategy, SendMessage

from gateway.app import Running

from .conftest import (
    CREATE_PAT,
    DELETE_PAT,
    GET_PATS,
    ROOT_ID,
    ROOT_PASSWORD,
    ROOT_USER,
    Clients,
    Reader,
    get_me,
    name,
    payloads,
    poll,
    run_iggy,
)


async def test_connect_ping_and_password_login(gateway: Running) -> None:
    async def scenario(clients: Clients) -> None:
        client = await clients.connect(username=None)
        await client.ping()  # answered before any login (iggy.md §1.1)
        await client.login_user(ROOT_USER, ROOT_PASSWORD)
        assert await client.get_streams() == []
        assert (await get_me(client)).user_id == ROOT_ID

        other = await clients.connect(username=None)
        with pytest.raises(RuntimeError, match="Invalid credentials"):
            await other.login_user(ROOT_USER, "not-the-password")
        with pytest.raises(RuntimeError, match="Invalid credentials"):
            await other.login_user("nobody-here", "whatever")
        # A refused login ends that session only; the next attempt starts afresh.
        await other.login_user(ROOT_USER, ROOT_PASSWORD)
        assert (await get_me(other)).user_id == ROOT_ID

    await run_iggy(gateway, scenario)


async def test_personal_access_token_login(gateway: Running) -> None:
    # apache-iggy 0.9.0 has no method for tokens: they are made with the raw command 42
    # (body [name Name][expiry u64], 0 = server default) and listed with 41.
    async def scenario(clients: Clients) -> None:
        root = await clients.connect()
        r = Reader(await root.send_binary_request(CREATE_PAT, name("ci-token") + bytes(8)))
        token = r.text("B")
        assert r.done and len(token) >= 16
        r = Reader(await root.send_binary_request(GET_PATS, b""))
        assert r.text("B") == "ci-token"
        r.unpack("Q")  # expiry_at
        assert r.done

        by_token = clients.track(
            IggyClient.from_connection_string(f"iggy+tcp://{token}@{clients.address}")
        )
        await by_token.connect()  # auto-login with the token
        assert (await get_me(by_token)).user_id == ROOT_ID
        await by_token.create_stream("made-with-a-token")
        assert [s.name for s in await root.get_streams()] == ["made-with-a-token"]

        wrong = clients.track(
            IggyClient.from_connection_string(f"iggy+tcp://iggypat-wrong{token}@{clients.address}")
        )
        with pytest.raises(RuntimeError, match="Invalid personal access token"):
            await wrong.connect()

        assert await root.send_binary_request(DELETE_PAT, name("ci-token")) == b""
        assert await root.send_binary_request(GET_PATS, b"") == b""
        revoked = clients.track(
            IggyClient.from_connection_string(f"iggy+tcp://{token}@{clients.address}")
        )
        with pytest.raises(RuntimeError, match="Invalid personal access token"):
            await revoked.connect()

    await run_iggy(gateway, scenario)


async def test_logout_then_request(gateway: Running) -> None:
    async def scenario(clients: Clients) -> None:
        # login_user() leaves auto-login off: after a logout the client has nothing to replay,
        # so the gateway's status 40 surfaces as an error (and nothing hangs).
        manual = await clients.connect()
        await manual.create_stream("before-logout")
        await manual.logout_user()
        with pytest.raises(RuntimeError, match="Unauthenticated"):
            await manual.get_streams()
        with pytest.raises(RuntimeError, match="Unauthenticated"):
            await manual.create_stream("after-logout")
        await manual.login_user(ROOT_USER, ROOT_PASSWORD)
        assert [s.name for s in await manual.get_streams()] == ["before-logout"]

        # Credentials in the connection string do not change that: an explicit logout is not
        # undone by the client's auto-login (observed: no reconnect, the 40 is raised).
        auto = clients.track(
            IggyClient.from_connection_string(
                f"iggy+tcp://{ROOT_USER}:{ROOT_PASSWORD}@{clients.address}"
            )
        )
        await auto.connect()
        assert (await get_me(auto)).user_id == ROOT_ID
        await auto.logout_user()
        with pytest.raises(RuntimeError, match="Unauthenticated"):
            await auto.get_streams()
        await auto.login_user(ROOT_USER, ROOT_PASSWORD)
        assert [s.name for s in await auto.get_streams()] == ["before-logout"]

    await run_iggy(gateway, scenario)


async def test_unauthenticated_requests_are_refused(gateway: Running) -> None:
    async def scenario(clients: Clients) -> None:
        anonymous = await clients.connect(username=None)
        await anonymous.ping()
        with pytest.raises(RuntimeError, match="Unauthenticated"):
            await anonymous.get_streams()
        with pytest.raises(RuntimeError, match="Unauthenticated"):
            await anonymous.create_stream("sneaky")
        with pytest.raises(RuntimeError, match="Unauthenticated"):
            await anonymous.get_stats()
        root = await clients.connect()
        assert await root.get_streams() == []  # nothing was created

    await run_iggy(gateway, scenario)


def _command_counts(running: Running) -> dict[tuple[str, str, str, str], float]:
    """(command, wire_command, outcome, error_type) -> observations, for protocol="iggy"."""
    assert running.metrics is not None
    counts: dict[tuple[str, str, str, str], float] = {}
    for metric in running.metrics.registry.collect():
        if metric.name != "streamgate_command_duration_seconds":
            continue
        for sample in metric.samples:
            labels = sample.labels
            if sample.name.endswith("_count") and labels["protocol"] == "iggy" and sample.value:
                key = (
                    labels["command"], labels["wire_command"], labels["outcome"],
                    labels["error_type"],
                )  # fmt: skip
                counts[key] = sample.value
    return counts


async def test_metrics_count_iggy_commands(gateway: Running) -> None:
    async def scenario(clients: Clients) -> None:
        client = await clients.connect()
        await client.create_stream("metered")
        with pytest.raises(RuntimeError, match="already exists"):
            await client.create_stream("metered")
        await client.create_topic("metered", "t", 1)
        await client.send_messages("metered", "t", 0, [SendMessage(b"a"), SendMessage(b"b")])
        await client.send_messages("metered", "t", 0, [SendMessage(b"c")])
        got = await poll(client, "metered", "t", PollingStrategy.First())
        assert payloads(got) == [b"a", b"b", b"c"]

    await run_iggy(gateway, scenario)
    counts = _command_counts(gateway)
    assert counts[("create_stream", "create_stream", "ok", "")] == 1
    assert counts[("create_stream", "create_stream", "error", "already_exists")] == 1
    assert counts[("create_topic", "create_topic", "ok", "")] == 1
    assert counts[("append", "send_messages", "ok", "")] == 2
    assert counts[("read", "poll_messages", "ok", "")] == 1
    assert counts[("authenticate", "login_register", "ok", "")] == 1
    assert counts[("ping", "ping", "ok", "")] >= 2  # the first heartbeat and the settling ping
    assert gateway.metrics is not None
    registry = gateway.metrics.registry
    assert registry.get_sample_value("streamgate_messages_in_total", {"protocol": "iggy"}) == 3
    assert registry.get_sample_value("streamgate_messages_out_total", {"protocol": "iggy"}) == 3
