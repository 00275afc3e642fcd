"""A TLS-terminating TCP proxy for tests: TLS (trio's SSLStream, the test's certificates) on a
loopback port in front of a plaintext server, for brokers that have no TLS listener here (Tansu;
an Iggy server). Each accepted connection gets one TCP connection to the upstream and two pumps;
a failed handshake (a client that refuses the certificate) only ends that connection, and is
counted in ``refused``.

    async with tls_proxy(certs) as proxy:  # proxy.port; proxy.upstream = ("127.0.0.1", port)
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import trio

from tests.helpers.certs import Certs

__all__ = ["TlsProxy", "server_context", "tls_proxy"]

_CHUNK = 1 << 16


def server_context(certs: Certs, *, client_ca: bool = False) -> ssl.SSLContext:
    """A server context on ``certs``; with ``client_ca``, a client certificate signed by the
    test CA is required (mTLS)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(certs.cert_file, certs.key_file)
    if client_ca:
        context.load_verify_locations(certs.ca_file)
        context.verify_mode = ssl.CERT_REQUIRED
    return context


@dataclass
class TlsProxy:
    port: int
    upstream: tuple[str, int] | None = None  # may be set after the start (Tansu advertises us)
    accepted: int = 0
    refused: int = 0
    peer_certs: list[dict[str, object]] = field(default_factory=list)


async def _pump(source: trio.abc.ReceiveStream, sink: trio.abc.SendStream) -> None:
    """Copy until EOF or a broken side, then close ``sink``: the other pump ends too."""
    try:
        while data := await source.receive_some(_CHUNK):
            await sink.send_all(data)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    finally:
        await trio.aclose_forcefully(sink)


async def _serve_one(proxy: TlsProxy, client: trio.SSLStream[trio.SocketStream]) -> None:
    async with client:
        try:
            await client.do_handshake()
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            proxy.refused += 1
            return
        proxy.accepted += 1
        peer = client.getpeercert()
        if peer:
            proxy.peer_certs.append(dict(peer))
        if proxy.upstream is None:
            return
        try:
            upstream = await trio.open_tcp_stream(*proxy.upstream)
        except OSError:
            return
        async with upstream, trio.open_nursery() as nursery:
            nursery.start_soon(_pump, client, upstream)
            nursery.start_soon(_pump, upstream, client)


@asynccontextmanager
async def tls_proxy(
    certs: Certs, upstream: tuple[str, int] | None = None, *, client_ca: bool = False
) -> AsyncIterator[TlsProxy]:
    """The proxy on a free loopback port until the block ends (then every connection is cut)."""
    listeners = await trio.open_ssl_over_tcp_listeners(
        0, server_context(certs, client_ca=client_ca), host="127.0.0.1"
    )
    tcp = listeners[0].transport_listener
    assert isinstance(tcp, trio.SocketListener)
    proxy = TlsProxy(tcp.socket.getsockname()[1], upstream)

    async def handler(stream: trio.SSLStream[trio.SocketStream]) -> None:
        await _serve_one(proxy, stream)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.serve_listeners, handler, listeners)
        try:
            yield proxy
        finally:
            nursery.cancel_scope.cancel()
