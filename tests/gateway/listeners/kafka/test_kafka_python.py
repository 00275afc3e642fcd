"""kafka-python 3.0.12 (pure Python, blocking) against the gateway's Kafka listener; plus a raw
idempotent-producer retry over a socket (kafka.md §1.2: kafka-python's producer is idempotent by
default, so InitProducerId and sequence checks are on its normal path)."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
import trio
from kafka import KafkaConsumer, KafkaProducer  # type: ignore[import-untyped]
from kafka.admin import (  # type: ignore[import-untyped]
    ConfigResource,
    ConfigResourceType,
    KafkaAdminClient,
)
from kafka.errors import TopicAlreadyExistsError  # type: ignore[import-untyped]
from kafka.structs import TopicPartition  # type: ignore[import-untyped]

from gateway.app import Running
from protocols.kafka import Record, encode_batch
from tests.helpers.kafka_raw import RawKafka

from .conftest import bootstrap, in_thread

# kafka-python compresses snappy/lz4/zstd with python-snappy, lz4 and zstandard (pinned dev
# dependencies); without them its producer refuses the codec, and these tests fail.
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
OUT_OF_ORDER_SEQUENCE_NUMBER = 45


def _produce(servers: str, topic: str, values: list[bytes], codec: str) -> list[int]:
    """Send keyed records with headers, flush, and return the offsets the broker assigned."""
    # The default config apart from the codec and timeouts: acks=all, idempotence on (kafka.md
    # §1.4 trap 9).
    p = KafkaProducer(bootstrap_servers=servers, request_timeout_ms=15000, max_block_ms=20000,
                      compression_type=None if codec == "none" else codec)  # fmt: skip
    try:
        assert p.config["enable_idempotence"] is True
        futures = [
            p.send(topic, value=v, key=b"k%d" % i, headers=[("h", b"%d" % i), ("i", b"x" * i)])
            for i, v in enumerate(values)
        ]
        p.flush(timeout=30)
        offsets = [f.get(timeout=5).offset for f in futures]
        # The idempotent path really ran: a producer id from InitProducerId, sequences used.
        tm = p._transaction_manager
        assert tm.producer_id_and_epoch.producer_id >= 0
        assert tm.sequence_number(TopicPartition(topic, 0)) == len(values)
        return offsets
    finally:
        p.close(timeout=10)


def _consume(servers: str, topic: str, group: str, n: int) -> list[Any]:
    """Join ``group``, read ``n`` records (from its committed offset or the earliest), commit."""
    c = KafkaConsumer(topic, bootstrap_servers=servers, group_id=group,
                      auto_offset_reset="earliest", enable_auto_commit=False,
                      request_timeout_ms=20000)  # fmt: skip
    got: list[Any] = []
    try:
        deadline = time.monotonic() + 40
        while len(got) < n:
            assert time.monotonic() < deadline, f"timed out after {len(got)} of {n} records"
            for records in c.poll(timeout_ms=1000).values():
                got.extend(records)
        c.commit()
        assert c.committed(TopicPartition(topic, 0)) == got[-1].offset + 1
        # Nothing beyond what was produced.
        assert not any(c.poll(timeout_ms=300).values())
    finally:
        c.close()
    return got


@pytest.mark.parametrize("codec", CODECS)
async def test_produce_consume_commit_resume(gateway: Running, codec: str) -> None:
    servers = bootstrap(gateway)
    topic, group = f"kp-{codec}", f"g-{uuid.uuid4().hex[:8]}"
    first = [b"value-%d-" % i + bytes(range(256)) * (i % 3) for i in range(200)]
    offsets = await in_thread(lambda: _produce(servers, topic, first, codec))
    assert offsets == list(range(len(first)))

    got = await in_thread(lambda: _consume(servers, topic, group, len(first)))
    assert [r.value for r in got] == first
    assert [r.offset for r in got] == list(range(len(first)))
    assert [r.key for r in got] == [b"k%d" % i for i in range(len(first))]
    assert got[7].headers == [("h", b"7"), ("i", b"x" * 7)]
    assert got[0].headers == [("h", b"0"), ("i", b"")]
    assert all(r.timestamp > 0 for r in got)

    second = [b"more-%d" % i for i in range(50)]
    offsets = await in_thread(lambda: _produce(servers, topic, second, codec))
    assert offsets == list(range(len(first), len(first) + len(second)))
    resumed = await in_thread(lambda: _consume(servers, topic, group, len(second)))
    assert [r.value for r in resumed] == second  # nothing before the committed offset
    assert resumed[0].offset == len(first)


async def test_admin(gateway: Running) -> None:
    servers = bootstrap(gateway)

    def work() -> None:
        admin = KafkaAdminClient(bootstrap_servers=servers, request_timeout_ms=15000)
        try:
            # kafka-python infers broker 2.3 from our ApiVersions (kafka.md §1.4 trap 7), so it
            # wants explicit counts (CreateTopics v4's -1 defaults need 2.4).
            admin.create_topics({"adm": {"num_partitions": 2, "replication_factor": 1,
                                         "configs": {"retention.ms": "3600000"}}})  # fmt: skip
            with pytest.raises(TopicAlreadyExistsError):
                admin.create_topics({"adm": {"num_partitions": 2, "replication_factor": 1}})
            assert "adm" in admin.list_topics()
            (described,) = admin.describe_topics(["adm"])
            assert len(described["partitions"]) == 2

            admin.create_partitions({"adm": 5})
            (described,) = admin.describe_topics(["adm"])
            assert sorted(p["partition_index"] for p in described["partitions"]) == [0, 1, 2, 3, 4]

            res = ConfigResource(ConfigResourceType.TOPIC, "adm")
            every = admin.describe_configs([res], config_filter="all")["topic"]["adm"]
            assert every["retention.ms"]["value"] == "3600000"
            assert every["cleanup.policy"]["value"] == "delete"
            # Only what was set at creation counts as modified (the config_source is right).
            modified = admin.describe_configs([res])["topic"]["adm"]
            assert "retention.ms" in modified
            assert "cleanup.policy" not in modified

            admin.delete_topics(["adm"])
            assert "adm" not in admin.list_topics()
        finally:
            admin.close()

    await in_thread(work)


async def test_groups_listed_and_described(gateway: Running) -> None:
    servers = bootstrap(gateway)
    await in_thread(lambda: _produce(servers, "kp-grp", [b"x"] * 3, "none"))

    def work() -> None:
        c = KafkaConsumer("kp-grp", bootstrap_servers=servers, group_id="kp-described",
                          auto_offset_reset="earliest", enable_auto_commit=False)  # fmt: skip
        admin = KafkaAdminClient(bootstrap_servers=servers, request_timeout_ms=15000)
        try:
            deadline = time.monotonic() + 40
            got: list[Any] = []
            while len(got) < 3:
                assert time.monotonic() < deadline, "the group consumer got nothing"
                for records in c.poll(timeout_ms=1000).values():
                    got.extend(records)
            c.commit()

            listed = [g for g in admin.list_groups() if g["group_id"] == "kp-described"]
            assert [g["protocol_type"] for g in listed] == ["consumer"], listed
            desc = admin.describe_groups(["kp-described"])["kp-described"]
            assert desc["error"] is None
            assert desc["group_state"] == "Stable"
            assert desc["protocol_type"] == "consumer"
            (member,) = desc["members"]
            assert member["member_metadata"]["topics"] == ["kp-grp"]
            assert member["member_assignment"]["assigned_partitions"] == [
                {"topic": "kp-grp", "partitions": [0]}
            ]
            offsets = admin.list_group_offsets({"kp-described": None})
            assert offsets["kp-described"][TopicPartition("kp-grp", 0)].offset == 3
        finally:
            admin.close()
            c.close()

    await in_thread(work)


# --- an idempotent retry over a raw socket -------------------------------------------------------


def _records(start: int, n: int) -> list[Record]:
    return [
        Record(
            offset_delta=i, timestamp_delta=i, key=b"k%d" % (start + i), value=b"v%d" % (start + i)
        )
        for i in range(n)
    ]


async def test_idempotent_retry_is_not_stored_twice(gateway: Running) -> None:
    host, port = gateway.address("kafka")
    topic = "raw-idem"
    with trio.fail_after(30):
        stream = await trio.open_tcp_stream(host, port)
        async with stream:
            raw = RawKafka(stream)
            create = {
                "topics": [
                    {
                        "name": topic,
                        "num_partitions": 1,
                        "replication_factor": 1,
                        "assignments": [],
                        "configs": [],
                    }
                ],
                "timeout": 10000,
            }
            created = await raw.ask(19, 4, create)
            assert [(t.name, t.error_code.value) for t in created.topics] == [(topic, 0)]

            init = await raw.ask(22, 1, {"transactional_id": None, "transaction_timeout": 60000})
            assert init.error_code.value == 0
            pid, epoch = init.producer_id, init.producer_epoch
            assert pid >= 0
            assert epoch == 0

            def produce(base_sequence: int, records: list[Record]) -> dict[str, Any]:
                batch = encode_batch(
                    records,
                    base_timestamp_ms=int(time.time() * 1000),
                    producer_id=pid,
                    producer_epoch=epoch,
                    base_sequence=base_sequence,
                )
                partition = {"index": 0, "records": batch}
                return {
                    "transactional_id": None,
                    "acks": -1,
                    "timeout": 10000,
                    "topic_data": [{"name": topic, "partition_data": [partition]}],
                }

            async def send(request: dict[str, Any]) -> tuple[int, int]:
                (topic_response,) = (await raw.ask(0, 7, request)).responses
                (part,) = topic_response.partition_responses
                return part.error_code.value, part.base_offset

            first = produce(0, _records(0, 5))
            assert await send(first) == (0, 0)
            # The same request again (a retry after a lost response): acknowledged with the
            # original offset, not appended.
            assert await send(first) == (0, 0)
            assert await send(produce(5, _records(5, 3))) == (0, 5)
            # A late retry of an older batch, still among the last five: the same again.
            assert await send(first) == (0, 0)

            # A gap: sequence 8 is next, 20 skips ahead.
            error, _ = await send(produce(20, _records(20, 2)))
            assert error == OUT_OF_ORDER_SEQUENCE_NUMBER

            latest = {
                "replica_id": -1,
                "isolation_level": 0,
                "topics": [
                    {"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}
                ],
            }
            (lt,) = (await raw.ask(2, 3, latest)).topics
            (lp,) = lt.partitions
            assert (lp.error_code.value, lp.offset) == (0, 8)

    # A real consumer sees each record once.
    servers = bootstrap(gateway)

    def read() -> list[Any]:
        c = KafkaConsumer(bootstrap_servers=servers, auto_offset_reset="earliest",
                          enable_auto_commit=False, group_id=None)  # fmt: skip
        try:
            c.assign([TopicPartition(topic, 0)])
            got: list[Any] = []
            deadline = time.monotonic() + 30
            while len(got) < 8:
                assert time.monotonic() < deadline, f"timed out after {len(got)} records"
                for records in c.poll(timeout_ms=1000).values():
                    got.extend(records)
            assert not any(c.poll(timeout_ms=300).values())
            return got
        finally:
            c.close()

    got = await in_thread(read)
    assert [(r.offset, r.key, r.value) for r in got] == [
        (i, b"k%d" % i, b"v%d" % i) for i in range(8)
    ]
