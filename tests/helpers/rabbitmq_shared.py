"""One real RabbitMQ for a whole test session, and a fresh virtual host for every test.

Starting a node takes 3-5 s (rabbitmq-stream.md §1.2): the backend conformance suite shares one
instead of starting one per test. The node lives in a thread of its own running trio (so its
processes are watched in real time whatever clock a test uses) and is stopped by pid at the end
of the session (``stop_shared_rabbitmq``, from a session fixture). Each test takes a virtual
host nobody used, so a backend sees an empty catalog, as the embedded backend sees an empty
directory: hosts are made in batches with one ``rabbitmqctl import_definitions`` (the guest
user gets every permission on them).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Final

import trio

from tests.helpers.rabbitmq_server import USER, RabbitMQServer, require_rabbitmq

__all__ = ["SharedRabbitMQ", "shared_rabbitmq", "stop_shared_rabbitmq"]

START_LIMIT_S: Final = 120.0  # launch (3-5 s here) with room for a loaded machine
VHOST_BATCH: Final = 16


class SharedRabbitMQ:
    def __init__(self, base: Path) -> None:
        self.base = base
        self.server = RabbitMQServer(base / "rabbitmq")
        self._token: trio.lowlevel.TrioToken | None = None
        self._stop: trio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name="shared-rabbitmq", daemon=True)
        self._vhosts: list[str] = []
        self._made = 0
        self._lock = threading.Lock()

    def _main(self) -> None:
        async def serve() -> None:
            self._token = trio.lowlevel.current_trio_token()
            self._stop = trio.Event()
            try:
                await self.server.start()
            except BaseException as exc:
                self._error = exc
                self._ready.set()
                await self.server.aclose()
                return
            self._ready.set()
            try:
                await self._stop.wait()
            finally:
                await self.server.aclose()

        try:
            trio.run(serve)
        except BaseException as exc:  # pragma: no cover - reported by start()
            self._error = exc
            self._ready.set()

    def start(self) -> None:
        """Blocking: start the node, wait until it serves."""
        self._thread.start()
        if not self._ready.wait(START_LIMIT_S):
            raise RuntimeError("the shared RabbitMQ did not start in time")
        if self._error is not None:
            raise RuntimeError(f"the shared RabbitMQ did not start: {self._error}")

    def stop(self) -> None:
        """Blocking: stop the node (by pid) and its thread."""
        if self._token is not None and self._stop is not None:
            stop = self._stop
            with contextlib.suppress(trio.RunFinishedError):
                trio.from_thread.run_sync(stop.set, trio_token=self._token)
        self._thread.join(60)
        shutil.rmtree(self.base, ignore_errors=True)

    @property
    def address(self) -> tuple[str, int]:
        return self.server.stream_address

    def url(self, vhost: str) -> str:
        host, port = self.address
        return f"rabbitmq-stream://guest:guest@{host}:{port}/{vhost}"

    def new_vhost(self) -> str:
        """Blocking (call from a worker thread): a virtual host no test used yet."""
        with self._lock:
            if not self._vhosts:
                names = [f"t{self._made + i}" for i in range(VHOST_BATCH)]
                assert self._token is not None
                trio.from_thread.run(self._make, names, trio_token=self._token)
                self._made += len(names)
                self._vhosts.extend(names)
            return self._vhosts.pop(0)

    async def _make(self, names: list[str]) -> None:
        definitions = {
            "vhosts": [{"name": n} for n in names],
            "permissions": [
                {"user": USER, "vhost": n, "configure": ".*", "write": ".*", "read": ".*"}
                for n in names
            ],
        }
        path = self.base / f"vhosts-{names[0]}.json"
        path.write_text(json.dumps(definitions))
        await self.server.rabbitmqctl("import_definitions", str(path))


_shared: SharedRabbitMQ | None = None
_starting = threading.Lock()


def shared_rabbitmq() -> SharedRabbitMQ:
    """Blocking (call from a worker thread): the session's node, started on first use."""
    global _shared
    require_rabbitmq()
    with _starting:
        if _shared is None:
            base = Path(tempfile.mkdtemp(prefix="streamgate-rabbitmq-"))
            shared = SharedRabbitMQ(base)
            shared.start()
            _shared = shared
        return _shared


def stop_shared_rabbitmq() -> None:
    global _shared
    with _starting:
        if _shared is not None:
            _shared.stop()
            _shared = None
