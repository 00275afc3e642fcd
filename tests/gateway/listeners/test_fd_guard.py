"""Out of file descriptors (gateway/listeners/fd_guard.py and the accept loop in serve.py):
accept errors back off and are logged once per period with a count, connections taken from the
reserve are closed, and readiness follows. A real gateway under a lowered RLIMIT_NOFILE:
tests/gateway/test_fd_exhaustion.py."""

from __future__ import annotations

import errno
import os

import trio
import trio.testing
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from gateway.listeners.connection import Connection, Drain, IdleTimeout, Limits
from gateway.listeners.fd_guard import FdGuard, serve_listeners_quietly
from gateway.listeners.serve import _Server
from gateway.metrics import Metrics

FD_EXHAUSTED = ("kafka", "fd_exhausted")


class FailingListener(trio.abc.Listener[trio.SocketStream]):
    """accept() fails with EMFILE ``failures`` times (at once, as a full backlog makes it),
    then hands out one end of a socket pair, then waits for ever."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.attempts = 0
        self.accepted: list[trio.SocketStream] = []
        self.event = trio.Event()

    async def accept(self) -> trio.SocketStream:
        self.attempts += 1
        await trio.lowlevel.checkpoint()
        if self.attempts <= self.failures:
            raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))
        if self.accepted:
            await trio.sleep_forever()
        a, b = trio.socket.socketpair()
        b.close()
        self.accepted.append(trio.SocketStream(a))
        self.event.set()
        return self.accepted[-1]

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()


async def _nothing(conn: Connection) -> None:
    await trio.lowlevel.checkpoint()


def _server() -> tuple[_Server, Metrics]:
    metrics = Metrics(CollectorRegistry(), backend="embedded")
    return _Server("kafka", _nothing, metrics, Limits(), Drain()), metrics


def _count(metrics: Metrics) -> float:
    return float(metrics.connection_errors.labels(*FD_EXHAUSTED)._value.get())


async def test_emfile_backs_off_and_logs_once_per_period(
    autojump_clock: trio.testing.MockClock,
) -> None:
    server, metrics = _server()
    guard = FdGuard(limit=1 << 20, reserve=16, log_every_s=10.0, clock=trio.current_time)
    listener = FailingListener(failures=40)
    with capture_logs() as logs:
        async with trio.open_nursery() as nursery:
            start = trio.current_time()
            nursery.start_soon(server.accept, listener, nursery, guard)
            await listener.event.wait()
            elapsed = trio.current_time() - start
            assert guard.exhausted is False  # the accept that worked cleared it
            nursery.cancel_scope.cancel()
    # 40 failures back off 0.05 s doubling to 1 s: about 36 s, not 40 x 0 s (a busy loop)
    assert 30 < elapsed < 45
    assert _count(metrics) == 40
    warned = [e for e in logs if e["event"].startswith("file descriptors exhausted")]
    assert 3 <= len(warned) <= 5  # once per 10 s, not once per failure
    assert sum(e["refused"] for e in warned) <= 40
    assert warned[0]["cause"] == "EMFILE"
    assert any(e["event"] == "file descriptors available again" for e in logs)


async def test_a_connection_from_the_reserve_is_closed() -> None:
    server, metrics = _server()
    listener = FailingListener(failures=0)
    guard = FdGuard(limit=0, reserve=0)  # every descriptor number is "in the reserve"
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server.accept, listener, nursery, guard)
            await listener.event.wait()
            await trio.sleep(0.05)
            nursery.cancel_scope.cancel()
    assert _count(metrics) == 1
    assert guard.exhausted
    assert server.active == 0  # refused before any session began
    assert listener.accepted[0].socket.fileno() == -1  # closed


def test_readiness_until_a_descriptor_is_below_the_reserve_again() -> None:
    guard = FdGuard(limit=1 << 20, reserve=16)
    assert guard.check() is None
    guard.note("kafka", "EMFILE")
    assert guard.exhausted
    assert guard.check() is None  # a probe descriptor far below the limit: recovered
    assert not guard.exhausted
    tight = FdGuard(limit=8, reserve=4)  # any descriptor this process opens is >= 4
    tight.note("kafka", "reserve")
    why = tight.check()
    assert why is not None and "file descriptors" in why
    assert tight.exhausted


def test_over_reserve() -> None:
    guard = FdGuard(limit=1024, reserve=64)
    assert not guard.over_reserve(959)
    assert guard.over_reserve(960)
    assert FdGuard(limit=2048).reserve == 128 and FdGuard(limit=100).reserve == 16


async def test_the_admin_port_backs_off_without_a_reserve(
    autojump_clock: trio.testing.MockClock,
) -> None:
    listener = FailingListener(failures=5)
    guard = FdGuard(limit=0, reserve=0, clock=trio.current_time)  # a reserve it must ignore
    handled: list[trio.SocketStream] = []

    async def handler(stream: trio.SocketStream) -> None:
        handled.append(stream)
        await trio.lowlevel.checkpoint()

    with capture_logs() as logs:
        async with trio.open_nursery() as nursery:
            start = trio.current_time()
            nursery.start_soon(serve_listeners_quietly, handler, [listener], "admin", guard)
            await listener.event.wait()
            await trio.sleep(0.01)
            nursery.cancel_scope.cancel()
    assert 1.0 < trio.current_time() - start < 2.0  # 0.05 + 0.1 + 0.2 + 0.4 + 0.8
    assert handled == listener.accepted  # served although its number is "in the reserve"
    assert handled[0].socket.fileno() == -1  # and closed after
    assert len([e for e in logs if e["event"].startswith("file descriptors")]) == 1


async def test_a_closed_connection_logs_the_cause_inside_a_handlers_nursery() -> None:
    """A handler that runs its own nursery (RabbitMQ Stream, Iggy) raises the cause one group
    deeper: the log line names the cause, not "Exceptions from Trio nursery"."""

    async def handler(conn: Connection) -> None:
        async def idle() -> None:
            await trio.lowlevel.checkpoint()
            raise IdleTimeout("no request for 1 s")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(idle)

    metrics = Metrics(CollectorRegistry(), backend="embedded")
    server = _Server("rabbitmq_stream", handler, metrics, Limits(), Drain())
    a, b = trio.socket.socketpair()
    with capture_logs() as logs, trio.fail_after(5):
        await server.session(trio.SocketStream(a))
    b.close()
    closed = [e for e in logs if e["event"] == "connection closed" and "reason" in e]
    assert [(e["reason"], e["error"]) for e in closed] == [("idle_timeout", "no request for 1 s")]
