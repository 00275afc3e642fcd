"""kcat 1.7.1 (librdkafka 2.0.2, the Debian build) against the gateway's Kafka listener.

kcat is the old-librdkafka client of kafka.md: it only compresses if Produce advertises v0 and it
chokes on tagged fields (§1.4 traps 1 and 2), and its balanced consumer waits on the JoinGroup
long-poll (trap 10). Each kcat runs as a subprocess bounded in time and is killed (by its pid)
only if it overruns. Under CI=true a missing kcat fails the tests instead of skipping them.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
import trio
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from gateway.app import Running
from gateway.model import DEFAULT_STREAM, Read, Topic
from protocols.kafka import Compression, parse_header
from tests.helpers.kafka_roundtrip import kcat_path as find_kcat

from .conftest import bootstrap, in_thread

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
EXPECTED_CODEC = {
    "none": Compression.NONE,
    "gzip": Compression.GZIP,
    "snappy": Compression.SNAPPY,
    "lz4": Compression.LZ4,
    "zstd": Compression.ZSTD,
}
# Output of the consumers: key, value, partition, offset, timestamp, headers (name=v,name=v).
FORMAT = r"%k\t%s\t%p\t%o\t%T\t%h\n"
QUERY_LINE = re.compile(r"^(?P<topic>\S+) \[(?P<partition>\d+)\] offset (?P<offset>-?\d+)$")


@pytest.fixture
def kcat_path() -> str:
    return find_kcat()


@dataclass(frozen=True)
class Ran:
    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    def ok(self) -> Ran:
        assert self.returncode == 0, (
            f"kcat {' '.join(self.args)} exited {self.returncode}\n"
            f"stdout:\n{self.stdout}\nstderr:\n{self.stderr}"
        )
        return self


async def _drain(stream: trio.abc.ReceiveStream, into: bytearray) -> None:
    async for chunk in stream:
        into += chunk


async def _feed(stream: trio.abc.SendStream, data: bytes) -> None:
    # Closing stdin is kcat's end of input. If kcat exits before reading it all, the pipe
    # breaks; its exit status and stderr tell why.
    async with stream:
        with contextlib.suppress(trio.BrokenResourceError):
            await stream.send_all(data)


async def run_kcat(
    kcat: str, *args: str, stdin: bytes | None = None, home: Path, limit_s: float = 30
) -> Ran:
    """Run kcat to completion; kill it by pid (and fail) if it outlives ``limit_s``.

    ``-F /dev/null`` and a scratch HOME keep a developer's ~/.config/kcat.conf out of it."""
    argv = [kcat, "-F", "/dev/null", *args]
    env = {**os.environ, "HOME": str(home)}
    env.pop("KCAT_CONFIG", None)
    proc = await trio.lowlevel.open_process(
        argv,
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    out, err = bytearray(), bytearray()
    try:
        with trio.move_on_after(limit_s) as scope:
            async with trio.open_nursery() as nursery:
                assert proc.stdout is not None and proc.stderr is not None
                nursery.start_soon(_drain, proc.stdout, out)
                nursery.start_soon(_drain, proc.stderr, err)
                if stdin is not None:
                    assert proc.stdin is not None
                    nursery.start_soon(_feed, proc.stdin, stdin)
                await proc.wait()
    finally:
        if proc.returncode is None:
            proc.kill()  # SIGKILL to this one pid
            with trio.CancelScope(shield=True):
                await proc.wait()
        with trio.CancelScope(shield=True):
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                if stream is not None:
                    await stream.aclose()
    if scope.cancelled_caught:
        pytest.fail(
            f"kcat {' '.join(args)} still running after {limit_s} s (killed)\n"
            f"stdout:\n{out.decode(errors='replace')}\nstderr:\n{err.decode(errors='replace')}"
        )
    assert proc.returncode is not None
    return Ran(
        tuple(args), proc.returncode, out.decode(errors="replace"), err.decode(errors="replace")
    )


@dataclass(frozen=True)
class Consumed:
    key: str
    value: str
    partition: int
    offset: int
    timestamp: int
    headers: str


def _parse_consumed(stdout: str) -> list[Consumed]:
    got = []
    for line in stdout.splitlines():
        key, value, partition, offset, ts, headers = line.split("\t")
        got.append(Consumed(key, value, int(partition), int(offset), int(ts), headers))
    return got


def _create(servers: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": servers})
    admin.create_topics([NewTopic(topic, num_partitions=partitions)])[topic].result(15)


def _lines(codec: str, n: int) -> list[tuple[str, str]]:
    # Repetitive values so that every codec really shrinks them: librdkafka sends a batch
    # uncompressed when compressing would not make it smaller.
    return [(f"{codec}-k{i}", f"{codec}-v{i}-" + "abcdefgh" * 40) for i in range(n)]


def _stdin(lines: list[tuple[str, str]]) -> bytes:
    return "".join(f"{k}:{v}\n" for k, v in lines).encode()


async def test_metadata_lists_broker_and_topic(
    gateway: Running, kcat_path: str, tmp_path: Path
) -> None:
    servers = bootstrap(gateway)
    await in_thread(lambda: _create(servers, "kc-meta", 3))
    ran = (await run_kcat(kcat_path, "-L", "-J", "-b", servers, home=tmp_path)).ok()
    md = json.loads(ran.stdout)
    assert md["brokers"] == [{"id": md["controllerid"], "name": servers}]
    topics = {t["topic"]: t for t in md["topics"]}
    assert "kc-meta" in topics, md
    parts = topics["kc-meta"]["partitions"]
    assert sorted(p["partition"] for p in parts) == [0, 1, 2]
    assert all(p["leader"] == md["controllerid"] and "error" not in p for p in parts), parts

    one = (await run_kcat(kcat_path, "-L", "-b", servers, "-t", "kc-meta", home=tmp_path)).ok()
    assert f"broker {md['controllerid']} at {servers}" in one.stdout
    assert 'topic "kc-meta" with 3 partitions' in one.stdout


async def test_metadata_of_an_empty_gateway(
    gateway: Running, kcat_path: str, tmp_path: Path
) -> None:
    servers = bootstrap(gateway)
    ran = await run_kcat(kcat_path, "-L", "-J", "-m", "3", "-b", servers, home=tmp_path)
    ran.ok()
    md = json.loads(ran.stdout)
    assert md["brokers"] == [{"id": md["controllerid"], "name": servers}]
    assert md["topics"] == []


async def test_produce_every_codec_then_group_consume_and_resume(
    gateway: Running, kcat_path: str, tmp_path: Path
) -> None:
    servers = bootstrap(gateway)
    topic, group = "kc-codecs", f"kcg-{uuid.uuid4().hex[:8]}"
    await in_thread(lambda: _create(servers, topic, 1))
    per_run = 20
    sent: list[tuple[str, str, str]] = []  # key, value, headers as kcat prints them
    for run, codec in enumerate(CODECS):
        lines = _lines(codec, per_run)
        headers = f"codec={codec},run={run}"
        args = ["-P", "-b", servers, "-t", topic, "-z", codec, "-K:"]
        args += ["-H", f"codec={codec}", "-H", f"run={run}"]
        (await run_kcat(kcat_path, *args, stdin=_stdin(lines), home=tmp_path)).ok()
        sent += [(k, v, headers) for k, v in lines]

    # What kcat sent is stored as it came: one codec per run, as asked for (trap 1: an old
    # librdkafka silently falls back to uncompressed batches).
    assert gateway.backend is not None
    result = await gateway.backend.read(
        Read(topic=Topic(DEFAULT_STREAM, topic), partition=0, offset=0, whole_batches=True)
    )
    covered = 0
    for batch in result.batches:
        assert batch.wire is not None, "the embedded store should keep Kafka batches as-is"
        header = parse_header(batch.wire.data)
        first, last = batch.base_offset, batch.base_offset + len(batch) - 1
        codec = CODECS[first // per_run]
        assert last // per_run == first // per_run, f"batch {first}-{last} spans two kcat runs"
        assert header.compression is EXPECTED_CODEC[codec], (codec, header)
        assert header.records_count == len(batch)
        covered += len(batch)
    assert covered == len(sent) == result.high_watermark

    # Balanced group consumer: everything, in order, with keys and headers.
    group_args = ["-b", servers, "-G", group, "-X", "auto.offset.reset=earliest", "-f", FORMAT]
    first_read = await run_kcat(
        kcat_path, *group_args, "-c", str(len(sent)), topic, home=tmp_path, limit_s=45
    )
    got = _parse_consumed(first_read.ok().stdout)
    assert [(c.key, c.value, c.headers) for c in got] == sent
    assert [c.offset for c in got] == list(range(len(sent)))
    assert {c.partition for c in got} == {0}
    assert all(c.timestamp > 0 for c in got)

    # More messages; a second kcat in the group starts at the committed offset.
    more = _lines("after", 7)
    args = ["-P", "-b", servers, "-t", topic, "-z", "gzip", "-K:"]
    (await run_kcat(kcat_path, *args, stdin=_stdin(more), home=tmp_path)).ok()
    resumed = await run_kcat(kcat_path, *group_args, "-e", topic, home=tmp_path, limit_s=45)
    got = _parse_consumed(resumed.ok().stdout)
    assert [(c.key, c.value) for c in got] == more
    assert [c.offset for c in got] == list(range(len(sent), len(sent) + len(more)))

    # A plain (unbalanced) consumer of the whole partition sees the same log.
    plain = await run_kcat(
        kcat_path, "-C", "-b", servers, "-t", topic, "-o", "beginning", "-e", "-f", FORMAT,
        home=tmp_path,
    )  # fmt: skip
    got = _parse_consumed(plain.ok().stdout)
    assert [(c.key, c.value) for c in got] == [(k, v) for k, v, _ in sent] + more


async def test_offset_query_by_timestamp(gateway: Running, kcat_path: str, tmp_path: Path) -> None:
    servers = bootstrap(gateway)
    topic = "kc-query"
    await in_thread(lambda: _create(servers, topic, 1))
    for run in range(3):  # three produce runs: three different moments
        lines = _lines(f"q{run}", 5)
        args = ["-P", "-b", servers, "-t", topic, "-K:"]
        (await run_kcat(kcat_path, *args, stdin=_stdin(lines), home=tmp_path)).ok()
    plain = await run_kcat(
        kcat_path, "-C", "-b", servers, "-t", topic, "-o", "beginning", "-e", "-f", FORMAT,
        home=tmp_path,
    )  # fmt: skip
    log = _parse_consumed(plain.ok().stdout)
    assert [c.offset for c in log] == list(range(15))

    async def query(ts: int) -> int:
        ran = await run_kcat(kcat_path, "-Q", "-b", servers, "-t", f"{topic}:0:{ts}", home=tmp_path)
        lines = [m for m in map(QUERY_LINE.match, ran.ok().stdout.splitlines()) if m]
        assert len(lines) == 1, ran
        assert (lines[0]["topic"], lines[0]["partition"]) == (topic, "0")
        return int(lines[0]["offset"])

    for probe in {log[0].timestamp, log[5].timestamp, log[10].timestamp, log[-1].timestamp}:
        # Kafka: the first offset whose timestamp is at or after the asked one.
        expected = min(c.offset for c in log if c.timestamp >= probe)
        assert await query(probe) == expected, probe
    assert await query(0) == 0
    assert await query(log[-1].timestamp + 60_000) == -1  # nothing that late
    assert await query(-1) == 15  # latest: the high watermark
    assert await query(-2) == 0  # earliest
