"""iggy-py 0.4.0 (Rust SDK 0.6.202: the legacy framing with the old message layout, era A of
iggy.md §9.3) against a gateway, run with .venv-iggypy04's python by
tests/gateway/listeners/iggy_classic.

Its whole API (§1.2): login, create_stream with an id, get_stream, create_topic with an id,
get_topic, send_messages to a partition and poll_messages as the default consumer. Partition
ids are 1-based in this era. ``SendMessage`` takes text only (sent as UTF-8): payloads come in
as text, and go out as the hex of the bytes polled.
"""

from __future__ import annotations

from typing import Any

from _script import error_of, logged_in, main, poller
from iggy_py import IggyClient, PollingStrategy, SendMessage


async def connect(address: str) -> IggyClient:
    client: IggyClient = await logged_in(IggyClient(address))
    return client


def details(d: Any) -> dict[str, Any] | None:
    """Stream and topic details alike; this SDK's TopicDetails names its count topics_count."""
    if d is None:
        return None
    return {"id": d.id, "name": d.name, "messages": d.messages_count}


def message(m: Any) -> dict[str, Any]:
    return {
        "payload": bytes(m.payload()).hex(),
        "offset": m.offset(),
        "id": m.id(),
        "state": str(m.state()),
        "timestamp": m.timestamp(),
        "length": m.length(),
    }


poll = poller(PollingStrategy, message)


async def basics(
    address: str, *, stream: str, stream_id: int, topic: str, topic_id: int, payloads: list[str]
) -> dict[str, Any]:
    """Create stream ``stream_id`` and its topic ``topic_id`` of 2 partitions, send
    ``payloads`` to partition 1 (the first) and "second" to partition 2, and poll them."""
    client = await connect(address)
    out: dict[str, Any] = {"ping": await error_of(client.ping())}
    await client.create_stream(stream, stream_id)
    out["duplicate_stream"] = await error_of(client.create_stream(stream, stream_id + 1))
    out["missing_stream"] = details(await client.get_stream(f"{stream}-missing"))
    await client.create_topic(stream_id, topic, 2, None, topic_id, None)
    out["missing_topic"] = details(await client.get_topic(stream_id, f"{topic}-missing"))
    messages = [SendMessage(p) for p in payloads]
    await client.send_messages(stream_id, topic_id, 1, messages)
    await client.send_messages(stream, topic, 2, [SendMessage("second")])
    out["stream_by_id"] = details(await client.get_stream(stream_id))
    out["stream_by_name"] = details(await client.get_stream(stream))
    out["topic_by_id"] = details(await client.get_topic(stream_id, topic_id))
    out["topic_by_name"] = details(await client.get_topic(stream, topic))
    out["first"] = await poll(client, stream_id, topic_id, 1, "first")
    out["offset_1"] = await poll(client, stream_id, topic_id, 1, "offset", 1, count=2)
    out["last_1"] = await poll(client, stream_id, topic_id, 1, "last", count=1)
    out["next_2"] = await poll(client, stream_id, topic_id, 1, "next", count=2, auto_commit=True)
    out["next_rest"] = await poll(client, stream_id, topic_id, 1, "next", auto_commit=True)
    out["next_none"] = await poll(client, stream_id, topic_id, 1, "next", auto_commit=True)
    out["partition_2"] = await poll(client, stream, topic, 2, "first")
    out["partition_0"] = await error_of(poll(client, stream_id, topic_id, 0, "first"))
    return out


async def send(
    address: str, *, stream: str | int, topic: str | int, partition: int, payloads: list[str]
) -> dict[str, Any]:
    client = await connect(address)
    messages = [SendMessage(p) for p in payloads]
    return {"error": await error_of(client.send_messages(stream, topic, partition, messages))}


async def read(address: str, **kwargs: Any) -> list[dict[str, Any]]:
    return await poll(await connect(address), **kwargs)


if __name__ == "__main__":
    main({"basics": basics, "send": send, "read": read})
