"""Older Iggy clients (the classic framing, iggy.md §9) as subprocesses of their own venvs.

apache-iggy 0.8.0 and iggy-py 0.4.0 cannot share the main venv with apache-iggy 0.9.0, so
`make test` builds .venv-iggy08 and .venv-iggypy04 next to .venv and each test runs a script
of scripts/ with that venv's python against the in-process gateway, bounded in time (the
process is killed, by its pid, if it overruns). A script prints one JSON object: what the
client read back, bytes as hex. A missing venv skips the tests, but fails them under CI=true.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trio

from gateway.app import Running
from protocols.iggy import Header, HeaderKind, HeaderValue

REPO = Path(__file__).resolve().parents[4]
SCRIPTS = Path(__file__).parent / "scripts"

BINARY = [bytes(range(256)), b"\x00", b"\xff" * 300, "ünïcødé ✓".encode(), b"five"]
HEADERS = (  # typed user headers, as era B and C carry them (§2 TLV)
    Header(key=HeaderValue.string("trace"), value=HeaderValue.string("abc-123")),
    Header(key=HeaderValue.string("attempt"), value=HeaderValue.integer(HeaderKind.UINT32, 3)),
    Header(key=HeaderValue.string("blob"), value=HeaderValue.raw(b"\x00\xff\x10")),
)


@dataclass(frozen=True)
class OlderClient:
    venv: str
    package: str
    script: str

    @property
    def python(self) -> Path:
        return REPO / self.venv / "bin" / "python"

    def require(self) -> OlderClient:
        if not self.python.exists():
            why = f"{self.venv} is missing ({self.package}; `make older-clients` builds it)"
            if os.environ.get("CI") == "true":
                pytest.fail(f"{why}; CI must run these tests")
            pytest.skip(why)
        return self

    async def run(self, running: Running, scenario: str, limit_s: float = 30, **args: Any) -> Any:
        """Run ``scenario`` of the script against the gateway; its JSON result."""
        host, port = running.address("iggy")
        argv = [str(self.python), str(SCRIPTS / self.script), f"{host}:{port}", scenario]
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        with trio.fail_after(limit_s):
            done = await trio.run_process(
                [*argv, json.dumps(args)],
                capture_stdout=True,
                capture_stderr=True,
                check=False,
                env=env,
            )
        out, err = done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace")
        assert done.returncode == 0, (
            f"{self.script} {scenario} exited {done.returncode}\nstdout:\n{out}\nstderr:\n{err}"
        )
        lines = out.strip().splitlines()
        assert lines, f"{self.script} {scenario} printed nothing\nstderr:\n{err}"
        return json.loads(lines[-1])


APACHE_IGGY_08 = OlderClient(".venv-iggy08", "apache-iggy==0.8.0", "apache_iggy_08.py")
IGGY_PY_04 = OlderClient(".venv-iggypy04", "iggy-py==0.4.0", "iggy_py_04.py")


@pytest.fixture
def iggy08() -> OlderClient:
    return APACHE_IGGY_08.require()


@pytest.fixture
def iggypy04() -> OlderClient:
    return IGGY_PY_04.require()


def hexes(payloads: list[bytes]) -> list[str]:
    return [p.hex() for p in payloads]


def polled(messages: list[dict[str, Any]], field: str = "payload") -> list[Any]:
    """One field of each message a script polled; payloads back as bytes."""
    values = [m[field] for m in messages]
    return [bytes.fromhex(v) for v in values] if field == "payload" else values
