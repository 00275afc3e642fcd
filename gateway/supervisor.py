"""``streamgate run --workers N``: N gateway processes sharing every listener port, so one
proxy uses every core.

The supervisor (this process) serves no protocol. It picks the listener ports (port 0 is bound
here once, with SO_REUSEPORT, so every worker gets the same concrete port), starts N workers
(``streamgate run`` again, the same arguments plus ``workers=1``, ``reuse_port=true``, the
concrete ports and a private admin port), and the kernel spreads connections over them. Each
worker writes its metrics into a shared directory (prometheus_client's multiprocess mode,
``PROMETHEUS_MULTIPROC_DIR``); the supervisor's admin endpoint serves them summed (gauges as
each declares: open connections summed, ``backend_up`` the lowest), and its ``/readyz`` is ready
while every worker's own ``/readyz`` is. Users that one gateway would keep in memory the workers
keep in one file of theirs (``user_store_file``: changes under a lock), so a user created
through one worker logs in through all. Each worker writes an access log of its own
(``access_log.path`` ``access.jsonl`` -> ``access.worker0.jsonl``, ``access.worker1.jsonl``...).
A worker that dies is started again after a second.
SIGTERM/SIGINT are passed on; each worker drains as a single gateway does. SIGHUP is passed on
to workers that serve TLS (they re-read their certificates).

Correct only where what a client relies on is shared by every gateway on the backend: on the
Kafka backend the broker runs the Kafka groups and the RabbitMQ single active consumers, and
grants and deduplicates producer ids; on the RabbitMQ and Iggy backends the gateways replicate
those groups over a log on the server, and RabbitMQ deduplicates publishers and Kafka producers.
What still lives in one process is refused by each worker rather than split between them: Iggy
consumer groups (FEATURE_UNAVAILABLE), and RabbitMQ Stream publishers with a reference where the
broker does not deduplicate (PRECONDITION_FAILED).

On the embedded backend the data directory keeps one owner: the supervisor starts a store owner
first (``gateway.store_owner``: ``streamgate run`` again with ``store_socket``, no listener), and
the workers reach the store through it (``backends.embedded.link``, a unix socket in the
supervisor's private directory), so every partition, offset, producer's dedup state and
transaction is the owner's, and the workers replicate their groups over a log in the store as
they do on the Iggy backend. Users are kept in the data directory's ``users.json``, as one
gateway keeps them. The owner is stopped after the workers have drained, and started again
(the workers reconnect) if it dies.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import structlog
import trio
from prometheus_client import CollectorRegistry
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead

from gateway.access_log import worker_path
from gateway.admin_http import serve_admin
from gateway.backends.embedded import embedded_path
from gateway.backends.embedded.link import SCHEME
from gateway.config import Config
from gateway.listen_error import naming_address
from gateway.metrics import WorkerProcesses
from gateway.model import GatewayError
from gateway.status_page import StatusBoard, WorkerState
from gateway.tls import RELOAD_POLL_S, ServerTls, configured_tls

log = structlog.get_logger("streamgate.supervisor")

_LISTENERS = ("rog", "kafka", "iggy", "rabbitmq_stream")
_START_WITHIN_S = 60.0
_RESTART_AFTER_S = 1.0
_READY_CHECK_S = 1.0
_ERROR_PREFIX = b"streamgate: "  # how ``streamgate run`` begins the line of what stopped it


class WorkersRefused(ValueError):
    """``--workers`` above one where it cannot be correct; the message is fit to show."""


class WorkerFailed(GatewayError):
    """A worker that could not start; ``streamgate run`` reports it as one line and exits with
    the worker's code when it said why (2: a usage error such as a refused backend URL)."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def check_workers(config: Config) -> None:
    scheme = config.backend.url.partition(":")[0].lower()
    if config.workers < 1:
        raise WorkersRefused(f"workers must be at least 1, not {config.workers}")
    if config.store_socket:
        raise WorkersRefused("--workers: store_socket is the supervisor's to set, not by hand")
    if scheme == "embedded+owner":
        raise WorkersRefused(
            "--workers: an embedded+owner backend URL is the supervisor's; give embedded:DIR"
        )


@dataclass
class _Worker:
    index: int
    process: trio.Process | None = None
    admin: str = ""  # http://host:port of its own admin endpoint
    listening: dict[str, str] = field(default_factory=dict)
    ready: trio.Event = field(default_factory=trio.Event)
    starts: int = 0
    error: str = ""  # its last ``streamgate: ...`` line on stderr (what stopped it)

    @property
    def label(self) -> str:
        return "the store owner" if self.index < 0 else f"worker {self.index}"

    def state(self) -> WorkerState:
        running = self.process is not None and self.process.returncode is None
        pid = None if self.process is None else self.process.pid
        return WorkerState(self.index, pid, running, self.starts)


@dataclass
class Supervised:
    """What ``announce`` prints: the shared listener addresses and the summed admin endpoint."""

    listeners: list[tuple[str, str, int]]  # (protocol, host, port)
    admin: tuple[str, int] | None
    workers: list[int]  # pids
    admin_tls: tuple[str, int] | None = None  # the admin port over TLS (maybe ``admin``)
    owner: int | None = None  # the store owner's pid (embedded backend)


def _reserve(host: str) -> socket.socket:
    """A port bound (not listening) with SO_REUSEPORT: the workers bind it too."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, 0))
    return sock


def _embedded(config: Config) -> bool:
    return config.backend.url.partition(":")[0].lower() == "embedded"


def _owner_args(config: Config, argv: Sequence[str], socket_path: str) -> list[str]:
    extra = ["--set", "workers=1", "--set", f"store_socket={socket_path}"]
    if config.log.format == "auto" and sys.stderr.isatty():
        extra += ["--set", "log.format=console"]
    return [sys.executable, "-m", "gateway.cli", *argv, *extra]


def _worker_args(
    config: Config, argv: Sequence[str], ports: dict[str, int], state_dir: str, index: int
) -> list[str]:
    # A worker's admin endpoint is the supervisor's to read, on loopback and in plaintext: the
    # supervisor serves admin.tls itself.
    extra = ["--set", "workers=1", "--set", "reuse_port=true", "--set", "admin.port=0",
             "--set", "admin.host=127.0.0.1", "--set", "admin.tls.enabled=false"]  # fmt: skip
    if config.access_log.path:
        # A file per worker (the same one again when it is restarted): no two processes append
        # to, or rotate, one file.
        extra += ["--set", f"access_log.path={worker_path(config.access_log.path, index)}"]
    if _embedded(config):
        # The store through its owner; users where one gateway on the directory keeps them.
        extra += ["--set", f"backend.url={SCHEME}:{state_dir}/store.sock"]
        if not config.auth.users_file:
            users = embedded_path(config.backend.url).resolve() / "users.json"
            extra += ["--set", f"auth.users_file={users}"]
    elif not config.auth.users_file:
        # Users kept in memory by one gateway are kept by all workers together: in a file of
        # their own for as long as they run (gone at exit, as memory would be).
        extra += ["--set", f"auth.users_file={state_dir}/users.json"]
    for name, port in ports.items():
        extra += ["--set", f"listeners.{name}.port={port}"]
    if config.log.format == "auto" and sys.stderr.isatty():
        # Their stderr is a pipe to this process (_read_errors): "auto" would mean JSON there.
        extra += ["--set", "log.format=console"]
    return [sys.executable, "-m", "gateway.cli", *argv, *extra]


async def run_workers(
    config: Config, argv: Sequence[str], announce: Callable[[Supervised], None] | None = None
) -> None:
    """Run ``config.workers`` gateway processes until SIGINT/SIGTERM; ``argv`` is the ``run``
    command line they are started with (after ``streamgate``)."""
    check_workers(config)
    ports: dict[str, int] = {}
    hosts: dict[str, str] = {}
    reserved: list[socket.socket] = []
    for name in _LISTENERS:
        listener = getattr(config.listeners, name)
        if not listener.enabled:
            continue
        hosts[name] = config.listener_host(listener)
        if listener.port == 0:
            with naming_address(name, hosts[name], 0):
                sock = _reserve(hosts[name])
            reserved.append(sock)
            ports[name] = sock.getsockname()[1]
        else:
            ports[name] = listener.port
    state_dir = tempfile.mkdtemp(prefix="streamgate-workers-")  # 0700
    metrics_dir = os.path.join(state_dir, "metrics")
    os.mkdir(metrics_dir)
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": metrics_dir, "PYTHONUNBUFFERED": "1"}
    workers = [_Worker(i) for i in range(config.workers)]
    owner = _Worker(-1) if _embedded(config) else None
    stopping = False
    try:
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM, signal.SIGHUP) as signals:
            async with trio.open_nursery() as nursery:
                if owner is not None:  # the store first: the workers reach it as they start
                    command = _owner_args(config, argv, os.path.join(state_dir, "store.sock"))
                    nursery.start_soon(
                        _keep_running, owner, command, env, metrics_dir, lambda: stopping
                    )
                    with trio.move_on_after(_START_WITHIN_S):
                        await owner.ready.wait()
                    if not owner.ready.is_set():
                        raise WorkerFailed(
                            f"the store owner was not ready within {_START_WITHIN_S:.0f} s"
                        )
                for worker in workers:
                    command = _worker_args(config, argv, ports, state_dir, worker.index)
                    nursery.start_soon(
                        _keep_running, worker, command, env, metrics_dir, lambda: stopping
                    )
                with trio.move_on_after(_START_WITHIN_S):
                    for worker in workers:
                        await worker.ready.wait()
                if not all(w.ready.is_set() for w in workers):
                    raise WorkerFailed(f"the workers were not ready within {_START_WITHIN_S:.0f} s")
                for sock in reserved:  # every worker holds the ports now
                    sock.close()
                reserved.clear()
                registry = CollectorRegistry()
                MultiProcessCollector(registry, path=metrics_dir)  # type: ignore[no-untyped-call]
                WorkerProcesses(lambda: _live_pids(workers, owner), registry)
                admin: tuple[str, int] | None = None
                admin_tls: tuple[str, int] | None = None
                admin_certs: ServerTls | None = None
                if config.admin.enabled:
                    host = config.admin.host or config.host
                    status = StatusBoard(
                        registry,
                        # The scheme names the backend (rabbitmq-stream+tls: rabbitmq_stream,
                        # kafkas: kafka); this process builds none.
                        backend=_backend_name(config.backend.url),
                        backend_url=config.backend.url,
                        listeners=[(n, hosts[n], p) for n, p in ports.items()],
                        scope=f"{len(workers)} workers, their metrics summed",
                        workers=lambda: [w.state() for w in workers],
                    )
                    # admin.tls as ``run`` serves it: on its own port beside the plaintext one
                    # (tls.port >= 0), or the admin port itself in TLS
                    tls = configured_tls(config.admin.tls, "admin")
                    side = tls is not None and config.admin.tls.port >= 0
                    with naming_address("admin", host, config.admin.port):
                        admin = await nursery.start(
                            _serve_admin, host, config.admin.port, registry, workers, status,
                            None if side else tls,
                        )  # fmt: skip
                    if side:
                        with naming_address("admin (tls)", host, config.admin.tls.port):
                            admin_tls = await nursery.start(
                                _serve_admin, host, config.admin.tls.port, registry, workers,
                                status, tls, False,
                            )  # fmt: skip
                    elif tls is not None:
                        admin_tls = admin
                    if tls is not None:
                        admin_certs = tls
                        nursery.start_soon(_poll_certificates, tls)
                if announce is not None:
                    announce(
                        Supervised(
                            listeners=[(n, hosts[n], p) for n, p in ports.items()],
                            admin=admin,
                            workers=[w.process.pid for w in workers if w.process is not None],
                            admin_tls=admin_tls,
                            owner=None
                            if owner is None or owner.process is None
                            else owner.process.pid,
                        )
                    )
                log.info("streamgate workers ready", workers=len(workers))
                async for signum in signals:
                    if signum == signal.SIGHUP:  # re-read TLS certificates: each worker does
                        if admin_certs is not None:
                            log.info("SIGHUP: re-reading tls certificates")
                            admin_certs.reload(force=True)
                        for worker in workers if _serves_tls(config) else ():
                            if worker.process is not None and worker.process.returncode is None:
                                worker.process.send_signal(signal.SIGHUP)
                        continue
                    log.info("shutting down workers", signal=signal.Signals(signum).name)
                    stopping = True
                    for worker in workers:
                        if worker.process is not None and worker.process.returncode is None:
                            worker.process.send_signal(signal.SIGTERM)
                    with trio.move_on_after(config.limits.drain_timeout_s + 5):
                        for worker in workers:
                            if worker.process is not None:
                                await worker.process.wait()
                    # The store last: what the drained workers wrote is closed (and fsynced).
                    if owner is not None and owner.process is not None:
                        if owner.process.returncode is None:
                            owner.process.send_signal(signal.SIGTERM)
                        with trio.move_on_after(_START_WITHIN_S):
                            await owner.process.wait()
                    nursery.cancel_scope.cancel()
                    break
    finally:
        for sock in reserved:
            sock.close()
        for worker in [*workers, *([owner] if owner is not None else [])]:
            if worker.process is not None and worker.process.returncode is None:
                worker.process.kill()  # by pid: a worker this process started
        shutil.rmtree(state_dir, ignore_errors=True)


def _serves_tls(config: Config) -> bool:
    """Whether a worker listens for SIGHUP (without TLS it would die of it, as a gateway does)."""
    return any(getattr(config.listeners, name).tls.enabled for name in _LISTENERS)


def _live_pids(workers: list[_Worker], owner: _Worker | None = None) -> dict[str, int]:
    """process_* series by ``worker`` label: "0", "1"... and "store" (the store owner)."""
    live = {
        str(w.index): w.process.pid
        for w in workers
        if w.process is not None and w.process.returncode is None
    }
    if owner is not None and owner.process is not None and owner.process.returncode is None:
        live["store"] = owner.process.pid
    return live


async def _keep_running(
    worker: _Worker,
    command: list[str],
    env: dict[str, str],
    metrics_dir: str,
    stopping: Callable[[], bool],
) -> None:
    """Start the worker, read its stdout (addresses; everything else is passed on), and start
    it again after a second whenever it dies unasked."""
    while True:
        process = await trio.lowlevel.open_process(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
            env=env,
        )  # fmt: skip
        worker.process = process
        worker.starts += 1
        worker.listening = {}
        worker.error = ""
        try:
            assert process.stdout is not None and process.stderr is not None
            async with trio.open_nursery() as pipes:
                pipes.start_soon(_read_errors, worker, process.stderr)
                await _read_output(worker, process.stdout)
            await process.wait()
        finally:
            if process.returncode is None:
                with trio.CancelScope(shield=True):
                    process.kill()
                    await process.wait()
            # Its live gauges (open connections...) no longer count; its counters still do.
            mark_process_dead(process.pid, metrics_dir)  # type: ignore[no-untyped-call]
        if stopping():
            return
        if not worker.ready.is_set():
            # It never started (a port taken, a backend URL it refuses): it would fail again.
            # Its one line is said once, by the supervisor, not once per worker.
            if worker.error:
                raise WorkerFailed(worker.error, 2 if process.returncode == 2 else 1)
            raise WorkerFailed(
                f"{worker.label} exited with code {process.returncode} before it was "
                "ready (its error is above)"
            )
        log.error("worker exited; starting it again", worker=worker.label, code=process.returncode)
        await trio.sleep(_RESTART_AFTER_S)


async def _read_output(worker: _Worker, stdout: trio.abc.ReceiveStream) -> None:
    out = sys.stdout.buffer
    pending = b""
    async for chunk in stdout:
        *lines, pending = (pending + chunk).split(b"\n")
        for line in lines:
            words = line.decode(errors="replace").split()
            if len(words) >= 4 and words[1:3] == ["listening", "on"]:
                if words[0] == "admin":
                    worker.admin = words[3]
                    worker.ready.set()  # the admin line comes last
                elif words[0] == "store":  # the store owner's one line
                    worker.ready.set()
                else:
                    worker.listening[words[0]] = words[3]
                continue
            out.write(line + b"\n")
            out.flush()


async def _read_errors(worker: _Worker, stderr: trio.abc.ReceiveStream) -> None:
    """Pass the worker's stderr (its logs) on, except the ``streamgate: ...`` line of a worker
    that stops before it is ready: every worker would say the same, the supervisor says it once."""
    out = sys.stderr.buffer
    pending = b""
    async for chunk in stderr:
        *lines, pending = (pending + chunk).split(b"\n")
        for line in lines:
            if line.startswith(_ERROR_PREFIX):
                worker.error = line[len(_ERROR_PREFIX) :].decode(errors="replace")
                if not worker.ready.is_set():
                    continue
            out.write(line + b"\n")
            out.flush()
    if pending:
        out.write(pending)
        out.flush()


async def _serve_admin(
    host: str,
    port: int,
    registry: CollectorRegistry,
    workers: list[_Worker],
    status: StatusBoard,
    tls: ServerTls | None = None,
    sample_status: bool = True,
    task_status: trio.TaskStatus[tuple[str, int]] = trio.TASK_STATUS_IGNORED,
) -> None:
    async def ready() -> tuple[bool, str]:
        for worker in workers:
            if worker.process is None or worker.process.returncode is not None:
                return False, f"worker {worker.index} is not running"
            ok, why = await trio.to_thread.run_sync(_worker_ready, worker.admin)
            if not ok:
                return False, f"worker {worker.index}: {why}"
        return True, "ok"

    await serve_admin(
        host=host, port=port, registry=registry, ready=ready, status=status, tls=tls,
        sample_status=sample_status, task_status=task_status,
    )  # fmt: skip


async def _poll_certificates(tls: ServerTls) -> None:
    """The admin port's certificates re-read when their files change (SIGHUP: the loop above)."""
    while True:
        await trio.sleep(RELOAD_POLL_S)
        tls.reload()


def _worker_ready(admin: str) -> tuple[bool, str]:
    try:
        with urllib.request.urlopen(f"{admin}/readyz", timeout=_READY_CHECK_S) as response:
            return response.status == 200, response.read().decode(errors="replace").strip()
    except urllib.error.HTTPError as exc:
        return False, exc.read().decode(errors="replace").strip()
    except OSError as exc:
        return False, str(exc)


def _backend_name(url: str) -> str:
    scheme = url.partition(":")[0].lower().removesuffix("+tls").replace("-", "_")
    return "kafka" if scheme == "kafkas" else scheme


__all__ = [
    "Supervised",
    "WorkerFailed",
    "WorkersRefused",
    "check_workers",
    "run_workers",
]
