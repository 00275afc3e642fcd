"""Consumer groups through the gateway's classic group coordinator, with confluent-kafka members.

Each member is a confluent-kafka Consumer polled in its own thread (librdkafka serves rebalances
from poll). A member that must die without leaving runs in its own OS process and is SIGKILLed
by pid: librdkafka heartbeats from a background thread even when nobody polls, so only a process
that is really gone stops heartbeating.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any

import pytest
import trio
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from gateway.app import Running
from tests.helpers.waiting import eventually

from .conftest import bootstrap, in_thread

PARTITIONS = 6
ALL = frozenset(range(PARTITIONS))
SESSION_TIMEOUT_MS = 6000  # the gateway's group.min.session.timeout.ms

Key = tuple[int, int]  # (partition, offset)


def _config(servers: str, group: str, name: str) -> dict[str, Any]:
    # auto.offset.reset=latest: every test commits offset 0 first, so a member that finds no
    # committed offset (lost commit) jumps to the end and the loss shows.
    return {
        "bootstrap.servers": servers,
        "group.id": group,
        "client.id": name,
        "enable.auto.commit": False,
        "auto.offset.reset": "latest",
        "session.timeout.ms": SESSION_TIMEOUT_MS,
        "heartbeat.interval.ms": 500,
        "max.poll.interval.ms": 30_000,
    }


class Member:
    """A consumer polled in a worker thread; commits each message synchronously after
    recording it, and publishes its current assignment for the test to watch."""

    def __init__(self, name: str, servers: str, topic: str, group: str) -> None:
        self.name = name
        self._config = _config(servers, group, name)
        self._topic = topic
        self._lock = threading.Lock()
        self._assignment: frozenset[int] = frozenset()
        self._seen: dict[Key, bytes] = {}
        self._errors: list[str] = []
        self._commit_failures: list[str] = []
        self._stopping = threading.Event()
        self.closed = False

    def run(self) -> None:
        consumer = Consumer(self._config)
        consumer.subscribe([self._topic])
        try:
            while not self._stopping.is_set():
                msg = consumer.poll(0.1)
                assignment = frozenset(tp.partition for tp in consumer.assignment())
                with self._lock:
                    self._assignment = assignment
                if msg is None:
                    continue
                error = msg.error()
                if error is not None:
                    with self._lock:
                        self._errors.append(str(error))
                    continue
                partition, offset, value = msg.partition(), msg.offset(), msg.value()
                assert partition is not None and offset is not None and value is not None
                with self._lock:
                    self._seen[(partition, offset)] = value
                try:
                    consumer.commit(message=msg, asynchronous=False)
                except KafkaException as exc:
                    # A commit lost to a rebalance: the message comes again to the next owner.
                    with self._lock:
                        self._commit_failures.append(str(exc.args[0]))
        finally:
            consumer.close()  # LeaveGroup
            with self._lock:
                self._assignment = frozenset()
                self.closed = True

    def stop(self) -> None:
        self._stopping.set()

    @property
    def assignment(self) -> frozenset[int]:
        with self._lock:
            return self._assignment

    @property
    def seen(self) -> dict[Key, bytes]:
        with self._lock:
            return dict(self._seen)

    @property
    def errors(self) -> list[str]:
        with self._lock:
            return list(self._errors)

    def __repr__(self) -> str:
        with self._lock:
            return (
                f"<{self.name} assigned={sorted(self._assignment)} seen={len(self._seen)} "
                f"errors={self._errors} commit_failures={self._commit_failures[-3:]}>"
            )


# The crashing member: the same loop in a separate interpreter, reporting on stdout (flushed
# before each commit, so whatever it committed the test has seen) until it is killed.
CHILD = r"""
import json, sys, time
from confluent_kafka import Consumer, KafkaException

config, topic = json.loads(sys.argv[1]), sys.argv[2]

def say(**what):
    print(json.dumps(what), flush=True)

consumer = Consumer(config)
consumer.subscribe([topic])
reported = None
deadline = time.monotonic() + 90  # a safety net only: the test kills it long before
while time.monotonic() < deadline:
    msg = consumer.poll(0.1)
    assignment = sorted(tp.partition for tp in consumer.assignment())
    if assignment != reported:
        say(assigned=assignment)
        reported = assignment
    if msg is None:
        continue
    if msg.error() is not None:
        say(error=str(msg.error()))
        continue
    say(p=msg.partition(), o=msg.offset(), v=msg.value().decode())
    try:
        consumer.commit(message=msg, asynchronous=False)
    except KafkaException as exc:
        say(commit_failure=str(exc.args[0]))
"""


class ProcessMember:
    """The CHILD consumer in its own process; ``kill()`` SIGKILLs it by pid."""

    def __init__(self, name: str, servers: str, topic: str, group: str) -> None:
        self.name = name
        self._argv = [sys.executable, "-c", CHILD, json.dumps(_config(servers, group, name)), topic]
        self.assignment: frozenset[int] = frozenset()
        self.seen: dict[Key, bytes] = {}
        self.errors: list[str] = []
        self.stderr = bytearray()
        self.proc: trio.Process | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        self.proc = await trio.lowlevel.open_process(
            self._argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        task_status.started()
        try:
            async with trio.open_nursery() as nursery:
                assert self.proc.stdout is not None and self.proc.stderr is not None
                nursery.start_soon(self._drain_stderr, self.proc.stderr)
                await self._read_reports(self.proc.stdout)
        finally:
            self.kill()
            with trio.CancelScope(shield=True):
                await self.proc.wait()

    async def _drain_stderr(self, stream: trio.abc.ReceiveStream) -> None:
        async for chunk in stream:
            self.stderr += chunk

    async def _read_reports(self, stream: trio.abc.ReceiveStream) -> None:
        pending = b""
        async for chunk in stream:
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                report = json.loads(line)
                if "assigned" in report:
                    self.assignment = frozenset(report["assigned"])
                elif "p" in report:
                    self.seen[(report["p"], report["o"])] = report["v"].encode()
                elif "error" in report:
                    self.errors.append(report["error"])
        self.assignment = frozenset()  # gone

    def kill(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            os.kill(self.proc.pid, signal.SIGKILL)

    def __repr__(self) -> str:
        rc = None if self.proc is None else self.proc.returncode
        return (
            f"<{self.name} pid={None if self.proc is None else self.proc.pid} rc={rc} "
            f"assigned={sorted(self.assignment)} seen={len(self.seen)} errors={self.errors}>"
        )


def _create(servers: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": servers})
    admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS)])[topic].result(15)


def _commit_start(servers: str, topic: str, group: str) -> None:
    """Commit offset 0 everywhere (a standalone commit, before any member joins)."""
    c = Consumer(_config(servers, group, "setup"))
    try:
        start = [TopicPartition(topic, p, 0) for p in range(PARTITIONS)]
        c.commit(offsets=start, asynchronous=False)
        assert [tp.offset for tp in c.committed(start, timeout=10)] == [0] * PARTITIONS
    finally:
        c.close()


def _produce(servers: str, topic: str, numbers: Iterable[int]) -> dict[Key, bytes]:
    """Keyed messages, message i to partition i % 6; returns where each one landed."""
    p = Producer({"bootstrap.servers": servers, "linger.ms": 5})
    landed: dict[Key, bytes] = {}
    errors: list[KafkaError] = []

    def report(err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            errors.append(err)
        else:
            landed[(msg.partition(), msg.offset())] = msg.value()

    for i in numbers:
        p.produce(topic, b"m%d" % i, key=b"k%d" % i, partition=i % PARTITIONS,
                  on_delivery=report)  # fmt: skip
    assert p.flush(30) == 0, "messages left undelivered"
    assert not errors, errors
    return landed


def _splits_all(assignments: list[frozenset[int]]) -> bool:
    """Every member has partitions, no partition twice, all six covered."""
    return (
        all(assignments)
        and sum(len(a) for a in assignments) == PARTITIONS
        and frozenset().union(*assignments) == ALL
    )


async def _wait_until(what: str, cond: Callable[[], bool], describe: Callable[[], object],
                      timeout_s: float) -> float:  # fmt: skip
    """Poll ``cond`` until true; returns the seconds it took, fails the test after timeout_s."""
    start = trio.current_time()
    with trio.move_on_after(timeout_s):
        await eventually(cond, interval=0.05)
        return trio.current_time() - start
    pytest.fail(f"not {what} after {timeout_s} s: {describe()}")


async def _start(nursery: trio.Nursery, member: Member) -> None:
    nursery.start_soon(partial(trio.to_thread.run_sync, member.run, abandon_on_cancel=True))
    await trio.lowlevel.checkpoint()


async def _stop(members: list[Member]) -> None:
    """Stop the members and give them time to close while the gateway is still up (a failing
    test would otherwise abandon their threads to retry a gateway that is gone)."""
    for m in members:
        m.stop()
    with trio.move_on_after(10, shield=True):
        await eventually(lambda: all(m.closed for m in members), interval=0.05)


def _describe(servers: str, group: str) -> tuple[str, dict[str, frozenset[int]]]:
    admin = AdminClient({"bootstrap.servers": servers})
    desc = admin.describe_consumer_groups([group])[group].result(15)
    members = {
        m.client_id: frozenset(tp.partition for tp in m.assignment.topic_partitions)
        for m in desc.members
    }
    return desc.state.name, members


async def test_three_members_split_six_partitions_then_one_leaves(gateway: Running) -> None:
    servers = bootstrap(gateway)
    topic, group = "grp-split", f"g-{uuid.uuid4().hex[:8]}"
    await in_thread(lambda: _create(servers, topic))
    members = [Member(name, servers, topic, group) for name in ("a", "b", "c")]
    everyone = list(members)
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            try:
                for m in members:
                    await _start(nursery, m)
                await _wait_until(
                    "three members splitting the six partitions",
                    lambda: _splits_all([m.assignment for m in members]),
                    lambda: members,
                    timeout_s=20,
                )
                assert sorted(len(m.assignment) for m in members) == [2, 2, 2]  # range assignor
                # The coordinator's view agrees with the members' own.
                state, described = await in_thread(lambda: _describe(servers, group))
                assert state == "STABLE"
                assert described == {m.name: m.assignment for m in members}

                leaver = members.pop()
                leaver.stop()  # close(): LeaveGroup
                await _wait_until(
                    "the two remaining members covering all six partitions",
                    lambda: leaver.closed and _splits_all([m.assignment for m in members]),
                    lambda: (leaver, members),
                    timeout_s=15,
                )
                assert sorted(len(m.assignment) for m in members) == [3, 3]
                state, described = await in_thread(lambda: _describe(servers, group))
                assert state == "STABLE"
                assert described == {m.name: m.assignment for m in members}
                for m in everyone:
                    assert not m.errors, m
            finally:
                await _stop(everyone)


async def test_leave_and_crash_lose_no_message(gateway: Running) -> None:
    servers = bootstrap(gateway)
    topic, group = "grp-noloss", f"g-{uuid.uuid4().hex[:8]}"
    await in_thread(lambda: _create(servers, topic))
    await in_thread(lambda: _commit_start(servers, topic, group))
    produced: dict[Key, bytes] = {}
    produced |= await in_thread(lambda: _produce(servers, topic, range(0, 200)))

    a, b, c = (Member(name, servers, topic, group) for name in ("a", "b", "c"))
    crashing = ProcessMember("d", servers, topic, group)
    threads = [a, b, c]

    def consumed() -> dict[Key, bytes]:
        seen: dict[Key, bytes] = {}
        for m in threads:
            seen |= m.seen
        return seen | crashing.seen

    def progress() -> object:
        missing = sorted(produced.keys() - consumed().keys())
        return {"members": [*threads, crashing], "missing": (len(missing), missing[:10])}

    with trio.fail_after(120):
        async with trio.open_nursery() as nursery:
            try:
                for m in threads:
                    await _start(nursery, m)
                await nursery.start(crashing.run)
                await _wait_until(
                    "four members splitting the six partitions",
                    lambda: _splits_all(
                        [a.assignment, b.assignment, c.assignment, crashing.assignment]
                    ),
                    progress,
                    timeout_s=25,
                )
                await _wait_until(
                    "all four consuming",
                    lambda: all(m.seen for m in threads) and bool(crashing.seen),
                    progress,
                    timeout_s=40,  # the subprocess member starts slowly on a loaded machine
                )
                produced |= await in_thread(lambda: _produce(servers, topic, range(200, 400)))

                c.stop()  # a clean leave while messages are flowing
                await _wait_until(
                    "a, b and d covering all six partitions after c left",
                    lambda: (
                        c.closed and _splits_all([a.assignment, b.assignment, crashing.assignment])
                    ),
                    progress,
                    timeout_s=15,
                )
                produced |= await in_thread(lambda: _produce(servers, topic, range(400, 500)))
                # Let d own work when it dies: it has consumed from its partitions.
                await _wait_until(
                    "d consuming",
                    lambda: any(p in crashing.assignment for p, _ in crashing.seen),
                    progress,
                    timeout_s=15,
                )
                crashing.kill()  # SIGKILL: no LeaveGroup, no more heartbeats
                produced |= await in_thread(lambda: _produce(servers, topic, range(500, 600)))
                took = await _wait_until(
                    "a and b taking over d's partitions after its session timed out",
                    lambda: _splits_all([a.assignment, b.assignment]),
                    progress,
                    timeout_s=SESSION_TIMEOUT_MS / 1000 + 15,
                )
                assert crashing.proc is not None and crashing.proc.returncode == -signal.SIGKILL
                print(f"takeover {took:.1f} s after the kill")

                await _wait_until(
                    "every produced message consumed", lambda: produced.keys() <= consumed().keys(),
                    progress, timeout_s=20,
                )  # fmt: skip
            finally:
                crashing.kill()
                await _stop(threads)

    assert len(produced) == 600
    seen = consumed()
    assert {k: seen[k] for k in produced} == produced  # same message at each (partition, offset)
    assert not (seen.keys() - produced.keys()), "consumed messages nobody produced"
    for m in threads:
        assert not m.errors, m
    assert not crashing.errors, crashing
