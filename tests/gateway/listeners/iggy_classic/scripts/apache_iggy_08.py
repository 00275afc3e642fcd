"""apache-iggy 0.8.0 (Rust SDK 0.10: the legacy framing, era B of iggy.md §9.2) against a
gateway, run with .venv-iggy08's python by tests/gateway/listeners/iggy_classic.

Its Python API is smaller than 0.9.0's: ``SendMessage(data)`` only (no headers, no id: the
server assigns one), ``send_messages`` takes a partition id, ``poll_messages`` polls as the
default single consumer, and a consumer group is only reachable through ``consumer_group()``,
whose polls leave the partition to the server (§9.2) and which has no leave call.
"""

from __future__ import annotations

import asyncio
from typing import Any

from _script import error_of, logged_in, main, poller
from apache_iggy import (
    AutoCommit,
    IggyClient,
    PollingStrategy,
    ReceiveMessage,
    SendMessage,
    StreamDetails,
    TopicDetails,
)


async def connect(address: str) -> IggyClient:
    client: IggyClient = await logged_in(IggyClient(address))
    return client


def message(m: ReceiveMessage) -> dict[str, Any]:
    return {
        "payload": m.payload().hex(),
        "offset": m.offset(),
        "id": m.id(),
        "partition_id": m.partition_id(),
        "timestamp": m.timestamp(),
        "length": m.length(),
    }


def stream_info(s: StreamDetails | None) -> dict[str, Any] | None:
    if s is None:
        return None
    return {"id": s.id, "name": s.name, "topics": s.topics_count, "messages": s.messages_count}


def topic_info(t: TopicDetails | None) -> dict[str, Any] | None:
    if t is None:
        return None
    return {
        "id": t.id,
        "name": t.name,
        "partitions": t.partitions_count,
        "messages": t.messages_count,
    }


poll = poller(PollingStrategy, message)


async def basics(address: str, *, stream: str, topic: str, payloads: list[str]) -> dict[str, Any]:
    """Login, create and describe a stream and a topic of 3 partitions, send ``payloads`` to
    partition 1 and "other" to partition 2, then poll partition 1 every way the API offers."""
    client = await connect(address)
    out: dict[str, Any] = {"ping": await error_of(client.ping())}
    await client.create_stream(stream)
    out["duplicate_stream"] = await error_of(client.create_stream(stream))
    out["missing_stream"] = stream_info(await client.get_stream(f"{stream}-missing"))
    await client.create_topic(stream, topic, 3)
    out["duplicate_topic"] = await error_of(client.create_topic(stream, topic, 1))
    out["missing_topic"] = topic_info(await client.get_topic(stream, f"{topic}-missing"))
    await client.send_messages(stream, topic, 1, [SendMessage(bytes.fromhex(p)) for p in payloads])
    await client.send_messages(stream, topic, 2, [SendMessage("other")])
    by_name = await client.get_stream(stream)
    assert by_name is not None
    out["stream_by_name"] = stream_info(by_name)
    out["stream_by_id"] = stream_info(await client.get_stream(by_name.id))
    topic_by_name = await client.get_topic(stream, topic)
    assert topic_by_name is not None
    out["topic_by_name"] = topic_info(topic_by_name)
    out["topic_by_id"] = topic_info(await client.get_topic(by_name.id, topic_by_name.id))
    out["first"] = await poll(client, stream, topic, 1, "first")
    out["offset_2"] = await poll(client, stream, topic, 1, "offset", 2, count=2)
    out["last_2"] = await poll(client, stream, topic, 1, "last", count=2)
    # Next as the default consumer, committing what it polls: 3, then the rest, then nothing.
    out["next_3"] = await poll(client, stream, topic, 1, "next", count=3, auto_commit=True)
    out["next_rest"] = await poll(client, stream, topic, 1, "next", auto_commit=True)
    out["next_none"] = await poll(client, stream, topic, 1, "next", auto_commit=True)
    out["partition_2"] = await poll(client, stream, topic, 2, "first")
    out["partition_0"] = await poll(client, stream, topic, 0, "first")
    out["missing_partition"] = await error_of(poll(client, stream, topic, 3, "first"))
    return out


async def group(
    address: str, *, stream: str, topic: str, group: str, count: int, batch: int = 10
) -> dict[str, Any]:
    """Consume ``count`` messages through the consumer group ``group`` (created and joined by
    the client, partitions left to the server), then store the last offset of each partition
    it read from. Auto-commit is off, so only what this stores is kept."""
    client = await connect(address)
    consumer = await client.consumer_group(
        group, stream, topic, polling_strategy=PollingStrategy.Next(), batch_length=batch,
        auto_commit=AutoCommit.Disabled(),
    )  # fmt: skip
    got: list[dict[str, Any]] = []

    async def take() -> None:
        async for m in consumer.iter_messages():
            got.append(message(m))
            if len(got) == count:
                return

    await asyncio.wait_for(take(), 20)
    last: dict[int, int] = {}
    for m in got:
        last[m["partition_id"]] = max(m["offset"], last.get(m["partition_id"], -1))
    for partition, offset in sorted(last.items()):
        await consumer.store_offset(offset, partition)
    return {
        "name": consumer.name(),
        "stream": consumer.stream(),
        "topic": consumer.topic(),
        "messages": got,
        "stored": {str(p): consumer.get_last_stored_offset(p) for p in sorted(last)},
    }


async def send(
    address: str, *, stream: str, topic: str, partition: int, payloads: list[str]
) -> dict[str, Any]:
    client = await connect(address)
    messages = [SendMessage(bytes.fromhex(p)) for p in payloads]
    return {"error": await error_of(client.send_messages(stream, topic, partition, messages))}


async def read(address: str, **kwargs: Any) -> list[dict[str, Any]]:
    return await poll(await connect(address), **kwargs)


async def logins(address: str, *, stream: str) -> dict[str, Any]:
    """A wrong password, then auto-login from a connection string."""
    client = IggyClient(address)
    await client.connect()
    wrong = await error_of(client.login_user("iggy", "not-the-password"))
    auto = IggyClient.from_connection_string(f"iggy://iggy:iggy@{address}")
    await auto.connect()
    found = await auto.get_stream(stream)
    return {"wrong_password": wrong, "auto_login_stream": found and found.name}


if __name__ == "__main__":
    main({"basics": basics, "group": group, "send": send, "read": read, "logins": logins})
