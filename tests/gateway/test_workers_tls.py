"""``streamgate run --workers 2`` with a TLS-only Kafka listener on a real Tansu: every worker
serves TLS on the shared port, and SIGHUP to the supervisor reaches the workers (new files, new
certificate for new connections; nobody dies of the signal). The supervisor serves the admin
port over TLS (the workers' summed metrics), its certificate re-read on the same SIGHUP."""

from __future__ import annotations

import signal
import socket
import ssl
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio
from cryptography import x509

from tests.helpers.certs import make_certs
from tests.helpers.gateways import supervisor
from tests.helpers.processes import alive, send_signal
from tests.helpers.tansu import Tansu, running_tansu


@pytest.fixture
async def tansu(tmp_path: Path) -> AsyncIterator[Tansu]:
    async with running_tansu(tmp_path) as started:
        yield started


def _serial(address: str, context: ssl.SSLContext) -> int:
    host, port = address.rsplit(":", 1)
    with (
        socket.create_connection((host, int(port)), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname=host) as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return int(x509.load_der_x509_certificate(der).serial_number)


def _get(address: str, path: str, context: ssl.SSLContext) -> str:
    with urllib.request.urlopen(f"https://{address}{path}", timeout=10, context=context) as r:
        return str(r.read().decode())


async def test_workers_serve_tls_and_pass_sighup_on(tmp_path: Path, tansu: Tansu) -> None:
    certs = make_certs(tmp_path / "certs")
    sets = {
        "listeners.kafka.tls.enabled": "true",
        "listeners.kafka.tls.cert_file": str(certs.cert_file),
        "listeners.kafka.tls.key_file": str(certs.key_file),
        "admin.tls.enabled": "true",
        "admin.tls.cert_file": str(certs.cert_file),
        "admin.tls.key_file": str(certs.key_file),
    }
    extra = [a for k, v in sets.items() for a in ("--set", f"{k}={v}")]
    context = ssl.create_default_context(cafile=str(certs.ca_file))
    with trio.fail_after(120):
        async with supervisor(tmp_path, tansu.url, 2, *extra) as (proc, addresses, pids):
            kafka = addresses["kafka"]
            admin = addresses["admin"].removeprefix("https://")
            first = await trio.to_thread.run_sync(_serial, kafka, context)
            assert await trio.to_thread.run_sync(_serial, admin, context) == first
            metrics = await trio.to_thread.run_sync(_get, admin, "/metrics", context)
            assert 'worker="supervisor"' in metrics  # the summed endpoint: the supervisor's
            fresh = make_certs(tmp_path / "fresh")  # a new CA too: the client trusts both
            context.load_verify_locations(cafile=str(fresh.ca_file))
            certs.key_file.write_bytes(fresh.key_file.read_bytes())
            certs.cert_file.write_bytes(fresh.cert_file.read_bytes())
            second = x509.load_pem_x509_certificate(fresh.cert_file.read_bytes()).serial_number
            send_signal(proc.pid, signal.SIGHUP)
            # Every worker: enough new connections that the kernel hands some to each.
            seen: set[int] = set()
            with trio.move_on_after(20):
                while True:
                    seen = {await trio.to_thread.run_sync(_serial, kafka, context)
                            for _ in range(16)}  # fmt: skip
                    if seen == {second}:
                        break
                    await trio.sleep(0.2)
            assert seen == {second} and first != second
            assert await trio.to_thread.run_sync(_serial, admin, context) == second
            assert proc.returncode is None
            assert all(alive(pid) for pid in pids)
        log = (tmp_path / "supervisor.log").read_text(errors="replace")
        assert f"kafka listening on {kafka} (tls)" in log.splitlines()
        assert f"admin listening on https://{admin} " in log
        # Each worker and the supervisor got the signal (the files' mtimes alone would have
        # reloaded them too).
        assert log.count("SIGHUP: re-reading tls certificates") == 3, log[-3000:]
