"""``streamgate run --workers N`` (issue 14): N processes share every listener port, the kernel
spreads the connections over them, /metrics sums them, a dead worker is started again, and
``--workers`` is refused where a gateway's memory would have to be shared.

Against a real Tansu and real clients (confluent-kafka, raw sockets); every process is started
and stopped by its pid, every wait bounded.
"""

from __future__ import annotations

import functools
import os
import signal
import socket
import sys
import time
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio
from confluent_kafka import Consumer, Producer, TopicPartition

from protocols import rabbitmq_stream as rs
from protocols.iggy import Era, Framing, IggyClientCodec, Status
from protocols.iggy.frames_groups import (
    ConsumerGroupDetails,
    CreateConsumerGroup,
    GetConsumerGroup,
)
from protocols.iggy.frames_users import CreateUser
from protocols.rabbitmq_stream import ResponseCode
from tests.helpers.gateways import supervisor
from tests.helpers.iggy_wire import IggyWire, login_command
from tests.helpers.listing import listing
from tests.helpers.processes import accepted_on, alive
from tests.helpers.rabbitmq_stream_wire import RabbitWire
from tests.helpers.tansu import Tansu, running_tansu

LIMIT_S = 60.0
CONNECTIONS = 16


@pytest.fixture
async def tansu(tmp_path: Path) -> AsyncIterator[Tansu]:
    async with running_tansu(tmp_path) as started:
        yield started


def metric(admin: str, name: str, **labels: str) -> float:
    with urllib.request.urlopen(f"http://{admin}/metrics", timeout=5) as response:
        text = response.read().decode()
    wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    total = 0.0
    for line in text.splitlines():
        if line.startswith(f"{name}{{") or line.startswith(f"{name} "):
            series, value = line.rsplit(" ", 1)
            found = ",".join(sorted(series[series.find("{") + 1 : -1].split(",")))
            if not labels or found == wanted:
                total += float(value)
    return total


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for value in values:
        producer.produce(topic, value=value)
    assert producer.flush(20) == 0


def read_from_start(bootstrap: str, topic: str, count: int) -> list[bytes]:
    """Partition 0 of ``topic`` from offset 0, until ``count`` values came (20 s at most)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "workers-test",
                         "enable.auto.commit": False})  # fmt: skip
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    try:
        deadline = time.monotonic() + 20
        while len(got) < count and time.monotonic() < deadline:
            msg = consumer.poll(1)
            if msg is not None and msg.error() is None:
                got.append(msg.value() or b"")
    finally:
        consumer.close()
    return got


def produce_and_consume(bootstrap: str, topic: str, count: int) -> list[bytes]:
    produce(bootstrap, topic, [b"w%d" % i for i in range(count)])
    return read_from_start(bootstrap, topic, count)


async def spread_over(pids: list[int], address: str) -> list[int]:
    """Connections held open at once: how many of them each worker took from the kernel."""
    host, port = address.rsplit(":", 1)
    streams = [await trio.open_tcp_stream(host, int(port)) for _ in range(CONNECTIONS)]
    try:
        give_up = time.monotonic() + 10
        while sum(accepted_on(pid, int(port)) for pid in pids) < CONNECTIONS:
            assert time.monotonic() < give_up, [accepted_on(p, int(port)) for p in pids]
            await trio.sleep(0.05)
        return [accepted_on(pid, int(port)) for pid in pids]
    finally:
        for stream in streams:
            await stream.aclose()


async def test_two_workers_share_the_port_and_sum_their_metrics(
    tansu: Tansu, tmp_path: Path
) -> None:
    with trio.fail_after(LIMIT_S):
        async with supervisor(tmp_path, tansu.url) as (proc, addresses, pids):
            assert len(pids) == 2 and all(alive(pid) for pid in pids)
            shares = await spread_over(pids, addresses["kafka"])
            assert sorted(shares) != [0, CONNECTIONS], shares
            got = await trio.to_thread.run_sync(
                produce_and_consume, addresses["kafka"], "spread", 50
            )
            assert got == [b"w%d" % i for i in range(50)]
            admin = addresses["admin"]
            # Summed over the workers: every connection is counted, whichever took it.
            accepted = await trio.to_thread.run_sync(
                lambda: metric(admin, "streamgate_connections_total", protocol="kafka")
            )
            assert accepted >= CONNECTIONS + 2
            stored = await trio.to_thread.run_sync(
                lambda: metric(admin, "streamgate_messages_in_total", protocol="kafka")
            )
            assert stored == 50
            # The per-command histograms too (prometheus_client's own under --workers).
            for timed in ("command_duration", "backend_request_duration", "gateway_overhead"):
                count = await trio.to_thread.run_sync(
                    functools.partial(metric, admin, f"streamgate_{timed}_seconds_count")
                )
                assert count > 0, timed
            # process_* of the supervisor and of each worker, the workers' trio gauges summed,
            # and no _created series.
            for worker in ("supervisor", "0", "1"):
                rss = await trio.to_thread.run_sync(
                    functools.partial(metric, admin, "process_resident_memory_bytes", worker=worker)
                )
                assert rss > 0, worker
            tasks = await trio.to_thread.run_sync(lambda: metric(admin, "streamgate_trio_tasks"))
            assert tasks > 0
            text = await trio.to_thread.run_sync(
                lambda: urllib.request.urlopen(f"http://{admin}/metrics", timeout=5).read()
            )
            assert b"_created" not in text
            await user_created_through_one_worker_logs_in_through_both(addresses, pids)
            await iggy_groups_are_the_workers_own(addresses, pids)
            await what_lives_in_one_process_is_refused(addresses)
            up = await trio.to_thread.run_sync(
                lambda: urllib.request.urlopen(f"http://{admin}/readyz", timeout=5).read()
            )
            assert up == b"ok\n"

            # A worker killed by pid is started again; the port goes on serving.
            os.kill(pids[0], signal.SIGKILL)
            give_up = time.monotonic() + 20
            while True:
                text = (tmp_path / "supervisor.log").read_text(errors="replace")
                if "worker exited; starting it again" in text:
                    break
                assert time.monotonic() < give_up, text
                await trio.sleep(0.05)
            again = await trio.to_thread.run_sync(
                produce_and_consume, addresses["kafka"], "after-kill", 10
            )
            assert again == [b"w%d" % i for i in range(10)]
            proc.send_signal(signal.SIGTERM)
            with trio.fail_after(30):
                await proc.wait()
            assert proc.returncode == 0
            assert not alive(pids[1])


async def iggy_wire(address: str) -> IggyWire:
    host, port = address.rsplit(":", 1)
    stream = await trio.open_tcp_stream(host, int(port))
    return IggyWire(stream, IggyClientCodec(Framing.VSR, era=Era.C))


async def user_created_through_one_worker_logs_in_through_both(
    addresses: dict[str, str], pids: list[int]
) -> None:
    """Users the workers keep in one file of theirs: one created over one connection logs in
    over connections that the kernel gave to both workers."""
    root = await iggy_wire(addresses["iggy"])
    await root.ok(login_command(Era.C))
    await root.ok(CreateUser(username="carol", password="carol-pw", status=1))
    await root.aclose()
    port = int(addresses["iggy"].rsplit(":", 1)[1])
    wires = [await iggy_wire(addresses["iggy"]) for _ in range(CONNECTIONS)]
    try:
        for wire in wires:
            await wire.ok(login_command(Era.C, "carol", "carol-pw"))
        shares = [accepted_on(pid, port) for pid in pids]
    finally:
        for wire in wires:
            await wire.aclose()
    assert all(shares), shares  # both workers logged carol in


async def iggy_groups_are_the_workers_own(addresses: dict[str, str], pids: list[int]) -> None:
    """On the Kafka backend Iggy consumer groups are kept on the broker: a group created through
    one worker is there through every connection, whichever worker took it; a second create of
    its name is refused."""
    port = int(addresses["iggy"].rsplit(":", 1)[1])
    root = await iggy_wire(addresses["iggy"])
    await root.ok(login_command(Era.C))
    made = await root.call(CreateConsumerGroup(stream_id="default", topic_id="spread", name="g"))
    again = await root.call(CreateConsumerGroup(stream_id="default", topic_id="spread", name="g"))
    await root.aclose()
    assert made.status == Status.OK, made
    assert again.status == Status.CONSUMER_GROUP_NAME_ALREADY_EXISTS, again
    wires = [await iggy_wire(addresses["iggy"]) for _ in range(CONNECTIONS)]
    try:
        for wire in wires:
            await wire.ok(login_command(Era.C))
            found = await wire.call(GetConsumerGroup(stream_id="default", topic_id="spread",
                                                     group_id="g"))  # fmt: skip
            assert found.status == Status.OK, found
            assert isinstance(found.body, ConsumerGroupDetails), found
            assert found.body.group.name == "g"
        shares = [accepted_on(pid, port) for pid in pids]
    finally:
        for wire in wires:
            await wire.aclose()
    assert all(shares), shares  # both workers answered


async def what_lives_in_one_process_is_refused(addresses: dict[str, str]) -> None:
    """On the Kafka backend gateway-side publisher deduplication lives in one process: with
    workers it is refused, not split between them."""
    rabbit = await RabbitWire.connected(addresses["rabbitmq_stream"])
    created = await rabbit.call(rs.Create(correlation_id=rabbit.corr(), stream="dedup"))
    assert getattr(created, "code", None) == ResponseCode.OK, created
    declared = await rabbit.call(rs.DeclarePublisher(
        correlation_id=rabbit.corr(), publisher_id=1, reference="app", stream="dedup",
    ))  # fmt: skip
    plain = await rabbit.call(rs.DeclarePublisher(
        correlation_id=rabbit.corr(), publisher_id=2, reference="", stream="dedup",
    ))  # fmt: skip
    await rabbit.aclose()
    assert getattr(declared, "code", None) == ResponseCode.PRECONDITION_FAILED, declared
    assert getattr(plain, "code", None) == ResponseCode.OK, plain


@pytest.mark.parametrize(
    ("backend", "why"),
    [
        # The workers' link to the store owner is the supervisor's to make (embedded:DIR makes
        # it); by hand two supervisors would each think they had the store.
        ("embedded+owner:/run/x.sock", "the supervisor's; give embedded:DIR"),
    ],
)
async def test_workers_are_refused_where_a_gateways_memory_would_be_shared(
    tmp_path: Path, backend: str, why: str
) -> None:
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    with trio.fail_after(30):
        ran = await trio.run_process(
            [sys.executable, "-m", "gateway.cli", "run", "--backend", backend, "--workers", "2"],
            capture_stdout=True, capture_stderr=True, check=False, cwd=cwd,
        )  # fmt: skip
    assert ran.returncode == 2 and ran.stdout == b""
    [line] = ran.stderr.decode().splitlines()
    assert line.startswith("streamgate: --workers") and why in line
    assert "guest:guest" not in line
    # Nothing written, no data directory. (.hypothesis: kio imports hypothesis when the test
    # environment has it installed, and hypothesis makes its directory in the cwd.)
    assert [name for name in listing(cwd) if not name.startswith((".", ".hypothesis"))] == []


async def test_a_worker_that_cannot_start_stops_the_supervisor(
    tansu: Tansu, tmp_path: Path
) -> None:
    """The Kafka port is taken by a plain socket: the workers cannot bind it, and instead of
    starting them again for ever the supervisor exits 1, saying their one line once."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with trio.fail_after(LIMIT_S):
            ran = await trio.run_process(
                [sys.executable, "-m", "gateway.cli", "run", "--backend", tansu.url,
                 "--workers", "2", "--kafka-port", str(port), "--rog-port", "0",
                 "--iggy-port", "0", "--rabbitmq-stream-port", "0", "--admin-port", "0"],
                capture_stdout=True, capture_stderr=True, check=False, cwd=tmp_path,
            )  # fmt: skip
    assert ran.returncode == 1
    lines = ran.stderr.decode().splitlines()
    expected = f"streamgate: cannot listen for kafka on 127.0.0.1:{port}: address already in use"
    assert lines.count(expected) == 1 and lines[-1] == expected, lines
    assert not any(line.startswith("streamgate: ") for line in lines[:-1]), lines
    assert "Traceback" not in ran.stderr.decode()
