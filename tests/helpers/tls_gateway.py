"""A real ``streamgate run`` with TLS on every listener and on the admin port, for the TLS tests:

- kafka: plaintext on its port AND TLS beside it (``tls.port``), client certificates optional,
  SASL PLAIN required (user ``alice``), so a certificate alone logs in;
- rabbitmq_stream: TLS only, a client certificate required;
- iggy: TLS only, no client certificate;
- rog: plaintext only (a TLS client there is refused);
- admin: plaintext, and TLS beside it.

The addresses of the TLS ports are read from the ``(tls)`` / ``https://`` lines ``run`` prints.
"""

from __future__ import annotations

import ssl
import urllib.request
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.helpers.certs import Certs, make_certs
from tests.helpers.gateways import Gateway, running_gateway

ALICE, ALICE_PASSWORD = "alice", "alice-secret"
HANDSHAKE_TIMEOUT_S = 2.0


@dataclass
class TlsGateway:
    gateway: Gateway
    certs: Certs
    tls: dict[str, str]  # endpoint -> host:port of its TLS port

    @property
    def pid(self) -> int:
        return self.gateway.pid

    def plain(self, endpoint: str) -> str:
        return self.gateway.addresses[endpoint]

    def tls_port(self, endpoint: str) -> int:
        return int(self.tls[endpoint].rsplit(":", 1)[1])

    def client_context(self, user: str | None = None, ca: Path | None = None) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(ca or self.certs.ca_file))
        if user is not None:
            cert, key = self.certs.client(user)
            context.load_cert_chain(str(cert), str(key))
        return context

    def metrics(self) -> str:
        """/metrics over the admin port's TLS side."""
        with urllib.request.urlopen(
            f"https://{self.tls['admin']}/metrics", context=self.client_context(), timeout=5
        ) as response:
            return str(response.read().decode())

    def tls_errors(self, protocol: str) -> float:
        needle = f'streamgate_connection_errors_total{{protocol="{protocol}",reason="tls"}} '
        for line in self.metrics().splitlines():
            if line.startswith(needle):
                return float(line.split()[-1])
        raise AssertionError(f"no {needle!r} series")


def _tls_lines(log: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for line in log.splitlines():
        words = line.split()
        if len(words) >= 4 and words[1:3] == ["listening", "on"]:
            if words[0] == "admin" and words[3].startswith("https://"):
                found["admin"] = words[3].removeprefix("https://")
            elif words[4:5] == ["(tls)"]:
                found[words[0]] = words[3]
    return found


def tls_settings(certs: Certs, kafka_tls_port: int, admin_tls_port: int) -> list[str]:
    sets = {
        "auth.users": f"{ALICE}:{ALICE_PASSWORD}",
        "listeners.kafka.sasl": "true",
        "listeners.kafka.tls.enabled": "true",
        "listeners.kafka.tls.port": str(kafka_tls_port),
        "listeners.kafka.tls.client_auth": "optional",
        "listeners.rabbitmq_stream.tls.enabled": "true",
        "listeners.rabbitmq_stream.tls.client_auth": "required",
        "listeners.iggy.tls.enabled": "true",
        "admin.tls.enabled": "true",
        "admin.tls.port": str(admin_tls_port),
    }
    for prefix in ("listeners.kafka", "listeners.rabbitmq_stream", "listeners.iggy", "admin"):
        sets[f"{prefix}.tls.cert_file"] = str(certs.cert_file)
        sets[f"{prefix}.tls.key_file"] = str(certs.key_file)
        sets[f"{prefix}.tls.ca_file"] = str(certs.ca_file)
        sets[f"{prefix}.tls.handshake_timeout_s"] = str(HANDSHAKE_TIMEOUT_S)
    return [arg for key, value in sets.items() for arg in ("--set", f"{key}={value}")]


@asynccontextmanager
async def tls_gateway(directory: Path) -> AsyncIterator[TlsGateway]:
    certs = make_certs(directory / "certs")
    async with running_gateway(
        f"embedded:{directory / 'data'}", directory, "tls", *tls_settings(certs, 0, 0),
    ) as gateway:  # fmt: skip
        tls = _tls_lines(gateway.log_path.read_text(errors="replace"))
        assert set(tls) == {"kafka", "rabbitmq_stream", "iggy", "admin"}, gateway.log()
        yield TlsGateway(gateway, certs, tls)


__all__ = ["ALICE", "ALICE_PASSWORD", "HANDSHAKE_TIMEOUT_S", "TlsGateway", "tls_gateway"]
