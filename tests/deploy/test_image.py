"""The image's install steps, run on the host into a clean virtualenv (tests/deploy/image.py
follows deploy/Dockerfile instruction by instruction), and the result started as the image
would start it: its ENTRYPOINT and CMD, its ENV and config file, on free loopback ports.

Then ``/livez`` and ``/readyz`` answer, the HEALTHCHECK command passes, SIGTERM ends it with
status 0 within the drain time (plus the close margin), and the HEALTHCHECK fails once it is gone.
"""

from __future__ import annotations

import subprocess
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

from gateway.config import load
from tests.deploy.image import HostImage, build_on_host
from tests.helpers.processes import end_child, free_ports

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
VENV = "/opt/streamgate"  # where install.sh's venv step puts the gateway in the image
START_S = 30.0
CLOSE_MARGIN_S = 5.0
PORT_KEYS = (
    "STREAMGATE_LISTENERS_ROG_PORT", "STREAMGATE_LISTENERS_KAFKA_PORT",
    "STREAMGATE_LISTENERS_IGGY_PORT", "STREAMGATE_LISTENERS_RABBITMQ_STREAM_PORT",
    "STREAMGATE_ADMIN_PORT",
)  # fmt: skip


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> HostImage:
    """The image, built once for this module (building the wheel and installing it with its
    dependencies is most of the time these tests take)."""
    return build_on_host(DOCKERFILE, ROOT, tmp_path_factory.mktemp("image"))


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError as exc:
        return 0, str(exc)


def healthcheck(image: HostImage, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        image.healthcheck, env=env, capture_output=True, text=True, timeout=30, check=False
    )


@asynccontextmanager
async def started(
    image: HostImage, tmp_path: Path
) -> AsyncIterator[tuple[trio.Process, dict[str, str], Path]]:
    """The image's command with its environment, on free loopback ports (picked again if one
    was taken in between), the embedded log in ``tmp_path``: the process, its environment and
    its output's file, once /livez answers."""
    assert image.workdir is not None
    image.workdir.mkdir(parents=True, exist_ok=True)  # the account set-up's `install -d`
    for attempt in range(3):
        ports = dict(zip(PORT_KEYS, (str(p) for p in free_ports(len(PORT_KEYS))), strict=True))
        env = {
            **image.env, **ports,
            "STREAMGATE_HOST": "127.0.0.1",
            "STREAMGATE_BACKEND_URL": f"embedded:{tmp_path / 'data'}",
        }  # fmt: skip
        log_path = tmp_path / f"gateway-{attempt}.log"
        with log_path.open("wb") as out:
            process = await trio.lowlevel.open_process(
                image.command, env=env, cwd=image.workdir, stdin=subprocess.DEVNULL,
                stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
        try:
            livez = f"http://127.0.0.1:{ports['STREAMGATE_ADMIN_PORT']}/livez"
            with trio.fail_after(START_S):
                while process.returncode is None:
                    status, _ = await trio.to_thread.run_sync(get, livez)
                    if status == 200:
                        break
                    await trio.sleep(0.1)
            if process.returncode is None:
                yield process, env, log_path
                return
            if "address already in use" not in log_path.read_text(errors="replace").lower():
                raise AssertionError(f"the gateway exited at start:\n{log_path.read_text()}")
        finally:
            with trio.CancelScope(shield=True):
                await end_child(process, grace_s=0, term_s=10)
    raise AssertionError("no free ports in three attempts")


@pytest.mark.slow
async def test_the_install_steps_give_a_gateway_that_serves_and_drains(
    image: HostImage, tmp_path: Path
) -> None:
    # The steps the image runs, in its order (their arguments are the Dockerfile's own).
    assert [step[0] for step in image.steps] == ["wheel", "venv"]
    venv = image.inside(VENV)
    assert image.command[0] == str(venv / "bin" / "streamgate")
    # install.sh took pip and setuptools out again: only the gateway and its dependencies.
    leftovers = await trio.run_process(
        [str(venv / "bin" / "python"), "-c", "import pip"], capture_stdout=True,
        capture_stderr=True, check=False,
    )  # fmt: skip
    assert leftovers.returncode != 0
    drain_s = load(image.env["STREAMGATE_CONFIG"]).limits.drain_timeout_s

    with trio.fail_after(START_S + drain_s + 60):
        async with started(image, tmp_path) as (process, env, log_path):
            admin = f"http://127.0.0.1:{env['STREAMGATE_ADMIN_PORT']}"
            assert await trio.to_thread.run_sync(get, f"{admin}/livez") == (200, "ok\n")
            assert await trio.to_thread.run_sync(get, f"{admin}/readyz") == (200, "ok\n")
            result = await trio.to_thread.run_sync(healthcheck, image, env)
            assert result.returncode == 0, result.stderr
            process.terminate()
            with trio.move_on_after(drain_s + CLOSE_MARGIN_S):
                await process.wait()
            assert process.returncode == 0, log_path.read_text()
        # Gone: the same HEALTHCHECK now reports it, so a pass above meant something.
        result = await trio.to_thread.run_sync(healthcheck, image, env)
        assert result.returncode == 1
        assert "unhealthy" in result.stderr
