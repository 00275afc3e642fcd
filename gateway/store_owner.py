"""The store owner of ``streamgate run --workers N`` on the embedded backend: one process opens
the data directory (its lock, its recovery, its fsyncs, retention, the transaction coordinator)
and serves the store to the workers over a unix socket (``backends.embedded.link``); it serves
no protocol listener and no admin port (the supervisor's and the workers' do). It says
``store listening on PATH`` when it is ready. On SIGTERM/SIGINT it closes the store once no
worker is connected (the supervisor sends it once the workers have drained; a Ctrl-C or a
``timeout`` reaches the whole process group at once, and the workers still draining need the
store), or after the drain timeout and 5 s.
"""

from __future__ import annotations

import signal
from collections.abc import Callable

import structlog
import trio

from gateway.app import build_backend
from gateway.backends.base import running
from gateway.backends.embedded import EmbeddedBackend
from gateway.backends.embedded.link import Clients, serve_store
from gateway.config import Config, ConfigError
from gateway.metrics import Metrics

log = structlog.get_logger("streamgate.store")


def _announce(path: str) -> None:
    print(f"store listening on {path}", flush=True)  # the supervisor waits for this line


async def serve_store_owner(config: Config, announce: Callable[[str], None] = _announce) -> None:
    backend = build_backend(config)
    if not isinstance(backend, EmbeddedBackend):
        raise ConfigError("store_socket is for the embedded backend only")
    # The disk's metrics (errors by kind, writable, what recovery cut out) are the owner's to
    # count: written where the supervisor sums the workers' (PROMETHEUS_MULTIPROC_DIR). Its
    # backend_up is 1 while it runs: the owner is the backend (the lowest of all is shown).
    metrics = Metrics(backend=backend.name, process=False)
    metrics.backend_up.labels(backend.name).set(1)
    backend.storage.listen(metrics.storage_event)
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with running(backend), trio.open_nursery() as nursery:
            clients = Clients()
            path = await nursery.start(serve_store, backend, config.store_socket, clients)
            announce(path)
            log.info("store owner ready", socket=path)
            async for signum in signals:
                log.info("store owner closing", signal=signal.Signals(signum).name)
                break
            with trio.move_on_after(config.limits.drain_timeout_s + 5):
                while clients.count:  # noqa: ASYNC110 - the workers' links, closing as they exit
                    await trio.sleep(0.05)
            nursery.cancel_scope.cancel()


__all__ = ["serve_store_owner"]
