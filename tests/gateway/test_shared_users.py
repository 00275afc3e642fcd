"""Users shared by gateways (issue 14): two ``streamgate run`` processes on one Kafka broker
(a real Tansu) with one ``auth.users_file``, as replicas on a shared volume or sidecars mounting
one Secret-backed file. Users created through either gateway's Iggy listener, at the same time,
all exist with distinct ids in both; one created through one gateway logs in through the other
(Iggy and Kafka SASL/PLAIN, with apache-iggy and confluent-kafka).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

import trio
from apache_iggy import (
    GlobalPermissions,
    IggyClient,
    Permissions,
    TcpConfig,
    TcpReconnectionConfig,
    UserStatus,
)
from confluent_kafka import Producer

from tests.helpers.gateways import Gateway, running_gateways
from tests.helpers.tansu import running_tansu

LIMIT_S = 60.0
EACH = 5
# What the created users may do: list users, create the topic and produce to it.
ALLOWED = Permissions(GlobalPermissions(
    read_users=True, manage_topics=True, read_topics=True, read_streams=True, send_messages=True,
))  # fmt: skip
QUICK = TcpReconnectionConfig(interval=timedelta(milliseconds=50), reestablish_after=timedelta(0))


async def _iggy(gateway: Gateway, username: str, password: str) -> IggyClient:
    client = IggyClient(TcpConfig(server_address=gateway.addresses["iggy"], reconnection=QUICK))
    await client.connect()
    await client.login_user(username, password)
    return client


def create_users(gateway: Gateway, prefix: str) -> list[int]:
    """``EACH`` users created through ``gateway`` as root; their ids."""

    async def scenario() -> list[int]:
        root = await _iggy(gateway, "iggy", "iggy")
        ids = [
            (await root.create_user(
                f"{prefix}-{i}", f"{prefix}-pw-{i}", UserStatus.Active, ALLOWED)).id
            for i in range(EACH)
        ]  # fmt: skip
        await root.ping()
        return ids

    return asyncio.run(asyncio.wait_for(scenario(), 30))


def usernames(gateway: Gateway, username: str, password: str) -> dict[str, int]:
    async def scenario() -> dict[str, int]:
        client = await _iggy(gateway, username, password)
        users = {u.username: u.id for u in await client.get_users()}
        await client.ping()
        return users

    return asyncio.run(asyncio.wait_for(scenario(), 30))


def produce_as(gateway: Gateway, username: str, password: str) -> None:
    producer = Producer({
        "bootstrap.servers": gateway.kafka, "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "PLAIN", "sasl.username": username, "sasl.password": password,
    })  # fmt: skip
    producer.produce("shared-users", b"hello")
    assert producer.flush(20) == 0


async def test_users_created_through_either_gateway_log_in_through_both(tmp_path: Path) -> None:
    users_file = tmp_path / "shared" / "users.json"
    async with running_tansu(tmp_path) as tansu, running_gateways(
        tansu.url, tmp_path, 2,
        "--set", f"auth.users_file={users_file}", "--set", "listeners.kafka.sasl=true",
    ) as (a, b):  # fmt: skip
        with trio.fail_after(LIMIT_S):
            async with trio.open_nursery() as nursery:  # both gateways at once
                for gateway, prefix in ((a, "via-a"), (b, "via-b")):
                    nursery.start_soon(trio.to_thread.run_sync, create_users, gateway, prefix)
            seen_a = await trio.to_thread.run_sync(usernames, a, "iggy", "iggy")
            # A user created through a lists (and logs in) through b.
            seen_b = await trio.to_thread.run_sync(usernames, b, "via-a-0", "via-a-pw-0")
            await trio.to_thread.run_sync(produce_as, b, "via-a-1", "via-a-pw-1")
            await trio.to_thread.run_sync(produce_as, a, "via-b-2", "via-b-pw-2")
    created = {f"{p}-{i}" for p in ("via-a", "via-b") for i in range(EACH)}
    assert created <= set(seen_a) and seen_a == seen_b
    assert len(set(seen_a.values())) == len(seen_a)  # ids unique
