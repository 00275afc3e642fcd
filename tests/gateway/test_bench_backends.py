"""``streamgate bench backends`` once, on a few messages, against a real RabbitMQ and a real Tansu
started here: each client straight to its broker and through a ``streamgate run`` child on it,
one table. Structure and counts only (every message published and consumed back both ways); the
timings are the bench's business. And ``streamgate bench kafka --transaction-every`` on the
in-process embedded gateway: every message committed and read back, the mode in its line."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from gateway.app import Running
from gateway.bench.side_by_side import counts_per_size
from gateway.cli import main
from tests.helpers.rabbitmq_server import PASSWORD, USER, RabbitMQServer
from tests.helpers.rabbitmq_server import rabbitmq as rabbitmq
from tests.helpers.tansu import Tansu, running_tansu

pytestmark = pytest.mark.slow

MESSAGES = 300
SINGLES = 20
FIGURES = 6  # rows per client and size: publish and consume msg/s, 4 latency percentiles


@pytest.fixture
async def tansu(tmp_path: Path) -> AsyncIterator[Tansu]:
    async with running_tansu(tmp_path) as started:
        yield started


async def test_one_table_both_clients_both_ways(
    rabbitmq: RabbitMQServer, tansu: Tansu, capsys: pytest.CaptureFixture[str]
) -> None:
    host, port = rabbitmq.stream_address
    argv = [
        "bench", "backends", "--rabbitmq-url", f"rabbitmq-stream://{USER}:{PASSWORD}@{host}:{port}/%2F",
        "--kafka-url", tansu.url, "--sizes", "100,1024", "--messages", str(MESSAGES),
        "--singles", str(SINGLES), "--batch", "128", "--in-flight", "2",
    ]  # fmt: skip
    with trio.fail_after(100):  # 2 gateways, 6 runs per client, a consumer process per Kafka run
        code = await trio.to_thread.run_sync(lambda: main(argv), abandon_on_cancel=True)
    assert code == 0
    out = capsys.readouterr().out.splitlines()
    header = next(i for i, line in enumerate(out) if line.startswith("client "))
    assert out[header].split() == ["client", "size", "figure", "count", "direct", "gateway",
                                   "ratio", "added"]  # fmt: skip
    verdicts = [i for i, line in enumerate(out) if line.endswith((": met", ": missed"))]
    rows = [line for line in out[header + 2 : verdicts[0]] if line]
    groups: dict[tuple[str, str], list[str]] = {}
    for row in rows:
        client, number, unit, *_ = row.split()
        groups.setdefault((client, f"{number} {unit}"), []).append(row)
    assert list(groups) == [
        ("rstream", "100 B"), ("rstream", "1 KiB"),
        ("confluent-kafka", "100 B"), ("confluent-kafka", "1 KiB"),
    ]  # fmt: skip
    for (client, _), lines in groups.items():
        assert len(lines) == FIGURES
        publish, consume = lines[0], lines[1]
        assert ("publish confirmed, dedup msg/s" if client == "rstream"
                else "produce acks=all msg/s") in publish  # fmt: skip
        # One count per row: the same on both ways (else "direct/gateway"), all of them back.
        assert publish.split("msg/s")[1].split()[0] == str(MESSAGES)
        assert consume.split("msg/s")[1].split()[0] == str(MESSAGES + SINGLES)
        assert [line.split("ms,")[1].split()[-4] for line in lines[2:4]] == [str(SINGLES)] * 2
        assert all(line.split()[-1].startswith(("+", "-")) for line in lines[2:])  # added
    assert [out[i].split(":")[0] for i in verdicts] == [
        "rstream 100 B", "rstream 1 KiB", "confluent-kafka 100 B", "confluent-kafka 1 KiB",
    ]  # fmt: skip


def test_one_count_or_one_per_size() -> None:
    assert counts_per_size([100, 1024], [500]) == (500, 500)
    assert counts_per_size([100, 1024], [500, 50]) == (500, 50)
    with pytest.raises(ValueError, match="3 message counts for 2 sizes"):
        counts_per_size([100, 1024], [1, 2, 3])


def _read_committed(servers: str, prefix: str) -> dict[str, int]:
    """Per topic whose name starts with ``prefix``: the messages a read_committed consumer reads
    from offset 0 to the end of its one partition."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition
    from confluent_kafka.admin import AdminClient

    topics = AdminClient({"bootstrap.servers": servers}).list_topics(timeout=10).topics
    counts: dict[str, int] = {}
    for topic in (t for t in topics if t.startswith(prefix)):
        consumer = Consumer({
            "bootstrap.servers": servers, "group.id": f"count-{topic}",
            "isolation.level": "read_committed", "enable.partition.eof": True,
            "enable.auto.commit": False,
        })  # fmt: skip
        consumer.assign([TopicPartition(topic, 0, 0)])
        counts[topic] = 0
        try:
            while True:
                msg = consumer.poll(10)
                assert msg is not None, f"{topic}: nothing within 10 s after {counts[topic]}"
                error = msg.error()
                if error is not None and error.code() == KafkaError._PARTITION_EOF:
                    break
                assert error is None, error
                counts[topic] += 1
        finally:
            consumer.close()
    return counts


async def test_kafka_transactional_every_message_committed_and_read(
    gateway: Running, capsys: pytest.CaptureFixture[str]
) -> None:
    host, port = gateway.address("kafka")
    servers = f"{host}:{port}"
    # 250 at full speed in transactions of 100 (the last one 50), then 250 one at a time.
    argv = ["bench", "kafka", "--bootstrap", servers, "--sizes", "100", "--messages", "250",
            "--transaction-every", "100"]  # fmt: skip
    with trio.fail_after(20):  # a consumer process of its own; a few seconds
        code = await trio.to_thread.run_sync(lambda: main(argv), abandon_on_cancel=True)
        counts = await trio.to_thread.run_sync(
            lambda: _read_committed(servers, "bench-100-"), abandon_on_cancel=True
        )
    assert code == 0
    out = capsys.readouterr().out.splitlines()  # the in-process gateway logs there too
    (line,) = [line for line in out if line.startswith("kafka ")]
    mode = "(transactional, commit every 100: 3 transactions, read_committed)"
    assert f" 100 B x 250 {mode}: produce " in line
    assert list(counts.values()) == [250 + 250]  # one topic; every message committed
