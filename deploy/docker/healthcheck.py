"""The image's HEALTHCHECK: exit 0 when this container's gateway answers ``GET /livez`` with 200.

Run by the image's Python (the gateway's virtualenv), it reads the admin address from the
gateway's own configuration (STREAMGATE_CONFIG and the STREAMGATE_* variables), so a changed
``admin.port`` or ``admin.host`` is followed; an address that binds every interface is asked on
loopback. ``/livez`` never depends on the backend: a slow broker does not make the container
unhealthy (README, "Metrics and health").
"""

from __future__ import annotations

import os
import sys
import urllib.request

from gateway.config import ConfigError, load

TIMEOUT_S = 2.0
_ANY = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}


def livez_url() -> str:
    config = load(os.environ.get("STREAMGATE_CONFIG"), environ=os.environ)
    if not config.admin.enabled:
        raise ConfigError("admin.enabled is false: there is no /livez to ask")
    host = config.admin.host or config.host
    host = _ANY.get(host, host)
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{config.admin.port}/livez"


def main() -> int:
    try:
        url = livez_url()
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
            status = response.status
    except (ConfigError, OSError) as exc:  # urllib's errors are OSErrors
        print(f"unhealthy: {exc}", file=sys.stderr)
        return 1
    if status != 200:
        print(f"unhealthy: {url} answered {status}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
