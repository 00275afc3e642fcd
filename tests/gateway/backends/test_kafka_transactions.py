"""Kafka transactions (KIP-98) through a gateway whose backend is a real broker (Tansu 0.6.0,
kafka.md §5): confluent-kafka's transactional producer and read_committed / read_uncommitted
consumers on the gateway, the broker's coordinator, markers and last stable offset behind it.
Also the backend's own ``Isolation.CLEAN`` reads (what every non-Kafka protocol gets)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from functools import partial
from pathlib import Path
from typing import TypeVar

import pytest
import trio
from confluent_kafka import (
    Producer,
)

from gateway.app import Running
from gateway.backends.kafka.backend import KafkaBackend, open_kafka
from gateway.model import (
    DEFAULT_STREAM,
    InitTransaction,
    Isolation,
    ListOffsets,
    OffsetSpec,
    Read,
    Topic,
)
from protocols.kafka import parse_header
from tests.gateway.listeners.test_connection import start
from tests.helpers.kafka_group_members import kafka_call
from tests.helpers.kafka_transactions import (
    CLIENT_S,
    create_topic,
    eos_step,
    fenced,
    read_isolated,
    txn_producer,
)
from tests.helpers.tansu import Tansu, running_tansu

pytestmark = pytest.mark.slow

T = TypeVar("T")
LIMIT_S = 60.0  # one client scenario, in its thread
MARKERS_S = 10.0  # for a committed transaction's markers to reach the partition

# Tansu 0.6.0 writes the commit and abort markers and keeps the last stable offset, but its
# Fetch never lists aborted transactions: a read_committed consumer on it directly gets aborted
# records. The backend (?broker=tansu) makes the list from the markers (kafka_isolation).
TANSU_NO_ABORTED_LIST = (
    "Tansu 0.6.0 answers Fetch (isolation_level 1) with an empty aborted_transactions list"
    " (the backend works around it with ?broker=tansu)"
)

TANSU_NO_KIP_360 = (
    "Tansu 0.6.0 answers InitProducerId v3+ with the transactional id's current producer id and"
    " epoch (KIP-360) UNKNOWN_SERVER_ERROR (-1) instead of bumping the epoch"
)


@pytest.fixture
async def tansu(tmp_path: Path) -> AsyncIterator[Tansu]:
    async with running_tansu(tmp_path) as started:
        yield started


@pytest.fixture
async def gateway(tmp_path: Path, tansu: Tansu, nursery: trio.Nursery) -> Running:
    return await start(nursery, tmp_path, **{"backend.url": tansu.url})


@pytest.fixture
async def backend(tansu: Tansu) -> AsyncIterator[KafkaBackend]:
    """A Kafka backend of its own on the same broker, for canonical reads."""
    async with open_kafka(tansu.url) as started:
        yield started


def servers(running: Running) -> str:
    host, port = running.address("kafka")
    return f"{host}:{port}"


async def in_thread(fn: Callable[[], T]) -> T:
    with trio.fail_after(LIMIT_S):
        return await trio.to_thread.run_sync(fn, abandon_on_cancel=True)


async def _clean(
    backend: KafkaBackend,
    topic: str,
    isolation: Isolation = Isolation.CLEAN,
    max_bytes: int = 1 << 20,
) -> list[bytes]:
    """Every value of partition 0 as a canonical reader gets it (records decoded)."""
    values: list[bytes] = []
    offset = 0
    with trio.fail_after(LIMIT_S):
        while True:
            result = await backend.read(
                Read(topic=Topic(DEFAULT_STREAM, topic), partition=0, offset=offset,
                     max_messages=1000, max_bytes=max_bytes, isolation=isolation)
            )  # fmt: skip
            messages = [m for b in result.batches for m in b.messages]
            if not messages:
                return values
            values += [m.value for m in messages]
            offset = messages[-1].offset + 1


def _commit_abort_commit(bootstrap: str, topic: str) -> None:
    """5 committed, 3 stored then aborted, 4 committed, by one transactional producer."""
    create_topic(bootstrap, topic)
    producer = txn_producer(bootstrap, f"tid-{topic}")
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, b"c1-%d" % i)
    producer.commit_transaction(CLIENT_S)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, b"ab-%d" % i)
    assert producer.flush(CLIENT_S) == 0  # stored, then aborted
    producer.abort_transaction(CLIENT_S)
    producer.begin_transaction()  # abort then go on: the same producer
    for i in range(4):
        producer.produce(topic, b"c2-%d" % i)
    producer.commit_transaction(CLIENT_S)


C1 = [b"c1-%d" % i for i in range(5)]
AB = [b"ab-%d" % i for i in range(3)]
C2 = [b"c2-%d" % i for i in range(4)]


async def test_transactional_commit(gateway: Running, backend: KafkaBackend) -> None:
    bootstrap = servers(gateway)

    def run() -> tuple[list[bytes], list[bytes]]:
        create_topic(bootstrap, "txc")
        producer = txn_producer(bootstrap, "tid-txc")
        for n in range(2):
            producer.begin_transaction()
            for i in range(3):
                producer.produce("txc", b"t%d-%d" % (n, i))
            producer.commit_transaction(CLIENT_S)
        return (
            read_isolated(bootstrap, "txc", "read_committed", expect=6, assign=True),
            read_isolated(bootstrap, "txc", "read_uncommitted", expect=6, assign=True),
        )

    committed, uncommitted = await in_thread(run)
    want = [b"t%d-%d" % (n, i) for n in range(2) for i in range(3)]
    assert committed == want
    assert uncommitted == want  # the markers are never a record to the application
    assert await _clean(backend, "txc") == want
    latest = ListOffsets(topic=Topic(DEFAULT_STREAM, "txc"), partition=0, spec=OffsetSpec.LATEST)
    # 3 records + 1 marker, twice: the high watermark is the last stable offset
    assert (await backend.list_offsets(latest)).offset == 8


async def test_read_uncommitted_sees_every_record(gateway: Running) -> None:
    bootstrap = servers(gateway)

    def run() -> list[bytes]:
        _commit_abort_commit(bootstrap, "txu")
        return read_isolated(bootstrap, "txu", "read_uncommitted", expect=12, assign=True)

    assert await in_thread(run) == C1 + AB + C2


async def test_read_committed_skips_an_aborted_transaction(gateway: Running) -> None:
    bootstrap = servers(gateway)

    def run() -> list[bytes]:
        _commit_abort_commit(bootstrap, "txa")
        return read_isolated(bootstrap, "txa", "read_committed", expect=9, assign=True)

    assert await in_thread(run) == C1 + C2


async def test_clean_reads_skip_an_aborted_transaction(
    gateway: Running, backend: KafkaBackend
) -> None:
    await in_thread(lambda: _commit_abort_commit(servers(gateway), "txk"))
    assert await _clean(backend, "txk") == C1 + C2


@pytest.mark.xfail(reason=TANSU_NO_ABORTED_LIST, strict=True)
async def test_the_broker_lists_the_aborted_transaction(gateway: Running, tansu: Tansu) -> None:
    """What the workaround is for, straight from the broker (no gateway in between)."""
    await in_thread(lambda: _commit_abort_commit(servers(gateway), "txb"))
    answer = await kafka_call(
        tansu.bootstrap, 1, 11,
        {"replica_id": -1, "max_wait": 1, "min_bytes": 1, "max_bytes": 1 << 20,
         "isolation_level": 1, "session_id": 0, "session_epoch": -1, "rack_id": "",
         "forgotten_topics_data": [],
         "topics": [{"topic": "txb", "partitions": [
             {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
              "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]},
    )  # fmt: skip
    [part] = answer.responses[0].partitions
    assert part.last_stable_offset == 15
    # the aborted transaction: its producer's first batch at offset 6
    assert [a.first_offset for a in part.aborted_transactions or ()] == [6]


async def test_an_aborted_transaction_whose_marker_is_past_the_fetch(
    gateway: Running, backend: KafkaBackend
) -> None:
    """More than one Fetch's worth of other producers' data between an aborted transaction's
    batch and its marker: the marker is still found (on Tansu: looked ahead for)."""
    bootstrap = servers(gateway)
    big = [b"%d" % i + b"x" * 40_000 for i in range(4)]

    def run() -> list[bytes]:
        create_topic(bootstrap, "txfar")
        producer = txn_producer(bootstrap, "tid-txfar")
        producer.begin_transaction()
        producer.produce("txfar", b"aborted")
        assert producer.flush(CLIENT_S) == 0
        plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        for value in big:
            plain.produce("txfar", value)
            assert plain.flush(CLIENT_S) == 0  # one batch each
        producer.abort_transaction(CLIENT_S)
        producer.begin_transaction()
        producer.produce("txfar", b"committed")
        producer.commit_transaction(CLIENT_S)
        return read_isolated(bootstrap, "txfar", "read_committed", expect=5, assign=True)

    assert await in_thread(run) == [*big, b"committed"]
    # a fetch of as little as the backend asks for (64 KiB): the marker is 160 KB further
    assert await _clean(backend, "txfar", max_bytes=1) == [*big, b"committed"]


async def test_a_clean_read_is_not_stuck_in_front_of_what_it_skips(
    gateway: Running, backend: KafkaBackend
) -> None:
    """An aborted transaction bigger than a Fetch, then one committed message: a CLEAN read of
    one message (a Rog fetch, a RabbitMQ Stream subscription moving on by what it got) at the
    aborted transaction's first offset gets the committed message, not an empty answer that
    would leave it at that offset for ever."""
    bootstrap = servers(gateway)

    def run() -> None:
        create_topic(bootstrap, "txstall")
        producer = txn_producer(bootstrap, "tid-txstall")
        producer.begin_transaction()
        for i in range(4):
            producer.produce("txstall", b"%d" % i + b"x" * 40_000)
            assert producer.flush(CLIENT_S) == 0  # one batch each: 160 KB, over a 64 KiB fetch
        producer.abort_transaction(CLIENT_S)
        producer.begin_transaction()
        producer.produce("txstall", b"committed")
        producer.commit_transaction(CLIENT_S)

    await in_thread(run)
    for max_wait_ms in (0, 5000):
        with trio.fail_after(LIMIT_S):
            result = await backend.read(
                Read(topic=Topic(DEFAULT_STREAM, "txstall"), partition=0, offset=0,
                     max_messages=1, max_bytes=1, max_wait_ms=max_wait_ms)
            )  # fmt: skip
        assert [m.value for b in result.batches for m in b.messages] == [b"committed"]


async def test_markers_only_in_kafka_reads(gateway: Running, backend: KafkaBackend) -> None:
    """Whole stored batches: UNCOMMITTED and COMMITTED reads (a Kafka client's) carry the
    transaction markers, CLEAN reads (every other protocol's) never."""
    await in_thread(lambda: _commit_abort_commit(servers(gateway), "txm"))
    controls = {}
    for isolation in Isolation:
        # EndTxn answers once the coordinator logged the commit; the partition's markers (and
        # with them the last stable offset a COMMITTED read stops at) follow: seen on Tansu as a
        # COMMITTED read finding nothing right after the commit. Read again until the last
        # transaction's batch (offset 10) is readable, bounded.
        headers = []
        with trio.move_on_after(MARKERS_S):
            while True:
                result = await backend.read(
                    Read(topic=Topic(DEFAULT_STREAM, "txm"), partition=0, offset=0,
                         max_messages=100, whole_batches=True, isolation=isolation)
                )  # fmt: skip
                headers = [parse_header(b.wire.data) for b in result.batches if b.wire is not None]
                assert len(headers) == len(result.batches)
                if any(h.base_offset >= 10 for h in headers):
                    break
                await trio.sleep(0.1)
        controls[isolation] = [h.base_offset for h in headers if h.is_control]
    # 5 records, commit marker (5), 3 aborted records, abort marker (9), 4, commit marker (14)
    assert controls == {Isolation.UNCOMMITTED: [5, 9, 14], Isolation.COMMITTED: [5, 9, 14],
                        Isolation.CLEAN: []}  # fmt: skip


async def test_an_open_transaction_holds_readers_at_the_stable_offset(
    gateway: Running, backend: KafkaBackend
) -> None:
    bootstrap = servers(gateway)
    topic = Topic(DEFAULT_STREAM, "txo")

    def first() -> tuple[Producer, list[bytes], list[bytes]]:
        create_topic(bootstrap, "txo")
        plain = Producer({"bootstrap.servers": bootstrap})
        plain.produce("txo", b"before")
        assert plain.flush(CLIENT_S) == 0
        producer = txn_producer(bootstrap, "tid-txo")
        producer.begin_transaction()
        producer.produce("txo", b"inside")
        assert producer.flush(CLIENT_S) == 0
        plain.produce("txo", b"after")  # behind the open transaction: held back too
        assert plain.flush(CLIENT_S) == 0
        return (
            producer,
            read_isolated(bootstrap, "txo", "read_committed", expect=1, assign=True),
            read_isolated(bootstrap, "txo", "read_uncommitted", expect=3, assign=True),
        )

    producer, while_open, uncommitted = await in_thread(first)
    assert while_open == [b"before"]
    assert uncommitted == [b"before", b"inside", b"after"]
    read = await backend.read(Read(topic=topic, partition=0, offset=0, max_messages=10))
    assert [m.value for b in read.batches for m in b.messages] == [b"before"]
    assert (read.high_watermark, read.last_stable_offset) == (3, 1)
    committed_end = ListOffsets(
        topic=topic, partition=0, spec=OffsetSpec.LATEST, isolation=Isolation.COMMITTED
    )
    assert (await backend.list_offsets(committed_end)).offset == 1

    def second() -> list[bytes]:
        producer.commit_transaction(CLIENT_S)
        return read_isolated(bootstrap, "txo", "read_committed", expect=3, assign=True)

    assert await in_thread(second) == [b"before", b"inside", b"after"]
    assert (await backend.list_offsets(committed_end)).offset == 4


async def test_send_offsets_to_transaction(gateway: Running) -> None:
    """Consume-transform-produce through the broker's coordinators: the group's offsets commit
    with the output; an aborted transaction's offsets and output are dropped."""
    step = partial(eos_step, servers(gateway), assign=True)
    before, after_abort, after_commit, out = await in_thread(step)
    assert before < 0  # nothing committed yet (librdkafka: OFFSET_INVALID)
    assert after_abort == before
    assert after_commit == 6
    assert out == [b"out-%d" % i for i in range(6)]


async def test_a_second_producer_fences_the_first(gateway: Running, backend: KafkaBackend) -> None:
    bootstrap = servers(gateway)

    def run() -> tuple[str, list[bytes]]:
        error = fenced(bootstrap, "txf")
        return error, read_isolated(bootstrap, "txf", "read_uncommitted", expect=2, assign=True)

    error, everything = await in_thread(run)
    assert "FENCED" in error and "fatal=True" in error, error
    assert everything == [b"zombie", b"fresh"]  # "late" never reached the broker


async def test_init_transaction_fences_by_epoch(backend: KafkaBackend) -> None:
    with trio.fail_after(LIMIT_S):
        first = await backend.init_transaction(
            InitTransaction(transactional_id="tid-epoch", timeout_ms=60_000)
        )
        again = await backend.init_transaction(
            InitTransaction(transactional_id="tid-epoch", timeout_ms=60_000)
        )
    assert again.producer_id == first.producer_id >= 0
    assert again.producer_epoch == first.producer_epoch + 1


@pytest.mark.xfail(reason=TANSU_NO_KIP_360, strict=True)
async def test_init_transaction_with_the_current_id_bumps_the_epoch(backend: KafkaBackend) -> None:
    with trio.fail_after(LIMIT_S):
        first = await backend.init_transaction(
            InitTransaction(transactional_id="tid-360", timeout_ms=60_000)
        )
        again = await backend.init_transaction(
            InitTransaction(transactional_id="tid-360", timeout_ms=60_000,
                            producer_id=first.producer_id, producer_epoch=first.producer_epoch)
        )  # fmt: skip
    assert (again.producer_id, again.producer_epoch) == (
        first.producer_id,
        first.producer_epoch + 1,
    )
