"""Disk full through real clients against ``streamgate run`` (issue 18 items 5 and 6):
the data directory on a small tmpfs, confluent-kafka producing with acks=all until the disk is
full. The producer is told KAFKA_STORAGE_ERROR (not "Message timed out"), /readyz answers 503,
and once space is freed production resumes by itself and every acknowledged message is read
back exactly once. An rstream publisher gets its PublishError with INTERNAL_ERROR (0x0f), not a
silent wait. Then a flipped bit in the middle of the log: after a restart a real consumer
reads every intact batch, skipping only the damaged one."""

from __future__ import annotations

import asyncio
import os
import urllib.error
import urllib.request
from pathlib import Path

import trio
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from rstream import ConfirmationStatus
from rstream import Producer as RProducer

from gateway.backends.embedded.batch_format import parse_header
from tests.helpers.gateways import running_gateway
from tests.helpers.rstream_direct import in_asyncio
from tests.helpers.tmpfs import fill, small_tmpfs

TOPIC = "full"
VALUE = 4000  # bytes of padding per message


def _http(address: str, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://{address}{path}", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def _producer(bootstrap: str) -> Producer:
    # retries=0: the first answer is the one reported (librdkafka would otherwise retry a
    # retriable storage error until message.timeout.ms, which then says "timed out").
    return Producer({
        "bootstrap.servers": bootstrap, "acks": "all", "retries": 0, "linger.ms": 0,
        "enable.idempotence": False, "message.timeout.ms": 20000,
    })  # fmt: skip


def _produce(bootstrap: str, start: int, limit: int) -> tuple[list[bytes], KafkaError | None]:
    """One message at a time until one fails (or ``limit``): (acknowledged values, error)."""
    producer = _producer(bootstrap)
    acked: list[bytes] = []
    errors: list[KafkaError] = []

    def report(err: KafkaError | None, msg: object) -> None:
        if err is not None:
            errors.append(err)
        else:
            acked.append(msg.value())  # type: ignore[attr-defined]

    for i in range(start, start + limit):
        producer.produce(TOPIC, value=b"%06d" % i + b"." * VALUE, on_delivery=report)
        assert producer.flush(30) == 0
        if errors:
            return acked, errors[0]
    return acked, None


def _consume_all(bootstrap: str, expected: int) -> list[tuple[int, bytes]]:
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": "check", "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    })  # fmt: skip
    consumer.subscribe([TOPIC])
    got: list[tuple[int, bytes]] = []
    idle = 0
    try:
        while len(got) < expected or idle < 3:
            msg = consumer.poll(1.0)
            if msg is None:
                idle += 1
                if idle > 15:
                    break
                continue
            assert msg.error() is None, msg.error()
            offset, value = msg.offset(), msg.value()
            assert offset is not None and value is not None
            got.append((offset, value))
            idle = 0
    finally:
        consumer.close()
    return got


def _create_topic(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(TOPIC, 1, 1)]).values():
        future.result(20)


async def test_kafka_producer_sees_storage_error_and_recovers(tmp_path: Path) -> None:
    with small_tmpfs(tmp_path / "disk", "3m") as disk:
        data = disk / "data"
        async with running_gateway(f"embedded:{data}", tmp_path, "full") as gw:
            with trio.fail_after(120):
                boot = gw.kafka
                admin = gw.addresses["admin"]
                await trio.to_thread.run_sync(_create_topic, boot)
                spare = fill(disk, "spare", leave=1 << 20)
                acked, err = await trio.to_thread.run_sync(_produce, boot, 0, 2000)
                assert err is not None, "the disk never filled"
                assert err.code() == KafkaError.KAFKA_STORAGE_ERROR, err
                assert len(acked) > 10
                status, body = await trio.to_thread.run_sync(_http, admin, "/readyz")
                assert status == 503 and "storage" in body, (status, body)
                _, metrics = await trio.to_thread.run_sync(_http, admin, "/metrics")
                assert "streamgate_storage_writable 0.0" in metrics
                assert 'streamgate_storage_errors_total{kind="no_space"}' in metrics
                os.unlink(spare)
                # Ready again before any write (a probe): an unready pod may get no traffic.
                status, _ = await trio.to_thread.run_sync(_http, admin, "/readyz")
                assert status == 200
                more, err = await trio.to_thread.run_sync(_produce, boot, 100000, 20)
                assert err is None and len(more) == 20
                acked += more
                got = await trio.to_thread.run_sync(_consume_all, boot, len(acked))
                values = [v for _, v in got]
                assert sorted(values) == sorted(acked)  # every acknowledged one, exactly once
                assert len(set(values)) == len(values)
        assert "embedded.storage_write_failed" in gw.log_path.read_text()


async def test_kafka_consumer_skips_a_damaged_batch(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with trio.fail_after(120):
        async with running_gateway(f"embedded:{data}", tmp_path, "one") as gw:
            await trio.to_thread.run_sync(_create_topic, gw.kafka)
            acked, err = await trio.to_thread.run_sync(_produce, gw.kafka, 0, 30)
            assert err is None and len(acked) == 30
        (log,) = (data / "default" / TOPIC / "0").glob("*.log")
        raw = bytearray(log.read_bytes())
        pos = 0
        for _ in range(10):  # the 11th batch: one message each, offset 10
            pos += parse_header(bytes(raw), pos).size
        raw[pos + 200] ^= 0x04
        log.write_bytes(bytes(raw))
        async with running_gateway(f"embedded:{data}", tmp_path, "two") as gw:
            got = await trio.to_thread.run_sync(_consume_all, gw.kafka, 29)
            assert [o for o, _ in got] == [*range(10), *range(11, 30)]
            assert [v for _, v in got] == acked[:10] + acked[11:]
            more, err = await trio.to_thread.run_sync(_produce, gw.kafka, 30, 1)
            assert err is None and len(more) == 1
            _, metrics = await trio.to_thread.run_sync(_http, gw.addresses["admin"], "/metrics")
            assert "streamgate_storage_corrupt_batches_total 1.0" in metrics
            assert "streamgate_storage_lost_records_total 1.0" in metrics
        text = gw.log_path.read_text()
        assert "embedded.corrupt_batch_skipped" in text and "lost_offsets=10-10" in text


async def _rstream_until_refused(
    port: int, start: int, batches: int
) -> tuple[int, list[ConfirmationStatus]]:
    """Publish batches of 20 until one is refused: (confirmed messages, the refusals)."""
    confirmed = 0
    refused: list[ConfirmationStatus] = []
    async with RProducer(host="127.0.0.1", port=port, username="guest", password="guest") as p:
        await p.create_stream("rs-full", exists_ok=True)
        for k in range(start, start + batches):
            statuses: list[ConfirmationStatus] = []
            done = asyncio.Event()

            def on_confirm(s: ConfirmationStatus, got: list[ConfirmationStatus] = statuses,
                           ev: asyncio.Event = done) -> None:  # fmt: skip
                got.append(s)
                if len(got) == 20:
                    ev.set()

            body = [b"%06d" % k + b"." * VALUE for _ in range(20)]
            await p.send_batch("rs-full", body, on_publish_confirm=on_confirm)
            await asyncio.wait_for(done.wait(), 20)
            confirmed += sum(s.is_confirmed for s in statuses)
            refused = [s for s in statuses if not s.is_confirmed]
            if refused:
                break
    return confirmed, refused


async def test_rabbitmq_stream_publisher_gets_an_internal_error(tmp_path: Path) -> None:
    with small_tmpfs(tmp_path / "disk", "3m") as disk:
        async with running_gateway(f"embedded:{disk / 'data'}", tmp_path, "rs") as gw:
            port = gw.port("rabbitmq_stream")
            spare = fill(disk, "spare", leave=1 << 20)
            confirmed, refused = await in_asyncio(
                lambda: _rstream_until_refused(port, 0, 2000), limit_s=90
            )
            assert confirmed > 0 and refused
            assert {s.response_code for s in refused} == {0x0F}  # INTERNAL_ERROR (§4)
            os.unlink(spare)
            confirmed, refused = await in_asyncio(
                lambda: _rstream_until_refused(port, 5000, 2), limit_s=90
            )
            assert confirmed == 40 and not refused  # publishing resumed by itself
