"""apache-iggy 0.9.0: server statistics, the option catalog, cluster metadata and the client
listings (GetMe 20, GetClient 21, GetClients 22), whose bytes are parsed here (iggy.md §5.1)."""

from __future__ import annotations

import os
import socket
import struct
import time

from apache_iggy import GlobalPermissions, Permissions, SendMessage

from gateway.app import Running

from .conftest import (
    GET_CLIENT,
    GET_CLIENTS,
    GET_CLUSTER_METADATA,
    ROOT_ID,
    Clients,
    Reader,
    get_me,
    read_client,
    run_iggy,
)


async def test_stats_count_what_was_created(gateway: Running) -> None:
    async def scenario(clients: Clients) -> None:
        client = await clients.connect()
        before_us = time.time_ns() // 1000
        for stream in ("alpha", "beta"):
            await client.create_stream(stream)
        await client.create_topic("alpha", "one", 1)
        await client.create_topic("alpha", "two", 2)
        await client.create_topic("beta", "three", 3)
        await client.send_messages("alpha", "two", 1, [SendMessage(b"x" * 100)] * 4)
        await client.create_consumer_group("beta", "three", "readers")

        stats = await client.get_stats()
        assert (stats.streams_count, stats.topics_count, stats.partitions_count) == (2, 3, 6)
        assert stats.messages_count == 4
        assert stats.messages_size_bytes >= 400
        assert stats.consumer_groups_count == 1
        assert stats.clients_count == 1
        assert stats.process_id == os.getpid()  # the gateway runs in this test process
        assert stats.hostname == socket.gethostname()
        assert stats.iggy_server_version
        assert stats.start_time <= before_us
        assert stats.run_time.total_seconds() >= 0
        assert stats.memory_usage > 0 and stats.total_memory >= stats.available_memory > 0
        assert stats.threads_count >= 1
        assert stats.cache_metrics == {}

    await run_iggy(gateway, scenario)


async def test_describe_options(gateway: Running) -> None:
    async def scenario(clients: Clients) -> None:
        client = await clients.connect()
        topic = {spec.key: spec for spec in await client.describe_options("topic")}
        assert {"compression_algorithm", "message_expiry", "max_topic_size", "durability"} <= set(
            topic
        )
        assert topic["message_expiry"].kind == "uint64"
        assert topic["compression_algorithm"].kind == "string"
        assert all(spec.description for spec in topic.values())
        assert await client.describe_options("stream") == []
        assert await client.describe_options("user") == []

    await run_iggy(gateway, scenario)


async def test_cluster_metadata_names_the_gateway(gateway: Running) -> None:
    host, port = gateway.address("iggy")

    async def scenario(clients: Clients) -> None:
        client = await clients.connect()  # the login itself already asked for it (§3.8)
        r = Reader(await client.send_binary_request(GET_CLUSTER_METADATA, b""))
        assert r.text()  # cluster name
        assert r.unpack("I") == 1  # one node: the client never redirects
        assert r.text()  # node name
        assert r.text() == host
        tcp, _quic, _http, _ws = (r.unpack("H") for _ in range(4))
        assert tcp == port
        assert (r.unpack("B"), r.unpack("B")) == (0, 0)  # leader, healthy
        assert r.done

    await run_iggy(gateway, scenario)


async def test_get_me_get_client_get_clients(gateway: Running) -> None:
    async def scenario(clients: Clients) -> None:
        root = await clients.connect()
        viewer = await root.create_user(
            "viewer", "viewer-pw", permissions=Permissions(GlobalPermissions(read_streams=True))
        )
        other = await clients.connect("viewer", "viewer-pw")
        await root.create_stream("s")
        await root.create_topic("s", "t", 2)
        await root.create_consumer_group("s", "t", "g")
        await root.join_consumer_group("s", "t", "g")

        me = await get_me(root)
        assert (me.user_id, me.transport) == (ROOT_ID, 1)  # 1 = TCP
        host, _, port = me.address.rpartition(":")
        assert host == "127.0.0.1" and 0 < int(port) < 65536
        stream_id = (await root.get_stream("s")).id  # type: ignore[union-attr]
        topic_id = (await root.get_topic("s", "t")).id  # type: ignore[union-attr]
        group_id = (await root.get_consumer_group("s", "t", "g")).id  # type: ignore[union-attr]
        assert me.groups_count == 1
        assert me.groups == ((stream_id, topic_id, group_id),)
        theirs = await get_me(other)
        assert theirs.user_id == viewer.id != ROOT_ID
        assert theirs.client_id != me.client_id and theirs.address != me.address
        assert theirs.groups == ()

        r = Reader(await root.send_binary_request(GET_CLIENTS, b""))
        listed = []
        while not r.done:
            listed.append(read_client(r, details=False))
        by_id = {c.client_id: c for c in listed}
        assert len(by_id) == len(listed) == 2
        assert by_id[me.client_id].user_id == ROOT_ID
        assert by_id[me.client_id].groups_count == 1
        assert (by_id[theirs.client_id].user_id, by_id[theirs.client_id].address) == (
            viewer.id,
            theirs.address,
        )

        r = Reader(await root.send_binary_request(GET_CLIENT, struct.pack("<I", theirs.client_id)))
        assert read_client(r, details=True) == theirs and r.done
        missing = max(by_id) + 1000
        assert await root.send_binary_request(GET_CLIENT, struct.pack("<I", missing)) == b""

    await run_iggy(gateway, scenario)
