"""The pipeline's jobs as the processes users run (``streamgate pipeline ...``, ``spark-submit``)
and a standalone Spark cluster on loopback, for the tests: every process started here is ended
here, by its pid (SIGTERM, a bounded wait, SIGKILL), with whatever it started in turn (a Spark
driver's JVM and Python workers, a worker's executors), found through /proc while it stands."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import pyspark

from tests.helpers.processes import alive, descendants, free_ports, send_signal

SPARK_HOME: Final = Path(pyspark.__file__).parent
CLUSTER_START_S: Final = 90.0
STOP_S: Final = 20.0


def streamgate(*args: str) -> list[str]:
    """``streamgate ARGS`` (the console script's ``main``) with this interpreter."""
    return [sys.executable, "-m", "gateway.cli", *args]


def spark_env(**extra: str) -> dict[str, str]:
    return {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1",
            "PYTHONUNBUFFERED": "1", **extra}  # fmt: skip


@dataclass
class Child:
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, text: str, limit_s: float) -> None:
        """Until ``text`` is in its output; it exiting first, or the limit, fails the test."""
        give_up = time.monotonic() + limit_s
        while text not in self.text():
            code = self.process.poll()
            if code is not None or time.monotonic() > give_up:
                raise AssertionError(f"no {text!r} (exit {code}):\n{self.text()[-6000:]}")
            time.sleep(0.1)  # a log file: nothing to wait on

    def finish(self, limit_s: float) -> int:
        """Its exit status, within ``limit_s`` (else it is stopped and the test fails)."""
        try:
            return self.process.wait(limit_s)
        except subprocess.TimeoutExpired:
            end(self.process)
            raise AssertionError(
                f"still running after {limit_s} s:\n{self.text()[-6000:]}"
            ) from None


def start(argv: list[str], log: Path, env: Mapping[str, str], cwd: Path) -> Child:
    with log.open("ab") as out:
        process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            env=dict(env), cwd=cwd,
        )  # fmt: skip
    return Child(process, log)


def _until_gone(tree: Mapping[int, int], limit_s: float) -> None:
    give_up = time.monotonic() + limit_s
    while any(alive(pid, since) for pid, since in tree.items()):
        if time.monotonic() > give_up:
            for pid, since in tree.items():
                if alive(pid, since):
                    send_signal(pid, signal.SIGKILL)
            return
        time.sleep(0.05)  # not all are our children: no event to wait on


def kill(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL by pid (a crash), then the rest of its tree gone within ``STOP_S`` (a Spark
    driver's JVM exits when the Python driver's pipe closes, its Python workers with it)."""
    tree = descendants([process.pid])
    process.kill()
    process.wait(STOP_S)
    _until_gone(tree, STOP_S)


def end(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM by pid, ``STOP_S``, then SIGKILL; its tree gone after it."""
    tree = descendants([process.pid])
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(STOP_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    _until_gone(tree, STOP_S)


@contextmanager
def standalone_cluster(directory: Path, cores: int = 2, memory: str = "1g") -> Iterator[str]:
    """A Spark standalone master and one worker, from pyspark's own launcher (bin/spark-class)
    on loopback and free ports; yields the master's ``spark://`` URL."""
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    directory.mkdir(parents=True, exist_ok=True)
    env = spark_env(
        SPARK_LOG_DIR=str(directory),
        SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false",  # else it binds port 6066
    )
    port, ui, worker_port, worker_ui = free_ports(4)
    url = f"spark://127.0.0.1:{port}"
    started: list[Child] = []
    try:
        master = start(
            [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
             "--port", str(port), "--webui-port", str(ui)],
            directory / "master.log", env, directory,
        )  # fmt: skip
        started.append(master)
        master.wait_for("I have been elected leader", CLUSTER_START_S)
        worker = start(
            [spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
             "--port", str(worker_port), "--webui-port", str(worker_ui), "--cores", str(cores),
             "--memory", memory, "--work-dir", str(directory / "work")],
            directory / "worker.log", env, directory,
        )  # fmt: skip
        started.append(worker)
        worker.wait_for("Successfully registered with master", CLUSTER_START_S)
        yield url
    finally:
        for child in reversed(started):
            end(child.process)


__all__ = ["SPARK_HOME", "Child", "end", "kill", "spark_env", "standalone_cluster", "start"]
