"""apache-iggy 0.8.0 (Rust SDK 0.10, the classic framing, era B of iggy.md §9.2) against the
gateway, in .venv-iggy08 (scripts/apache_iggy_08.py).

What its Python API cannot do (user headers, ids of the sender's choosing, Balanced and
MessagesKey partitioning, leaving a group, reading a stored offset) goes out in the same era-B
frames from the client role of ``protocols.iggy`` (tests/helpers/iggy_wire.py), and is read
back with the real 0.8.0 and 0.9.0 clients.
"""

from __future__ import annotations

from xxhash import xxh32_intdigest

from gateway.app import Running
from gateway.model import Read, Topic
from protocols.iggy import (
    Balanced,
    ConsumerGroupDetails,
    ConsumerKind,
    ConsumerOffsetInfo,
    CreateConsumerGroup,
    CreateStream,
    CreateTopic,
    Era,
    GetConsumerGroup,
    GetConsumerOffset,
    JoinConsumerGroup,
    LeaveConsumerGroup,
    Message,
    MessagesKey,
    PartitionId,
    Partitioning,
    PollingKind,
    PollingStrategy,
    SendMessages,
)
from protocols.iggy import Consumer as WireConsumer
from tests.helpers.iggy_wire import IggyWire

from .conftest import BINARY, HEADERS, OlderClient, hexes, polled

TIMESTAMP_2020_US = 1_577_836_800_000_000


async def era_b(gateway: Running, stream: str, topic: str, partitions: int) -> IggyWire:
    """A logged-in era-B connection, and a fresh stream and topic."""
    wire = await IggyWire.logged_in(gateway, Era.B)
    await wire.ok(CreateStream(name=stream))
    await wire.ok(CreateTopic(stream_id=stream, name=topic, partitions_count=partitions))
    return wire


def sending(stream: str, topic: str, partitioning: Partitioning, *msgs: Message) -> SendMessages:
    return SendMessages(stream_id=stream, topic_id=topic, partitioning=partitioning, messages=msgs)


async def test_stream_topic_send_and_every_poll(gateway: Running, iggy08: OlderClient) -> None:
    out = await iggy08.run(gateway, "basics", stream="b-basics", topic="t", payloads=hexes(BINARY))
    assert out["ping"] is None
    assert out["duplicate_stream"].startswith("StreamNameAlreadyExists"), out
    assert out["duplicate_topic"].startswith("TopicNameAlreadyExists"), out
    assert out["missing_stream"] is None and out["missing_topic"] is None
    total = len(BINARY) + 1
    stream = out["stream_by_name"]
    assert stream == {"id": stream["id"], "name": "b-basics", "topics": 1, "messages": total}
    assert out["stream_by_id"] == stream
    topic = {"id": 0, "name": "t", "partitions": 3, "messages": total}  # ids are 0-based (§9)
    assert out["topic_by_name"] == out["topic_by_id"] == topic

    first = out["first"]
    assert polled(first) == BINARY
    assert polled(first, "offset") == list(range(len(BINARY)))
    assert set(polled(first, "partition_id")) == {1}
    assert polled(first, "length") == [len(p) for p in BINARY]
    ids = polled(first, "id")
    assert all(ids) and len(set(ids)) == len(ids)  # sent as 0: the server assigned them (§9.2)
    stamps = polled(first, "timestamp")
    assert stamps == sorted(stamps) and stamps[0] > TIMESTAMP_2020_US
    assert out["offset_2"] == first[2:4]
    assert out["last_2"] == first[-2:]
    # Next with auto-commit: the default consumer goes on where it stopped.
    assert out["next_3"] == first[:3]
    assert out["next_rest"] == first[3:]
    assert out["next_none"] == []
    (other,) = out["partition_2"]
    assert (bytes.fromhex(other["payload"]), other["offset"], other["partition_id"]) == (
        b"other",
        0,
        2,
    )
    assert out["partition_0"] == []
    assert out["missing_partition"].startswith("PartitionNotFound"), out

    # Era B partition 1 is the canonical partition 1.
    assert gateway.backend is not None
    stored = await gateway.backend.read(Read(topic=Topic("b-basics", "t"), partition=1, offset=0))
    values = [m.value for b in stored.batches for m in b.messages]
    assert values == BINARY


async def test_wrong_password_and_connection_string(gateway: Running, iggy08: OlderClient) -> None:
    wire = await era_b(gateway, "b-logins", "t", 1)
    await wire.aclose()
    out = await iggy08.run(gateway, "logins", stream="b-logins")
    assert out == {"wrong_password": "InvalidCredentials", "auto_login_stream": "b-logins"}


async def test_consumer_group_partitions_left_to_the_server(
    gateway: Running, iggy08: OlderClient
) -> None:
    stream, topic, group = "b-group", "t", "workers"
    wire = await era_b(gateway, stream, topic, 3)
    sent: dict[tuple[int, int], bytes] = {}
    for partition in range(3):
        payloads = [b"p%d-m%d" % (partition, i) for i in range(partition + 2)]
        msgs = [Message(id=0, payload=p) for p in payloads]
        await wire.ok(sending(stream, topic, PartitionId(id=partition), *msgs))
        sent.update({(partition, i): p for i, p in enumerate(payloads)})

    out = await iggy08.run(gateway, "group", stream=stream, topic=topic, group=group, count=9)
    assert (out["name"], out["stream"], out["topic"]) == (group, stream, topic)
    got = {(m["partition_id"], m["offset"]): bytes.fromhex(m["payload"]) for m in out["messages"]}
    assert got == sent  # every partition, each message once
    for partition in range(3):  # in offset order within each partition
        offsets = [m["offset"] for m in out["messages"] if m["partition_id"] == partition]
        assert offsets == list(range(partition + 2))
    assert out["stored"] == {"0": 1, "1": 2, "2": 3}

    # What it stored is on the gateway: GetConsumerOffset (120) for the group, per partition.
    gid = WireConsumer(kind=ConsumerKind.CONSUMER_GROUP, id=group)
    for partition, last in ((0, 1), (1, 2), (2, 3)):
        info = await wire.ok(
            GetConsumerOffset(
                consumer=gid, stream_id=stream, topic_id=topic, partition_id=partition
            )
        )
        assert info == ConsumerOffsetInfo(
            partition_id=partition, current_offset=last, stored_offset=last
        )

    # More messages: a new member of the group (a new process) starts after the stored offsets.
    more = {(1, 3): b"late-1", (2, 4): b"late-2"}
    for (partition, _), payload in more.items():
        await wire.ok(
            sending(stream, topic, PartitionId(id=partition), Message(id=0, payload=payload))
        )
    out = await iggy08.run(gateway, "group", stream=stream, topic=topic, group=group, count=2)
    got = {(m["partition_id"], m["offset"]): bytes.fromhex(m["payload"]) for m in out["messages"]}
    assert got == more
    assert out["stored"] == {"1": 3, "2": 4}
    await wire.aclose()


async def test_join_poll_leave_in_era_b_frames(gateway: Running) -> None:
    """The group commands the 0.8.0 Python API keeps to itself, in its frames (§9.2)."""
    stream, topic, group = "b-leave", "t", "g"
    wire = await era_b(gateway, stream, topic, 2)
    for partition in range(2):
        await wire.ok(
            sending(
                stream,
                topic,
                PartitionId(id=partition),
                Message(id=0, payload=b"in %d" % partition),
            )
        )
    other = await IggyWire.logged_in(gateway, Era.B)
    await other.ok(CreateConsumerGroup(stream_id=stream, topic_id=topic, name=group))
    target = {"stream_id": stream, "topic_id": topic, "group_id": group}

    async def members() -> list[tuple[int, ...]]:
        details = await other.ok(GetConsumerGroup(**target))
        assert isinstance(details, ConsumerGroupDetails)
        assert details.group.members_count == len(details.members)
        return [m.partitions for m in details.members]

    assert await members() == []
    await wire.ok(JoinConsumerGroup(**target))
    assert await members() == [(0, 1)]  # the only member owns both partitions
    member = WireConsumer(kind=ConsumerKind.CONSUMER_GROUP, id=group)
    next_ = PollingStrategy(kind=PollingKind.NEXT)
    seen = []
    for _ in range(2):  # the server hands the member's partitions out in turn
        body = await wire.poll(
            stream, topic, None, consumer=member, strategy=next_, auto_commit=True
        )
        seen += [(body.partition_id, m.offset, m.payload) for m in body.messages]
    assert sorted(seen) == [(0, 0, b"in 0"), (1, 0, b"in 1")]
    await wire.ok(LeaveConsumerGroup(**target))
    assert await members() == []
    await wire.aclose()
    await other.aclose()


async def test_headers_ids_and_server_side_partitioning(
    gateway: Running, iggy08: OlderClient
) -> None:
    stream, topic = "b-headers", "t"
    wire = await era_b(gateway, stream, topic, 3)
    # Ids of the sender's choosing and typed headers, to an explicit partition.
    chosen = [Message(id=(7 << 100) + i, payload=b"h%d" % i, headers=HEADERS) for i in range(3)]
    await wire.ok(sending(stream, topic, PartitionId(id=0), *chosen))
    # Balanced: the server picks, one batch to one partition; MessagesKey: XxHash32 % count (§2).
    for i in range(3):
        await wire.ok(sending(stream, topic, Balanced(), Message(id=0, payload=b"bal%d" % i)))
    key = b"customer-42"
    for i in range(2):
        keyed = Message(id=0, payload=b"key%d" % i)
        await wire.ok(sending(stream, topic, MessagesKey(key=key), keyed))

    # The real 0.8.0 client reads the ids and payloads back.
    read = await iggy08.run(
        gateway, "read", stream=stream, topic=topic, partition=0, strategy="first", count=3
    )
    assert [(m["id"], bytes.fromhex(m["payload"])) for m in read] == [
        (m.id, m.payload) for m in chosen
    ]
    # Era-B frames read the headers back, typed and in order.
    body = await wire.poll(stream, topic, 0, count=3)
    assert [(m.id, m.payload, m.headers) for m in body.messages] == [
        (m.id, m.payload, HEADERS) for m in chosen
    ]
    # Where the server put the balanced and keyed messages.
    where: dict[bytes, int] = {}
    for partition in range(3):
        msgs = await iggy08.run(
            gateway, "read", stream=stream, topic=topic, partition=partition, strategy="first"
        )
        where.update({bytes.fromhex(m["payload"]): partition for m in msgs})
    assert sorted(where[b"bal%d" % i] for i in range(3)) == [0, 1, 2]  # round robin
    assert where[b"key0"] == where[b"key1"] == xxh32_intdigest(key) % 3
    await wire.aclose()
