"""``streamgate run --workers 2`` on the embedded backend (issue 21): the supervisor starts one
store owner (the data directory's one owner: its lock, recovery, fsyncs) and two workers that
share every listener port and reach the store through the owner. Real clients (confluent-kafka,
rstream 1.1.1, apache-iggy 0.9.0, raw frames where an answer code is the point); every process
started and stopped by its pid, every wait bounded.

Shared across workers, shown with connections the kernel spreads over both: messages and
offsets, Kafka groups (one group, two members, every message once), Iggy users and groups.
Refused by each worker rather than split: RabbitMQ Stream publishers with a reference
(deduplication kept in one process). The owner killed by pid is started again and the workers
reach it again; SIGTERM drains the workers and then closes the store; a single gateway opens
the directory afterwards and finds everything.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import trio
from apache_iggy import IggyClient, Partitioning, PollingStrategy, SendMessage, TcpConfig

from tests.gateway.listeners.iggy.conftest import poll
from tests.gateway.test_workers import (
    CONNECTIONS,
    iggy_groups_are_the_workers_own,
    metric,
    produce,
    read_from_start,
    spread_over,
    user_created_through_one_worker_logs_in_through_both,
    what_lives_in_one_process_is_refused,
)
from tests.helpers.gateways import running_gateway, supervisor
from tests.helpers.kafka_group_members import (
    in_thread,
    one_group_counts_every_message_once,
)
from tests.helpers.processes import alive
from tests.helpers.rstream_direct import in_asyncio, publish_direct, read_direct

LIMIT_S = 150.0


def owner_pid(log: Path) -> int:
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("store owner: "):
            return int(line.split()[-1])
    raise AssertionError(f"no store owner line:\n{log.read_text(errors='replace')}")


async def iggy_round_trip(address: str) -> list[bytes]:
    """apache-iggy 0.9.0: a stream, a topic, 50 messages sent and polled back."""

    async def scenario() -> list[bytes]:
        client = IggyClient(TcpConfig(server_address=address))
        await client.connect()
        await client.login_user("iggy", "iggy")
        await client.create_stream("iggy-s")
        await client.create_topic("iggy-s", "t", partitions_count=1)
        sent = [SendMessage(b"i%d" % i) for i in range(50)]
        await client.send_messages("iggy-s", "t", Partitioning.partition_id(0), sent)
        polled = await poll(client, "iggy-s", "t", PollingStrategy.First(), count=50)
        return [bytes(m.payload()) for m in polled]

    return await in_asyncio(scenario)


def rabbit_where(address: str) -> dict[str, Any]:
    host, port = address.rsplit(":", 1)
    return {"host": host, "port": int(port), "username": "guest", "password": "guest"}


async def test_two_workers_one_embedded_store(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with trio.fail_after(LIMIT_S):
        async with supervisor(tmp_path, f"embedded:{data}") as (proc, addresses, pids):
            log = tmp_path / "supervisor.log"
            owner = owner_pid(log)
            assert all(alive(pid) for pid in [*pids, owner]) and owner not in pids
            kafka = addresses["kafka"]
            shares = await spread_over(pids, kafka)
            assert sorted(shares) != [0, CONNECTIONS], shares
            # /metrics summed: the owner's disk gauges and process series count, and its
            # backend_up does not drag the lowest down.
            admin = addresses["admin"]

            def seen(name: str, **labels: str) -> float:
                return metric(admin, name, **labels)

            assert await in_thread(lambda: seen("streamgate_backend_up")) == 1
            assert await in_thread(lambda: seen("streamgate_storage_writable")) == 1
            rss = await in_thread(lambda: seen("process_resident_memory_bytes", worker="store"))
            assert rss > 0

            # One Kafka group, a member per consumer, the store's offsets: every message once;
            # described alike through connections the kernel gives to either worker.
            await one_group_counts_every_message_once([kafka, kafka], describe_each=4)

            await in_thread(lambda: produce(kafka, "spread", [b"w%d" % i for i in range(50)]))
            await user_created_through_one_worker_logs_in_through_both(addresses, pids)
            await iggy_groups_are_the_workers_own(addresses, pids)
            await what_lives_in_one_process_is_refused(addresses)
            assert await iggy_round_trip(addresses["iggy"]) == [b"i%d" % i for i in range(50)]
            where = rabbit_where(addresses["rabbitmq_stream"])
            await in_asyncio(lambda: publish_direct(where, "rs", [b"r%d" % i for i in range(40)]))
            got = await in_asyncio(lambda: read_direct(where, "rs", 40))
            assert [body for _, body, _ in got] == [b"r%d" % i for i in range(40)]

            # The owner killed by pid: started again, the workers reach it again, nothing lost.
            os.kill(owner, signal.SIGKILL)
            give_up = time.monotonic() + 30
            while log.read_text(errors="replace").count("store owner ready") < 2:
                assert time.monotonic() < give_up, log.read_text(errors="replace")
                await trio.sleep(0.05)
            assert "worker='the store owner'" in log.read_text(errors="replace")
            # (librdkafka retries what a worker refused while its link was down)
            await in_thread(lambda: produce(kafka, "spread", [b"w50", b"w51"]))
            expected = [b"w%d" % i for i in range(52)]
            assert await in_thread(lambda: read_from_start(kafka, "spread", 52)) == expected

            proc.send_signal(signal.SIGTERM)
            with trio.fail_after(40):
                await proc.wait()
            assert proc.returncode == 0, log.read_text(errors="replace")[-3000:]
            assert not any(alive(pid) for pid in pids)

        # The directory's lock went with the owner: one gateway opens it and finds it all.
        async with running_gateway(f"embedded:{data}", tmp_path, "after") as after:
            assert await in_thread(lambda: read_from_start(after.kafka, "spread", 52)) == expected
            where = rabbit_where(after.addresses["rabbitmq_stream"])
            got = await in_asyncio(lambda: read_direct(where, "rs", 40))
            assert [body for _, body, _ in got] == [b"r%d" % i for i in range(40)]


async def test_workers_on_a_directory_in_use_say_so_once(tmp_path: Path) -> None:
    """The store owner cannot lock a directory another gateway owns: the supervisor says the
    owner's one line and exits 1 instead of starting it again for ever; no worker starts."""
    data = tmp_path / "data"
    async with running_gateway(f"embedded:{data}", tmp_path, "holder") as holder:
        with trio.fail_after(60):
            ran = await trio.run_process(
                [sys.executable, "-m", "gateway.cli", "run", "--backend", f"embedded:{data}",
                 "--workers", "2", "--rog-port", "0", "--kafka-port", "0", "--iggy-port", "0",
                 "--rabbitmq-stream-port", "0", "--admin-port", "0"],
                capture_stdout=True, capture_stderr=True, check=False, cwd=tmp_path,
            )  # fmt: skip
        assert alive(holder.pid)
    lines = ran.stderr.decode().splitlines()
    assert ran.returncode == 1 and ran.stdout == b"", lines
    said = [line for line in lines if line.startswith("streamgate: ")]
    assert said == [lines[-1]], lines
    assert said[0].startswith(
        f"streamgate: data directory {data} is in use by streamgate (pid {holder.pid})"
    ), said
