"""Issue 18 item 4, file descriptors, against a real ``streamgate run`` whose RLIMIT_NOFILE is
lowered: thousands of topics under a 1024 limit (segment files through the LRU of
gateway/backends/embedded/fd_cache.py), and a gateway whose descriptors are all taken by idle
connections, which refuses quietly, says so in /readyz and recovers once they are gone.

``FD_TEST_TOPICS`` sets how many topics the first test creates (5000 by default; not a
STREAMGATE_ variable, which the gateway child would refuse as an unknown setting).
"""

from __future__ import annotations

import os
import resource
import socket
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path

import trio
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from tests.helpers.gateways import Gateway, running_gateway

TOPICS = int(os.environ.get("FD_TEST_TOPICS", "5000"))
BATCH = 250  # topics per CreateTopics request
FD_EXHAUSTED = 'streamgate_connection_errors_total{protocol="kafka",reason="fd_exhausted"}'


@asynccontextmanager
async def _gateway_with_fd_limit(tmp_path: Path, soft: int, *extra: str) -> AsyncIterator[Gateway]:
    """A gateway started with the soft RLIMIT_NOFILE ``soft`` (inherited by the child: this
    process's own limit is back as soon as the child runs)."""
    old = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, old[1]))
    try:
        async with running_gateway(f"embedded:{tmp_path / 'data'}", tmp_path, "fd", *extra) as gw:
            resource.setrlimit(resource.RLIMIT_NOFILE, old)
            yield gw
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, old)


def _get(gw: Gateway, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://{gw.addresses['admin']}{path}", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _metric(gw: Gateway, name: str) -> float:
    _, text = _get(gw, "/metrics")
    return sum(float(ln.rsplit(" ", 1)[1]) for ln in text.splitlines() if ln.startswith(name))


def _open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _create_topics(bootstrap: str, names: list[str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for i in range(0, len(names), BATCH):
        new = [NewTopic(n, num_partitions=1, replication_factor=1) for n in names[i : i + BATCH]]
        for name, future in admin.create_topics(new, request_timeout=60).items():
            future.result(timeout=60)  # raises on any error
            assert name


def _produce(bootstrap: str, names: list[str]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    failures: list[str] = []

    def report(err: object, _msg: object) -> None:
        if err is not None:
            failures.append(str(err))

    for n in names:
        producer.produce(n, value=n.encode(), partition=0, on_delivery=report)
    assert producer.flush(30) == 0
    assert failures == []


def _consume(bootstrap: str, names: list[str]) -> dict[str, bytes]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "fd-test", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(n, 0, 0) for n in names])
    got: dict[str, bytes] = {}
    give_up = time.monotonic() + 30
    while len(got) < len(names) and time.monotonic() < give_up:
        msg = consumer.poll(1.0)
        if msg is not None and msg.error() is None:
            got[msg.topic() or ""] = msg.value() or b""
    consumer.close()
    return got


async def test_thousands_of_topics_under_1024_descriptors(tmp_path: Path) -> None:
    names = [f"fd-{i:05d}" for i in range(TOPICS)]
    sample = sorted({names[0], names[-1], *names[:: max(1, TOPICS // 40)]})
    with trio.fail_after(240):
        async with _gateway_with_fd_limit(tmp_path, 1024) as gw:
            t0 = time.monotonic()
            await trio.to_thread.run_sync(_create_topics, gw.kafka, names)
            created_s = time.monotonic() - t0
            await trio.to_thread.run_sync(_produce, gw.kafka, sample)
            got = await trio.to_thread.run_sync(_consume, gw.kafka, sample)
            total_s = time.monotonic() - t0
            assert got == {n: n.encode() for n in sample}
            assert _open_fds(gw.pid) < 1024
            assert await trio.to_thread.run_sync(_get, gw, "/readyz") == (200, "ok\n")
            log = gw.log_path.read_text(errors="replace")
            assert "Traceback" not in log and "internal error" not in log, gw.log()
            print(f"{TOPICS} topics: created in {created_s:.1f} s, all in {total_s:.1f} s")
    data = tmp_path / "data"
    topic_dirs = [p for s in data.iterdir() if s.is_dir() for p in s.iterdir() if p.is_dir()]
    assert len([p for p in topic_dirs if p.name.startswith("fd-")]) == TOPICS


async def _hold_connections(address: str, count: int) -> list[socket.socket]:
    host, port = address.rsplit(":", 1)
    held: list[socket.socket] = []
    for _ in range(count):
        s = socket.socket()
        s.setblocking(False)
        with suppress(BlockingIOError):  # connecting: the gateway takes it from its backlog
            s.connect((host, int(port)))
        held.append(s)
    await trio.sleep(1.0)  # the gateway accepts (or refuses) them meanwhile
    return held


def _accepted(address: str) -> bool:
    """A real client gets its metadata: the listener takes connections again."""
    consumer = Consumer({"bootstrap.servers": address, "group.id": "fd-probe"})
    try:
        return consumer.list_topics(timeout=10) is not None
    finally:
        consumer.close()


async def test_exhausted_descriptors_refuse_quietly_and_recover(tmp_path: Path) -> None:
    with trio.fail_after(90):
        async with _gateway_with_fd_limit(tmp_path, 160) as gw:
            held = await _hold_connections(gw.kafka, 300)
            try:
                await trio.sleep(2.0)  # a client retrying would keep hitting the limit
                status, why = await trio.to_thread.run_sync(_get, gw, "/readyz")
                assert status == 503 and "file descriptors" in why, (status, why)
                assert await trio.to_thread.run_sync(_metric, gw, FD_EXHAUSTED) > 0
                assert _open_fds(gw.pid) < 160
            finally:
                for s in held:
                    s.close()
            give_up = time.monotonic() + 15
            while (await trio.to_thread.run_sync(_get, gw, "/readyz"))[0] != 200:
                assert time.monotonic() < give_up, gw.log()
                await trio.sleep(0.2)
            assert await trio.to_thread.run_sync(_accepted, gw.kafka)
            lines = gw.log_path.read_text(errors="replace").splitlines()
            about = [ln for ln in lines if "file descriptors" in ln or "EMFILE" in ln]
            assert 1 <= len(about) <= 4, about
            print(*about, sep="\n")
            assert not any("Traceback" in ln for ln in lines), gw.log()
