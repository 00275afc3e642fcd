"""One process owns a data directory: an exclusive ``flock`` on ``<dir>/.streamgate.lock``.

The store takes it before it reads anything and drops it when it closes; the kernel drops it
when the process dies (SIGKILL included), so a lock file left behind never blocks anyone.
Without it two processes append at the same offsets and one's acknowledged messages are lost.

The file's content (JSON, rewritten in place: replacing the file would swap the locked inode)
tells a second opener who owns the directory: the owner's pid and, once ``streamgate run`` has
bound them, its listeners, so that it can be pointed at one instead (``kafka_url``).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote

from gateway.model import DEFAULT_STREAM, BackendUnavailable

LOCK_FILE: Final = ".streamgate.lock"
_READ_TRIES: Final = 20  # the owner writes its pid right after locking: wait that long at most
_READ_PAUSE_S: Final = 0.01
# Bound to every interface, reached here through the loopback interface.
_WILDCARDS: Final = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}


@dataclass(frozen=True, slots=True)
class Listener:
    """A listener of the owning gateway, as a client on this machine reaches it."""

    protocol: str
    host: str
    port: int
    stream: str | None = None  # Kafka: the one stream (namespace) the listener serves
    sasl: bool = False  # Kafka: SASL required before any other request

    def url(self, stream: str = DEFAULT_STREAM) -> str | None:
        """The client commands' ``--url`` for this listener, for ``stream`` where the URL names
        it (a RabbitMQ virtual host); None where there is no backend of the protocol (Rog)."""
        host = _WILDCARDS.get(self.host, self.host)
        netloc = f"[{host}]:{self.port}" if ":" in host else f"{host}:{self.port}"
        match self.protocol:
            case "kafka":
                return f"kafka://{netloc}"
            case "iggy":
                return f"iggy://USER:PASSWORD@{netloc}"
            case "rabbitmq_stream":
                vhost = "/" if stream == DEFAULT_STREAM else stream  # DESIGN.md §3
                return f"rabbitmq-stream://USER:PASSWORD@{netloc}/{quote(vhost, safe='')}"
        return None


@dataclass(frozen=True, slots=True)
class Owner:
    """What the lock file says: who holds the directory and where it serves it."""

    pid: int
    listeners: tuple[Listener, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "listeners": {
                entry.protocol: {"host": entry.host, "port": entry.port}
                | ({} if entry.stream is None else {"stream": entry.stream, "sasl": entry.sasl})
                for entry in self.listeners
            },
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Owner:
        listeners = data.get("listeners") or {}
        return cls(
            pid=int(data["pid"]),
            listeners=tuple(
                Listener(
                    protocol=str(protocol),
                    host=str(entry["host"]),
                    port=int(entry["port"]),
                    stream=None if entry.get("stream") is None else str(entry["stream"]),
                    sasl=bool(entry.get("sasl", False)),
                )
                for protocol, entry in listeners.items()
            ),
        )

    def kafka_url(self, stream: str) -> str | None:
        """The Kafka listener's URL when a client command on ``stream`` can go through it: it
        serves that stream and asks for no SASL (the Kafka backend speaks none)."""
        for entry in self.listeners:
            if entry.protocol == "kafka" and not entry.sasl and entry.stream == stream:
                return entry.url()
        return None


class StoreInUse(BackendUnavailable):
    """The data directory is another process's. Not retriable: it stays so while that runs."""

    retriable = False

    def __init__(self, root: str, owner: Owner | None, *, stream: str = DEFAULT_STREAM) -> None:
        self.root = root
        self.directory = _shown(root)
        self.owner = owner
        super().__init__(
            f"data directory {self.directory} is in use by {_who(owner)}; {_hint(owner, stream)}"
        )


def _shown(root: str) -> str:
    # ``embedded:./data`` arrives as ``data`` (pathlib drops the ``./``): give it back.
    return root if os.path.isabs(root) or root.startswith(".") else f".{os.sep}{root}"


def _who(owner: Owner | None) -> str:
    return "another process" if owner is None else f"streamgate (pid {owner.pid})"


def _hint(owner: Owner | None, stream: str) -> str:
    if owner is None or not owner.listeners:
        return "stop it, or reach it through its listeners once they are bound"
    kafka = owner.kafka_url(stream)
    if kafka is not None:
        return f"reach it through its listener: --url {kafka}"
    urls = [
        f"--url {url}" + (" (SASL)" if entry.sasl else "")
        + ("" if entry.stream in (None, stream) else f" (stream {entry.stream})")
        for entry in owner.listeners
        if (url := entry.url(stream)) is not None
    ]  # fmt: skip
    if not urls:
        return "stop it first: it serves no listener a client command can use"
    return f"reach it through one of its listeners: {', '.join(urls)}"


class Ownership:
    """The lock, held: the open lock file. Blocking methods (call them in a worker thread)."""

    def __init__(self, root: str, fd: int) -> None:
        self.root = root
        self._fd = fd

    def record(self, owner: Owner) -> None:
        """Rewrite the lock file's content. New bytes first, then the length: a reader in
        between sees the new JSON with a tail of the old after it, which ``read_owner``
        ignores."""
        data = json.dumps(owner.to_json(), sort_keys=True).encode()
        os.pwrite(self._fd, data, 0)
        os.ftruncate(self._fd, len(data))

    def release(self) -> None:
        """Forget the listeners and drop the lock (closing the file drops it)."""
        if self._fd < 0:
            return
        fd, self._fd = self._fd, -1
        try:
            os.ftruncate(fd, 0)  # a cleanly closed directory advertises no dead listeners
        finally:
            os.close(fd)


def acquire(root: str) -> Ownership:
    """Lock ``root`` (which exists) for this process, or raise ``StoreInUse`` having written
    nothing."""
    fd = os.open(os.path.join(root, LOCK_FILE), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        owner = read_owner(fd)
        os.close(fd)
        raise StoreInUse(root, owner) from None
    except BaseException:
        os.close(fd)
        raise
    ownership = Ownership(root, fd)
    try:
        ownership.record(Owner(pid=os.getpid()))
    except BaseException:
        ownership.release()
        raise
    return ownership


def read_owner(fd: int) -> Owner | None:
    """The owner the lock file names; None when it names none (briefly, right after the lock
    was taken, or a file this code did not write)."""
    for attempt in range(_READ_TRIES):
        if attempt:
            time.sleep(_READ_PAUSE_S)
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError, AttributeError):
            text = os.pread(fd, 1 << 16, 0).decode()
            data, _ = json.JSONDecoder().raw_decode(text)  # a longer old tail may follow
            return Owner.from_json(data)
    return None
