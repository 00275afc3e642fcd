"""A real RabbitMQ (Debian's rabbitmq-server 3.10.8, stream plugin) on loopback, for tests.

``RabbitMQServer`` runs one private node (rabbitmq-stream.md §1.2) in a directory of its own:
config, cookie (HOME), mnesia (stream segments), logs, pid file. Every port is chosen free at
the first start and kept for restarts: stream, AMQP, Erlang distribution, and the port of the
node's own ``epmd``. That epmd is a child of ours on 127.0.0.1: a node otherwise starts a
global ``epmd -daemon`` on 4369 that outlives it and that every node on the machine shares.
The node name is unique per instance, so several servers run at once.

The node is ``/usr/lib/rabbitmq/bin/rabbitmq-server`` (never the /usr/sbin wrapper, which
``su``s to the rabbitmq user, never systemd): a shell that runs the beam in the background and
turns SIGTERM into a clean stop. It is ready once a PeerProperties round trip on the stream
port succeeds and the AMQP port accepts. Everything is stopped by pid: ``rabbitmqctl stop
<pidfile>``, then SIGTERM and SIGKILL of the beam and of our children, then SIGKILL of any
descendant left (the beam's erl_child_setup and inet_gethost run in sessions of their own).

    async with running_rabbitmq(tmp_path / "rabbitmq") as server:  # or the ``rabbitmq`` fixture
        server.stream_address; await server.stop(); await server.start(); await server.kill()

With ``tls=make_certs(dir)`` the node also has a stream TLS listener (``stream_tls_port``).
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import pytest
import trio

from tests.helpers import rabbitmq_probes as probes
from tests.helpers.certs import Certs
from tests.helpers.processes import (
    alive,
    descendants,
    end_child,
    free_ports,
    send_signal,
    until_dead,
)
from tests.helpers.rabbitmq_probes import PASSWORD, USER

__all__ = [
    "HOST",
    "PASSWORD",
    "RABBITMQ_BIN",
    "USER",
    "RabbitMQServer",
    "RabbitMQStartError",
    "alive",
    "missing_rabbitmq",
    "rabbitmq",
    "require_rabbitmq",
    "running_rabbitmq",
]

HOST = "127.0.0.1"
RABBITMQ_BIN = Path("/usr/lib/rabbitmq/bin")
EPMD = "epmd"

READY_LIMIT_S = 60.0  # launch to stream-ready: 3-5 s observed on 2 cores (§1.2)
CTL_LIMIT_S = 60.0  # one rabbitmqctl / rabbitmq-streams call
STOP_LIMIT_S = 30.0  # `rabbitmqctl stop` (2-4 s observed) before the beam gets SIGTERM
SIGNAL_LIMIT_S = 10.0  # after each SIGTERM before SIGKILL
WARM_UP_STREAM = "streamgate-warm-up"  # created and deleted at the first start
START_ATTEMPTS = 3  # fresh ports on a first start that dies early (a port taken meanwhile)


class RabbitMQStartError(RuntimeError):
    pass


def missing_rabbitmq() -> str | None:
    """Why a real RabbitMQ cannot run here, or None."""
    if not (RABBITMQ_BIN / "rabbitmq-server").exists():
        return f"{RABBITMQ_BIN}/rabbitmq-server is missing (rabbitmq-server; `make apt-test`)"
    if not any((Path(d) / EPMD).exists() for d in os.get_exec_path()):
        return "epmd is missing (erlang-base; `make apt-test`)"
    return None


def require_rabbitmq() -> None:
    """Skip the test when RabbitMQ is not installed; fail it under CI=true, which must run it."""
    why = missing_rabbitmq()
    if why is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"{why}; CI must run the RabbitMQ tests")
    pytest.skip(why)


@dataclass(frozen=True)
class Ports:
    stream: int
    amqp: int
    dist: int
    epmd: int


class RabbitMQServer:
    def __init__(
        self,
        base: Path,
        *,
        advertised_host: str = HOST,
        advertised_port: int | None = None,
        tls: Certs | None = None,
    ) -> None:
        self.base = base
        # A stream TLS listener beside the plain one (which the readiness probe keeps using),
        # with these files; client certificates are asked for and verified when sent.
        self.tls = tls
        self.tls_port: int | None = None  # chosen with the others, kept for restarts
        # What Open and Metadata announce (§1.3); read at every start, so a test may change
        # them before a restart. None: the real stream port.
        self.advertised_host = advertised_host
        self.advertised_port = advertised_port
        self.nodename = f"rabbit-{secrets.token_hex(4)}@localhost"
        self.ports: Ports | None = None
        self.beam_pid: int | None = None
        self._known: dict[int, int] = {}  # every process of ours ever seen -> its start time
        self.start_durations: list[float] = []
        self.stop_durations: list[float] = []
        self._launcher: trio.Process | None = None
        self._epmd: trio.Process | None = None

    # --- addresses ---------------------------------------------------------------------------

    def _ports(self) -> Ports:
        assert self.ports is not None, "not started yet"
        return self.ports

    @property
    def stream_port(self) -> int:
        return self._ports().stream

    @property
    def amqp_port(self) -> int:
        return self._ports().amqp

    @property
    def stream_address(self) -> tuple[str, int]:
        return HOST, self.stream_port

    @property
    def stream_tls_port(self) -> int:
        assert self.tls_port is not None, "not started, or started without tls"
        return self.tls_port

    @property
    def log_dir(self) -> Path:
        return self.base / "log"

    @property
    def pid_file(self) -> Path:
        return self.base / "rabbit.pid"

    @property
    def running(self) -> bool:
        return self._launcher is not None

    @property
    def started_pids(self) -> set[int]:
        """Every process of ours seen so far (launcher, beam and its helpers, epmd)."""
        self._refresh()
        return set(self._known)

    def pids(self) -> list[int]:
        """The processes of ours that are alive now."""
        self._refresh()
        return sorted(p for p, start in self._known.items() if alive(p, start))

    def _refresh(self) -> None:
        roots = [p.pid for p in (self._launcher, self._epmd) if p is not None]
        self._known.update(descendants(roots))  # the beam's helpers only while it lives

    def log_tail(self, lines: int = 40) -> str:
        parts = []
        for name in ("stdout.log", "rabbit.log"):
            path = self.log_dir / name
            if path.exists():
                text = path.read_text(errors="replace").splitlines()[-lines:]
                parts.append(f"--- {path}\n" + "\n".join(text))
        return "\n".join(parts) or f"(no logs in {self.log_dir})"

    # --- files and environment ---------------------------------------------------------------

    def env(self) -> dict[str, str]:
        """The environment of the node and of its CLI tools: they must agree on HOME (cookie),
        node name and epmd port. Inherited RABBITMQ_*/ERL_* settings are dropped."""
        ports, base = self._ports(), self.base
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("RABBITMQ_", "ERL_")) and k not in ("NOTIFY_SOCKET",)
        }
        env.update(
            HOME=str(base / "home"),
            LANG="C.UTF-8",  # the CLI (Elixir) warns on a latin1 VM
            LC_ALL="C.UTF-8",
            ERL_EPMD_ADDRESS=HOST,
            ERL_EPMD_PORT=str(ports.epmd),
            ERL_CRASH_DUMP=str(base / "log" / "erl_crash.dump"),  # not into the cwd
            RABBITMQ_NODENAME=self.nodename,
            RABBITMQ_CONF_ENV_FILE=str(base / "rabbitmq-env.conf"),  # not /etc/rabbitmq's
            RABBITMQ_CONFIG_FILE=str(base / "rabbitmq.conf"),
            RABBITMQ_CONFIG_FILES=str(base / "conf.d"),  # not /etc/rabbitmq/conf.d
            RABBITMQ_ADVANCED_CONFIG_FILE=str(base / "advanced.config"),
            RABBITMQ_ENABLED_PLUGINS_FILE=str(base / "enabled_plugins"),
            RABBITMQ_MNESIA_BASE=str(base / "mnesia"),
            RABBITMQ_LOG_BASE=str(base / "log"),
            RABBITMQ_PID_FILE=str(self.pid_file),
            RABBITMQ_DIST_PORT=str(ports.dist),
            RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}",
            # The CLI is a node too: loopback, and any free port (0) instead of 35672-35682.
            RABBITMQ_CTL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}",
            RABBITMQ_CTL_DIST_PORT_MIN="0",
            RABBITMQ_CTL_DIST_PORT_MAX="0",
        )
        return env

    def _write_files(self) -> None:
        ports, base = self._ports(), self.base
        for sub in ("home", "mnesia", "log", "conf.d"):
            (base / sub).mkdir(parents=True, exist_ok=True)
        base.chmod(0o700)
        (base / "rabbitmq-env.conf").write_text("")
        cookie = base / "home" / ".erlang.cookie"
        if not cookie.exists():  # written before the first boot so the CLI never races it
            cookie.write_text(secrets.token_hex(16).upper())
            cookie.chmod(0o400)
        advertised = self.advertised_port or ports.stream
        (base / "rabbitmq.conf").write_text(
            f"listeners.tcp.1 = {HOST}:{ports.amqp}\n"
            f"stream.listeners.tcp.1 = {HOST}:{ports.stream}\n"
            f"stream.advertised_host = {self.advertised_host}\n"
            f"stream.advertised_port = {advertised}\n"
            "loopback_users.guest = true\n"
            "log.console = false\n"
            "log.file = rabbit.log\n"
            "log.file.level = info\n" + self._tls_config()
        )
        (base / "enabled_plugins").write_text("[rabbitmq_stream].\n")

    def _tls_config(self) -> str:
        """RabbitMQ 3.10's stream TLS listener (rabbitmq.com/stream.html#tls) and the node's
        ssl_options: TLS 1.2+, a client certificate verified when one is sent."""
        if self.tls is None:
            return ""
        return (
            f"stream.listeners.ssl.1 = {HOST}:{self.stream_tls_port}\n"
            f"ssl_options.cacertfile = {self.tls.ca_file}\n"
            f"ssl_options.certfile = {self.tls.cert_file}\n"
            f"ssl_options.keyfile = {self.tls.key_file}\n"
            "ssl_options.verify = verify_peer\n"
            "ssl_options.fail_if_no_peer_cert = false\n"
            "ssl_options.versions.1 = tlsv1.3\n"
            "ssl_options.versions.2 = tlsv1.2\n"
        )

    # --- processes ---------------------------------------------------------------------------

    async def _spawn(self, argv: list[str], log: IO[bytes]) -> trio.Process:
        process = await trio.lowlevel.open_process(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=self.env(),
            cwd=self.base,
            start_new_session=True,  # a terminal's Ctrl-C reaches pytest, which stops it
        )
        self._refresh()
        return process

    async def _ensure_epmd(self) -> None:
        if self._epmd is not None and self._epmd.returncode is None:
            return
        with (self.log_dir / "epmd.log").open("ab") as log:
            self._epmd = await self._spawn(
                [EPMD, "-port", str(self._ports().epmd), "-address", HOST], log
            )
        with trio.fail_after(10):
            while not await self._accepts(self._ports().epmd):
                if self._epmd.returncode is not None:
                    raise RabbitMQStartError(f"epmd exited {self._epmd.returncode}")
                await trio.sleep(0.02)

    @staticmethod
    async def _accepts(port: int) -> bool:
        try:
            stream = await trio.open_tcp_stream(HOST, port)
        except OSError:
            return False
        await stream.aclose()
        return True

    async def start(self) -> None:
        """Start the node (and our epmd) and wait until it is ready, at most
        ``READY_LIMIT_S``: on the same data and ports as before when it ran already; on a new
        data directory the stream coordinator is made first (``_start_stream_coordinator``)."""
        assert self._launcher is None, "already running"
        first = self.ports is None
        for attempt in range(1, START_ATTEMPTS + 1):
            if first:
                ports = free_ports(5 if self.tls is not None else 4, HOST)
                self.ports = Ports(*ports[:4])
                self.tls_port = ports[4] if self.tls is not None else None
            try:
                await self._start_once()
                return
            except RabbitMQStartError:
                await self._teardown(graceful=False, epmd=True)
                if not first or attempt == START_ATTEMPTS:
                    raise

    async def _start_once(self) -> None:
        began = time.monotonic()
        self.base.mkdir(parents=True, exist_ok=True)
        self._write_files()
        self.pid_file.unlink(missing_ok=True)
        self.beam_pid = None
        await self._ensure_epmd()
        with (self.log_dir / "stdout.log").open("ab") as log:
            launcher = await self._spawn([str(RABBITMQ_BIN / "rabbitmq-server")], log)
        self._launcher = launcher
        with trio.move_on_after(READY_LIMIT_S):
            # The stream listener opens before the AMQP one, and the node still halts if that
            # one cannot bind: ready means both (and the stream TLS listener, if asked for).
            while not (
                await probes.peer_properties_ok(self.stream_address)
                and await self._accepts(self.amqp_port)
                and (self.tls is None or await self._accepts(self.stream_tls_port))
            ):
                if launcher.returncode is not None:
                    raise RabbitMQStartError(
                        f"rabbitmq-server exited {launcher.returncode} before it was ready\n"
                        + self.log_tail()
                    )
                await trio.sleep(0.1)
            self.beam_pid = int(self.pid_file.read_text().split()[0])
            self._refresh()
            if not self._coordinator_on_disk():
                await self._start_stream_coordinator()
            self.start_durations.append(time.monotonic() - began)
            return
        raise RabbitMQStartError(
            f"stream port {self.stream_port} not ready after {READY_LIMIT_S} s\n" + self.log_tail()
        )

    async def open_properties(self) -> dict[str, str]:
        """What the server advertises in Open: ``advertised_host``, ``advertised_port``."""
        return await probes.open_properties(self.stream_address)

    async def stream_available(self, name: str) -> bool:
        """Whether stream ``name`` has a leader now (Metadata)."""
        return await probes.stream_available(self.stream_address, name)

    async def wait_stream_available(self, name: str, limit_s: float = 30) -> None:
        """Until ``name`` has had a leader for 0.2 s. After a restart a stream comes back a
        little after the port opens (0.2-0.5 s here: the stream coordinator elects itself and
        starts each writer); after a SIGKILL it replays its log and restarts each writer once
        more a few ms later (a new epoch). Clients get STREAM_NOT_AVAILABLE or no leader until
        then: a backend must retry those, a test that only wants the data waits here."""
        with trio.fail_after(limit_s):
            settled = 0
            while settled < 3:
                settled = settled + 1 if await self.stream_available(name) else 0
                await trio.sleep(0.1)

    async def _start_stream_coordinator(self) -> None:
        """Create and delete a stream, then wait until the stream coordinator is on disk.

        The coordinator (a Ra server) is created with the node's first stream, and Ra records
        it in names.dets, which dets saves after 500 ms idle (auto_save). A node SIGKILLed
        before that restarts without it, and every stream stays STREAM_NOT_AVAILABLE for good
        (observed on 3.10.8). A real server made its coordinator long ago: so do we."""
        await probes.create_and_delete(self.stream_address, WARM_UP_STREAM)
        with trio.fail_after(10):
            while not self._coordinator_on_disk():  # noqa: ASYNC110 - a file: no event
                await trio.sleep(0.05)

    def _coordinator_on_disk(self) -> bool:
        node = self.nodename
        names = self.base / "mnesia" / node / "coordination" / node / "names.dets"
        return names.exists() and b"rabbit_stream_coordinator" in names.read_bytes()

    async def stop(self) -> None:
        """A clean stop (``rabbitmqctl stop <pidfile>``, signals after bounds), epmd too."""
        began = time.monotonic()
        await self._teardown(graceful=True, epmd=True)
        self.stop_durations.append(time.monotonic() - began)

    async def kill(self) -> None:
        """A crash: SIGKILL of the beam, nothing flushed. Our epmd stays, as it would."""
        assert self.beam_pid is not None, "not running"
        send_signal(self.beam_pid, signal.SIGKILL)
        await self._teardown(graceful=False, epmd=False)

    async def aclose(self) -> None:
        """Stop whatever still runs; after it no process of ours is alive."""
        with trio.CancelScope(shield=True):
            if self.running:
                await self.stop()
            await self._teardown(graceful=False, epmd=True)

    async def _teardown(self, *, graceful: bool, epmd: bool) -> None:
        self._refresh()  # the beam's helpers, while they are still its children
        launcher, beam = self._launcher, self.beam_pid
        if beam is None and self.pid_file.exists():  # a start that failed after the pid file
            with suppress(ValueError, OSError):
                beam = int(self.pid_file.read_text().split()[0])
        if launcher is not None:
            if beam is not None and alive(beam) and graceful:
                with trio.move_on_after(STOP_LIMIT_S):
                    await self._cli("rabbitmqctl", "stop", str(self.pid_file), check=False)
            grace_s = SIGNAL_LIMIT_S if graceful else 0
            if beam is not None and not await until_dead([beam], grace_s):
                send_signal(beam, signal.SIGTERM)  # the beam stops cleanly on SIGTERM (OTP >= 23)
                if not await until_dead([beam], SIGNAL_LIMIT_S):
                    send_signal(beam, signal.SIGKILL)
            # The launcher's `wait` ends with the beam; its SIGTERM trap stops the beam if the
            # pid file never came.
            await end_child(launcher, SIGNAL_LIMIT_S)
        if epmd and self._epmd is not None:
            await end_child(self._epmd, 0)  # epmd ends on SIGTERM at once
            self._epmd = None
        spared = {self._epmd.pid} if self._epmd is not None else set()
        left = [p for p, t in self._known.items() if p not in spared and alive(p, t)]
        for pid in left:  # helpers that outlived the beam, orphans by now
            send_signal(pid, signal.SIGKILL)
        await until_dead(left, SIGNAL_LIMIT_S)
        self._launcher = None
        self.beam_pid = None

    # --- CLI ---------------------------------------------------------------------------------

    async def rabbitmqctl(self, *args: str) -> str:
        """``rabbitmqctl`` against this node; its stdout (a non-zero exit raises)."""
        return await self._cli("rabbitmqctl", *args)

    async def rabbitmq_streams(self, *args: str) -> str:
        """``rabbitmq-streams`` against this node, e.g. ``add_super_stream name --partitions 3``
        (the only way to create a super stream on 3.10, §1.2)."""
        return await self._cli("rabbitmq-streams", *args)

    async def _cli(self, tool: str, *args: str, check: bool = True) -> str:
        with trio.fail_after(CTL_LIMIT_S):
            done = await trio.run_process(
                [str(RABBITMQ_BIN / tool), *args],
                stdin=subprocess.DEVNULL,
                capture_stdout=True,
                capture_stderr=True,
                check=False,
                env=self.env(),
                cwd=self.base,
            )
        out = done.stdout.decode(errors="replace")
        if check and done.returncode != 0:
            err = done.stderr.decode(errors="replace")
            raise RuntimeError(f"{tool} {' '.join(args)} exited {done.returncode}\n{out}{err}")
        return out


@asynccontextmanager
async def running_rabbitmq(
    base: Path,
    *,
    advertised_host: str = HOST,
    advertised_port: int | None = None,
    tls: Certs | None = None,
) -> AsyncIterator[RabbitMQServer]:
    """A started ``RabbitMQServer`` in ``base`` (with a stream TLS listener on these
    certificates when ``tls`` is given); everything it started is ended on exit."""
    server = RabbitMQServer(
        base, advertised_host=advertised_host, advertised_port=advertised_port, tls=tls
    )
    try:
        await server.start()
        yield server
    finally:
        await server.aclose()


@pytest.fixture
async def rabbitmq(tmp_path: Path) -> AsyncIterator[RabbitMQServer]:
    """A running server in the test's own directory (logs stay there for a post-mortem);
    stopped after the test, every process of it ended. A conftest takes it in with
    ``from tests.helpers.rabbitmq_server import rabbitmq as rabbitmq``."""
    require_rabbitmq()
    async with running_rabbitmq(tmp_path / "rabbitmq") as server:
        yield server
