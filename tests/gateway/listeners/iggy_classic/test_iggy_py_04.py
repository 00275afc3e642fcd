"""iggy-py 0.4.0 (Rust SDK 0.6.202, the classic framing with the old message layout, era A of
iggy.md §9.3) against the gateway, in .venv-iggypy04 (scripts/iggy_py_04.py): everything its
API offers. Its stream and topic ids are its own, and its partitions are 1-based."""

from __future__ import annotations

from gateway.app import Running
from gateway.model import Read, Topic

from .conftest import OlderClient, polled

TEXTS = ["ünïcødé ✓", "plain", "x" * 1000, '{"json": [1, 2]}']


async def test_stream_topic_send_and_every_poll(gateway: Running, iggypy04: OlderClient) -> None:
    out = await iggypy04.run(
        gateway, "basics", stream="a-basics", stream_id=21, topic="t", topic_id=4, payloads=TEXTS
    )
    assert out["ping"] is None
    assert out["duplicate_stream"].startswith("StreamNameAlreadyExists"), out
    assert out["missing_stream"] is None and out["missing_topic"] is None
    total = len(TEXTS) + 1
    # The ids it asked for, by id and by name.
    assert (
        out["stream_by_id"]
        == out["stream_by_name"]
        == {
            "id": 21,
            "name": "a-basics",
            "messages": total,
        }
    )
    assert out["topic_by_id"] == out["topic_by_name"] == {"id": 4, "name": "t", "messages": total}

    first = out["first"]
    assert polled(first) == [t.encode() for t in TEXTS]
    assert polled(first, "offset") == list(range(len(TEXTS)))
    assert polled(first, "length") == [len(t.encode()) for t in TEXTS]
    assert set(polled(first, "state")) == {"MessageState.Available"}
    ids = polled(first, "id")
    assert all(ids) and len(set(ids)) == len(ids)  # sent as 0: the server assigned them
    assert out["offset_1"] == first[1:3]
    assert out["last_1"] == first[-1:]
    assert out["next_2"] == first[:2]
    assert out["next_rest"] == first[2:]
    assert out["next_none"] == []
    assert polled(out["partition_2"]) == [b"second"]
    assert polled(out["partition_2"], "offset") == [0]
    # Partition 0 does not exist in a 1-based era.
    assert out["partition_0"].startswith("PartitionNotFound"), out

    # Its partitions 1 and 2 are the canonical 0 and 1.
    assert gateway.backend is not None
    for partition, expected in ((0, [t.encode() for t in TEXTS]), (1, [b"second"])):
        read = await gateway.backend.read(
            Read(topic=Topic("a-basics", "t"), partition=partition, offset=0)
        )
        assert [m.value for b in read.batches for m in b.messages] == expected
