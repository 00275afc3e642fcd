"""The access log's parts: the lines the router and the request accounting leave (schema, nulls,
no secret, durations), the bounded queue (drops counted), the writer (flushes on shutdown, write
errors counted) and size rotation, over real files and a real embedded store."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from prometheus_client import CollectorRegistry

from gateway.access_log import AccessLog, Client, RotatingFile, worker_path
from gateway.backends.embedded import open_embedded
from gateway.coordination import UserStore
from gateway.listeners.connection import Request, RequestMeters
from gateway.metrics import Metrics
from gateway.model import (
    Append,
    Authenticate,
    CreateTopic,
    DeleteTopic,
    ListStreams,
    Message,
    MessageBatch,
    NotFound,
    Read,
    Topic,
    TopicConfig,
    Unauthorized,
)
from gateway.router import RequestContext, Router
from tests.helpers.waiting import eventually

KEYS = [
    "time", "protocol", "command", "wire_command", "stream", "topic", "partition", "messages",
    "bytes", "duration_s", "backend_s", "waited_s", "outcome", "error_type", "user", "peer",
]  # fmt: skip
TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
TOPIC = Topic("s", "t")
SECRET = b"Hunter2-Secret-Pw"


def access_log(path: Path, registry: CollectorRegistry | None = None, **kw: Any) -> AccessLog:
    metrics = Metrics(registry if registry is not None else CollectorRegistry())
    kw.setdefault("max_bytes", 0)
    kw.setdefault("backups", 0)
    return AccessLog(str(path), metrics=metrics, **kw)


def lines(path: Path) -> list[dict[str, Any]]:
    out = [json.loads(text) for text in path.read_text().splitlines()]
    for line in out:
        assert list(line) == KEYS
        assert TIME.match(line["time"]), line["time"]
    return out


def dropped(registry: CollectorRegistry, reason: str) -> float:
    labels = {"reason": reason}
    return registry.get_sample_value("streamgate_access_log_dropped_total", labels) or 0.0


@asynccontextmanager
async def logging_router(
    tmp_path: Path, protocol: str
) -> AsyncIterator[tuple[Router, RequestMeters, Path]]:
    """A router on an embedded store and a listener's meters, both writing one access log
    (``tmp_path/access.jsonl``), its writer running; the writer stops (flushing) on exit."""
    path = tmp_path / "access.jsonl"
    log = access_log(path)
    meters = RequestMeters(Metrics(CollectorRegistry()), protocol, log)
    async with (
        open_embedded(tmp_path / "data", fsync="never") as backend,
        trio.open_nursery() as nursery,
    ):
        await nursery.start(log.run)
        yield Router(backend, meters.metrics, access_log=log), meters, path
        nursery.cancel_scope.cancel()


async def test_commands_through_the_router_each_leave_one_line(tmp_path: Path) -> None:
    path = tmp_path / "access.jsonl"
    log = access_log(path)
    users = UserStore({"alice": SECRET.decode()})
    with trio.fail_after(10):
        async with (
            open_embedded(tmp_path / "data", fsync="never") as backend,
            trio.open_nursery() as nursery,
        ):
            await nursery.start(log.run)
            router = Router(backend, Metrics(CollectorRegistry()), users=users, access_log=log)
            client = Client("10.0.0.7:5555")
            ctx = RequestContext("iggy", "login_user", client=client)
            await router.execute(
                Authenticate(mechanism="PLAIN", username="alice", secret=SECRET), ctx
            )
            with pytest.raises(Unauthorized):
                await router.execute(
                    Authenticate(mechanism="PLAIN", username="mallory", secret=SECRET), ctx
                )
            client.user = "alice"  # what Connection.bind(user=...) does after the login
            ctx = RequestContext("iggy", "send_messages", client=client)
            await router.execute(CreateTopic(topic=TOPIC, partitions=2, config=TopicConfig()), ctx)
            batch = MessageBatch([Message(value=b"v%d" % i, key=b"kk") for i in range(3)])
            await router.execute(Append(topic=TOPIC, partition=1, batch=batch), ctx)
            read = await router.execute(Read(topic=TOPIC, partition=1, offset=0), ctx)
            with pytest.raises(NotFound):
                await router.execute(DeleteTopic(topic=Topic("s", "missing")), ctx)
            # A command the gateway issues on its own: no client.
            await router.execute(ListStreams(), RequestContext("rabbitmq_stream", "sac"))
            nursery.cancel_scope.cancel()  # the writer writes what is queued, then closes
    got = lines(path)
    assert [(g["command"], g["outcome"], g["error_type"]) for g in got] == [
        ("authenticate", "ok", None),
        ("authenticate", "error", "unauthorized"),
        ("create_topic", "ok", None),
        ("append", "ok", None),
        ("read", "ok", None),
        ("delete_topic", "error", "not_found"),
        ("list_streams", "ok", None),
    ]
    login, refused, created, append, read_line, missing, own = got
    assert (login["user"], login["peer"], login["protocol"]) == ("alice", "10.0.0.7:5555", "iggy")
    assert refused["user"] == "mallory"  # the name it tried, never what it tried it with
    assert SECRET.decode() not in path.read_text()
    assert (created["stream"], created["topic"], created["partition"]) == ("s", "t", None)
    assert created["messages"] is None and created["bytes"] is None
    assert (append["topic"], append["partition"], append["messages"]) == ("t", 1, 3)
    assert append["bytes"] == 3 * (2 + 2)  # values and keys of a batch without a wire form
    assert (read_line["messages"], read_line["waited_s"]) == (read.count, 0.0)
    assert read_line["bytes"] > 0 and append["waited_s"] is None
    assert (missing["topic"], missing["user"]) == ("missing", "alice")
    assert own["user"] is None and own["peer"] is None
    for line in got:
        # No wire request held them: each carries its own time as the request's.
        assert line["duration_s"] == line["backend_s"] >= 0


async def test_a_wire_requests_commands_carry_its_duration_without_the_long_poll(
    tmp_path: Path,
) -> None:
    with trio.fail_after(10):
        async with logging_router(tmp_path, "kafka") as (router, meters, path):
            setup = RequestContext("kafka", "create_topics")
            await router.execute(
                CreateTopic(topic=TOPIC, partitions=1, config=TopicConfig()), setup
            )
            started = trio.current_time()
            with Request(meters, "fetch", Client("127.0.0.1:1")) as request:
                await router.execute(Read(topic=TOPIC, partition=0, offset=0), request.ctx)
                # Long-polls 0.3 s for a message that never comes: waiting, not work.
                await router.execute(
                    Read(topic=TOPIC, partition=0, offset=0, max_wait_ms=300), request.ctx
                )
                await trio.sleep(0.05)  # the gateway's own share (decoding, encoding...)
            whole_s = trio.current_time() - started
            assert request.ctx.access_lines is None  # ended: later commands log on their own
            with Request(meters, "ping") as request:
                request.command = "ping"  # answered by the listener itself
    _, first, waited, ping = lines(path)
    assert first["duration_s"] == waited["duration_s"]
    assert waited["waited_s"] >= 0.29
    # The request's duration is its time without the wait (however slow the machine): the
    # sleep is in it, the wait is not.
    assert 0.05 <= first["duration_s"] <= whole_s - waited["waited_s"] + 1e-3
    assert first["backend_s"] <= first["duration_s"] and waited["backend_s"] <= first["duration_s"]
    assert (ping["command"], ping["wire_command"], ping["backend_s"]) == ("ping", "ping", None)
    assert ping["topic"] is None and ping["peer"] is None and ping["outcome"] == "ok"


async def test_a_request_the_listener_fails_after_its_commands_has_a_line(tmp_path: Path) -> None:
    """An Iggy topic looked up by name: the lookup succeeded, the listener answered not_found."""
    with trio.fail_after(10):
        async with logging_router(tmp_path, "iggy") as (router, meters, path):
            with Request(meters, "poll_messages", Client("127.0.0.1:2", "root")) as request:
                request.command = "poll_messages"
                await router.execute(ListStreams(), request.ctx)
                request.error_type = "not_found"
            with Request(meters, "delete_topic") as request:  # its command carried the error
                request.command = "delete_topic"
                with pytest.raises(NotFound):
                    await router.execute(DeleteTopic(topic=Topic("s", "x")), request.ctx)
                request.error_type = "not_found"
    got = [(g["command"], g["wire_command"], g["error_type"], g["user"]) for g in lines(path)]
    assert got == [
        ("list_streams", "poll_messages", None, "root"),
        ("poll_messages", "poll_messages", "not_found", "root"),
        ("delete_topic", "delete_topic", "not_found", None),
    ]


async def test_a_full_queue_drops_and_counts_never_waits(tmp_path: Path) -> None:
    registry = CollectorRegistry()
    path = tmp_path / "access.jsonl"
    log = access_log(path, registry, capacity=3)
    ctx = RequestContext("rog", "append")
    for _ in range(5):  # no writer running: the queue fills
        log.request_done(ctx, 0.001, "append", "")
    assert dropped(registry, "queue_full") == 2
    assert dropped(registry, "write_error") == 0
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await nursery.start(log.run)
            nursery.cancel_scope.cancel()
    assert len(lines(path)) == 3


async def test_lines_are_written_while_it_runs(tmp_path: Path) -> None:
    path = tmp_path / "access.jsonl"
    log = access_log(path, flush_interval_s=0.05)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await nursery.start(log.run)
            log.request_done(RequestContext("rog", "ping"), 0.001, "ping", "")
            await eventually(lambda: bool(path.read_text()))  # a file: no event to await
            nursery.cancel_scope.cancel()
    assert [g["command"] for g in lines(path)] == ["ping"]


async def test_write_errors_are_counted_and_the_gateway_goes_on(tmp_path: Path) -> None:
    registry = CollectorRegistry()
    log = access_log(Path("/dev/full"), registry)  # every write: ENOSPC
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await nursery.start(log.run)
            for _ in range(4):
                log.request_done(RequestContext("rog", "ping"), 0.001, "ping", "")
            await log.flush()
            log.request_done(RequestContext("rog", "ping"), 0.001, "ping", "")
            nursery.cancel_scope.cancel()
    assert dropped(registry, "write_error") == 5


async def test_an_unopenable_path_is_one_clear_error(tmp_path: Path) -> None:
    log = access_log(tmp_path / "no" / "such" / "dir" / "access.jsonl")
    with trio.fail_after(10), pytest.raises(OSError, match=r"^access_log.path: cannot open .*"):
        await log.run()


def test_rotation_keeps_whole_lines_under_max_bytes_and_backups(tmp_path: Path) -> None:
    path = tmp_path / "access.jsonl"
    f = RotatingFile(str(path), max_bytes=100, backups=2)
    f.open()
    written = [b"%02d%s\n" % (i, b"x" * 27) for i in range(20)]  # 30 bytes each: 3 a file
    f.write(written[:4])
    for i in range(4, 20):
        f.write([written[i]])
    f.close()
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["access.jsonl", "access.jsonl.1", "access.jsonl.2"]
    kept = b"".join((tmp_path / n).read_bytes() for n in files[::-1] if n != "access.jsonl")
    kept += path.read_bytes()
    assert kept == b"".join(written[-8:])  # oldest first, nothing torn, nothing out of order
    assert all(p.stat().st_size <= 100 for p in tmp_path.iterdir())
    # Reopened, it goes on where it stood (the size is the file's, not zero).
    f.open()
    f.write(written[:2])
    f.close()
    assert (tmp_path / "access.jsonl.1").read_bytes() == b"".join([*written[-2:], written[0]])


def test_rotation_edge_cases(tmp_path: Path) -> None:
    never = RotatingFile(str(tmp_path / "never"), max_bytes=0, backups=3)
    never.open()
    never.write([b"y" * 50] * 10)
    never.close()
    assert [p.name for p in tmp_path.iterdir()] == ["never"]
    single = RotatingFile(str(tmp_path / "single"), max_bytes=10, backups=0)
    single.open()
    single.write([b"12345\n", b"a line longer than max_bytes\n", b"z\n"])
    single.close()
    # No backups: a full file is dropped; a line longer than max_bytes gets a file of its own.
    assert (tmp_path / "single").read_bytes() == b"z\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["never", "single"]


def test_each_worker_has_a_file_of_its_own() -> None:
    assert worker_path("/var/log/sg/access.jsonl", 0) == "/var/log/sg/access.worker0.jsonl"
    assert worker_path("access", 3) == "access.worker3"
