"""Certificates for the TLS tests, made on the spot by trustme: a private CA, a server
certificate for 127.0.0.1 and localhost, and client certificates whose subject names a user.
Written as PEM files so that the gateway's config, the backends and real clients read them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import trustme


@dataclass(frozen=True)
class Certs:
    ca_file: Path  # the CA certificate clients and servers trust
    cert_file: Path  # the server's certificate chain
    key_file: Path  # the server's private key
    directory: Path
    _ca: trustme.CA

    def client(self, user: str) -> tuple[Path, Path]:
        """(certificate, key) of a client certificate with CN ``user`` (and ``user`` as a SAN),
        signed by this CA."""
        cert = self._ca.issue_cert(user, common_name=user)
        cert_file = self.directory / f"client-{user}.pem"
        key_file = self.directory / f"client-{user}.key"
        cert.cert_chain_pems[0].write_to_path(str(cert_file))
        cert.private_key_pem.write_to_path(str(key_file))
        return cert_file, key_file


def make_certs(directory: Path, hosts: tuple[str, ...] = ("127.0.0.1", "localhost")) -> Certs:
    """A fresh CA and a server certificate for ``hosts`` in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA()
    server = ca.issue_cert(*hosts)
    ca_file, cert_file, key_file = (
        directory / "ca.pem",
        directory / "server.pem",
        directory / "server.key",
    )
    ca.cert_pem.write_to_path(str(ca_file))
    with cert_file.open("wb") as out:
        for pem in server.cert_chain_pems:
            out.write(pem.bytes())
    server.private_key_pem.write_to_path(str(key_file))
    return Certs(ca_file, cert_file, key_file, directory, ca)


def other_ca_file(directory: Path) -> Path:
    """A CA that signed nothing here: trusting only it, a client must refuse the server."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "other-ca.pem"
    trustme.CA().cert_pem.write_to_path(str(path))
    return path


__all__ = ["Certs", "make_certs", "other_ca_file"]
