"""Reaching the topics of a URL from Spark's Python processes, through the gateway's own backend
adapters (``gateway.client.session.connected``, as ``streamgate consume`` does).

The embedded store has one owner process (an exclusive flock, ``gateway/backends/embedded/
owner.py``), and Spark plans and runs a query in several Python processes at once. So:

* a directory a gateway serves (the lock file names its listeners) is reached through that
  gateway's Kafka listener, as the client commands do; every task can, at the same time;
* a directory nobody serves is opened by whoever needs it for one unit of work and closed
  after it: a planning step, or a chunk of a task (``CHUNK_BYTES`` read into Arrow, or
  appended). It is never held while waiting on Spark (to hand it rows, or for rows): one task
  of a read-and-write query is two Python processes, the reading one and the writing one, and
  either would otherwise wait for the other for ever. Whoever finds it held by another process
  (a task of the same job, on the same machine) waits for it, polling, at most
  ``lockTimeoutMs``. Tasks on the store therefore take turns: correct, but one at a time. Serve
  the directory with ``streamgate run`` to read and write it in parallel.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Final

import trio

from gateway.backends.base import Backend, BackendUrlError
from gateway.backends.embedded import StoreInUse, embedded_path
from gateway.client.session import ClientError, connected, redacted
from gateway.model import DEFAULT_STREAM, GatewayError, Topic

from .errors import OptionError, PipelineError
from .options import Connection

# What a task reads into Arrow, or appends, per opening of an embedded store it holds itself:
# opening one costs ~10 ms, reading this much ~0.3 s.
CHUNK_BYTES: Final = 32 << 20
_FIRST_PAUSE_S: Final = 0.01  # waiting for the embedded store's lock: first pause, doubling
_LONGEST_PAUSE_S: Final = 0.2


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A started backend that answers, and the stream the read or written topics are in on it
    (through a gateway's Kafka listener: the Kafka backend's one stream)."""

    backend: Backend
    stream: str
    shown: str  # the URL reached, without secrets: for messages
    holds_store: bool = False  # an embedded store this process opened (not a gateway's)

    def topic(self, name: str) -> Topic:
        return Topic(self.stream, name)


@asynccontextmanager
async def open_endpoint(conn: Connection) -> AsyncIterator[Endpoint]:
    """The endpoint of ``conn.url``, within ``conn.timeout_s`` (plus, for an embedded store
    another process holds, ``conn.lock_timeout_s``); stopped on exit."""
    _check_embedded(conn.url)
    async with AsyncExitStack() as stack:
        yield await _reach(stack, conn)


async def _reach(stack: AsyncExitStack, conn: Connection) -> Endpoint:
    give_up = trio.current_time() + conn.lock_timeout_s
    pause = _FIRST_PAUSE_S
    while True:
        try:
            backend = await stack.enter_async_context(connected(conn.url, conn.timeout_s))
            holds = _store_dir(conn.url) is not None
            return Endpoint(backend, conn.stream, redacted(conn.url), holds_store=holds)
        except ClientError as exc:
            raise OptionError("url", str(exc)) from None
        except StoreInUse as exc:
            if exc.owner is not None and exc.owner.listeners:
                return await _through_listener(stack, conn, exc)
            if exc.owner is not None and exc.owner.pid == os.getpid():
                raise PipelineError(f"{exc.message}: this process holds it already") from None
            if trio.current_time() >= give_up:
                raise PipelineError(
                    f"{exc.message}; still so after waiting {conn.lock_timeout_s:g} s "
                    "(option lockTimeoutMs)"
                ) from None
        except GatewayError as exc:
            raise _unreachable(conn, exc) from None
        await trio.sleep(pause)
        pause = min(2 * pause, _LONGEST_PAUSE_S)


async def _through_listener(stack: AsyncExitStack, conn: Connection, exc: StoreInUse) -> Endpoint:
    """A gateway serves the directory: its Kafka listener, when that serves the stream without
    SASL; else the lock's own message, which lists the listeners to use instead."""
    assert exc.owner is not None
    url = exc.owner.kafka_url(conn.stream)
    if url is None:
        raise PipelineError(
            f"{StoreInUse(exc.root, exc.owner, stream=conn.stream).message} (option url)"
        ) from None
    try:
        backend = await stack.enter_async_context(connected(url, conn.timeout_s))
    except GatewayError as failure:
        raise _unreachable(conn, failure) from None
    return Endpoint(backend, DEFAULT_STREAM, url)


def _unreachable(conn: Connection, exc: GatewayError) -> PipelineError:
    return PipelineError(
        f"{exc.message} (option url {redacted(conn.url)!r}; option timeoutMs bounds the wait)"
    )


def _store_dir(url: str) -> str | None:
    """The embedded store's directory; None for the other backends."""
    if url.partition(":")[0].lower() != "embedded":
        return None
    try:
        return os.path.realpath(embedded_path(url))
    except BackendUrlError as exc:
        raise OptionError("url", str(exc)) from None


def _check_embedded(url: str) -> None:
    """An embedded URL must name a store that exists: the backend would create an empty one
    for a mistyped path, and the read would then fail far from the cause."""
    path = _store_dir(url)
    if path is not None and not os.path.isdir(path):
        raise OptionError("url", f"{url}: no such directory (no embedded store there)")


__all__ = ["CHUNK_BYTES", "Endpoint", "open_endpoint"]
